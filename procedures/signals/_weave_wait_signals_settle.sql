-- S-11: whenever a wait leaves WAITING, every still-PENDING signal of its activation gets its
-- disposition in that same transaction, so no signal is left PENDING for a wait that can no longer
-- take it. The same routine rejects early signals that do not match while the wait stays open
-- (in_match_disposition NULL). Any wait kind that pins a signal (SIGNAL, POLL_FINAL) uses it; a POLL
-- answered by its query passes QUERY_SETTLED. Callers hold the instance row lock.
CREATE PROCEDURE _weave_wait_signals_settle(
        IN in_namespace_id      BIGINT UNSIGNED,
        IN in_instance_id       BIGINT UNSIGNED,
        IN in_wait_id           BIGINT UNSIGNED,
        IN in_match_disposition VARCHAR(32),
        IN in_now               DATETIME(6))
    COMMENT 'Internal. Description: gives every PENDING signal of a wait''s activation its disposition: a correlation
(or contract) mismatch is CORRELATION_MISMATCH, a match accepted at or after the deadline is LATE, any other match
is in_match_disposition (WAIT_SETTLED, QUERY_SETTLED, INSTANCE_SETTLED ...). With in_match_disposition NULL only
the mismatches are settled and the wait stays open. One SIGNALS_SETTLED event lists them.
Rules: S-9, S-11.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_step_key VARCHAR(64);
    DECLARE v_seq INT UNSIGNED;
    DECLARE v_count INT DEFAULT 0;
    DECLARE v_list LONGTEXT;
    DECLARE v_key VARBINARY(512);  -- the wait's pins, for the update below
    DECLARE v_name VARCHAR(128);
    DECLARE v_version VARCHAR(32);
    DECLARE v_deadline DATETIME(6);

    -- MariaDB caps JSON_ARRAYAGG at the session's group_concat_max_len and fails the read past it (1260, or a list
    -- cut short): an instance's signals (1024 at most, S-6) need about 64 KiB, within the default 1 MiB. A session
    -- with less (MySQL's 1024, kept in a server's configuration) gets the default for this read alone (SET STATEMENT,
    -- in a comment only MariaDB runs; MySQL has no such cap).
    -- The wait's pins are joined into the one read of its PENDING signals (no signal: nothing to settle),
    -- through the wait's own prefix of the signal index, so that the lock never takes another instance's
    -- signals (see _weave_signal_pick).
    /*M!100301 SET STATEMENT group_concat_max_len = 1048576 FOR */
    SELECT COUNT(*), JSON_ARRAYAGG(JSON_OBJECT('signal_id', CONCAT('sig_', q.id), 'disposition', q.disposition)),
           MAX(q.step_key), MAX(q.seq), MAX(q.w_key), MAX(q.w_name), MAX(q.w_version), MAX(q.w_deadline)
      INTO v_count, v_list, v_step_key, v_seq, v_key, v_name, v_version, v_deadline
      FROM (SELECT s.id, w.step_key, w.activation_seq AS seq, w.correlation_key AS w_key, w.signal_name AS w_name,
                   w.payload_version AS w_version, w.deadline_at AS w_deadline,
                   CASE WHEN s.correlation_key <> w.correlation_key OR BINARY s.name <> BINARY w.signal_name
                             OR BINARY s.payload_version <> BINARY w.payload_version THEN 'CORRELATION_MISMATCH'
                        WHEN s.accepted_at >= w.deadline_at THEN 'LATE'
                        ELSE in_match_disposition END AS disposition
              FROM weave_waits w
              JOIN weave_signals s FORCE INDEX (ix_signal_target)
                ON s.instance_id = w.instance_id AND s.target_step_key = w.step_key
               AND s.target_activation_seq = w.activation_seq AND s.status = 'PENDING'
             WHERE w.id = in_wait_id AND w.instance_id = in_instance_id
             ORDER BY s.accepted_at, s.id FOR UPDATE) AS q
     WHERE q.disposition IS NOT NULL;
    IF v_count > 0 THEN
        -- One table, through the index of its own range, with the wait's pins read above: a session with
        -- sql_safe_updates (the client's --safe-updates) refuses an update that joins the wait (1175).
        UPDATE weave_signals s FORCE INDEX (ix_signal_target)
           SET s.status = 'REJECTED',
               s.disposition = CASE WHEN s.correlation_key <> v_key OR BINARY s.name <> BINARY v_name
                                         OR BINARY s.payload_version <> BINARY v_version
                                         THEN 'CORRELATION_MISMATCH'
                                    WHEN s.accepted_at >= v_deadline THEN 'LATE'
                                    ELSE in_match_disposition END,
               s.consumed_at = in_now, s.version = s.version + 1
         WHERE s.instance_id = in_instance_id AND s.target_step_key = v_step_key
           AND s.target_activation_seq = v_seq AND s.status = 'PENDING'
           AND (in_match_disposition IS NOT NULL OR s.correlation_key <> v_key
                OR BINARY s.name <> BINARY v_name OR BINARY s.payload_version <> BINARY v_version
                OR s.accepted_at >= v_deadline);
        CALL _weave_event(in_namespace_id, in_instance_id, 'SIGNALS_SETTLED', v_step_key, v_seq, in_now,
                          JSON_OBJECT('count', v_count + 0, 'signals', JSON_EXTRACT(v_list, '$')), NULL, NULL, NULL);
    END IF;
END
