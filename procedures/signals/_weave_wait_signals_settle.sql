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
    DECLARE v_name VARCHAR(128);
    DECLARE v_version VARCHAR(32);
    DECLARE v_corr VARBINARY(512);
    DECLARE v_deadline DATETIME(6);
    DECLARE v_count INT DEFAULT 0;
    DECLARE v_list LONGTEXT;

    SELECT step_key, activation_seq, signal_name, payload_version, correlation_key, deadline_at
      INTO v_step_key, v_seq, v_name, v_version, v_corr, v_deadline
      FROM weave_waits WHERE id = in_wait_id AND instance_id = in_instance_id FOR UPDATE;
    SELECT COUNT(*), JSON_ARRAYAGG(JSON_OBJECT('signal_id', CONCAT('sig_', q.id), 'disposition', q.disposition))
      INTO v_count, v_list
      FROM (SELECT s.id,
                   CASE WHEN s.correlation_key <> v_corr OR BINARY s.name <> BINARY v_name
                             OR BINARY s.payload_version <> BINARY v_version THEN 'CORRELATION_MISMATCH'
                        WHEN s.accepted_at >= v_deadline THEN 'LATE'
                        ELSE in_match_disposition END AS disposition
              FROM weave_signals s
             WHERE s.instance_id = in_instance_id AND s.target_step_key = v_step_key
               AND s.target_activation_seq = v_seq AND s.status = 'PENDING'
             ORDER BY s.accepted_at, s.id FOR UPDATE) AS q
     WHERE q.disposition IS NOT NULL;
    IF v_count > 0 THEN
        UPDATE weave_signals s
           SET s.status = 'REJECTED',
               s.disposition = CASE WHEN s.correlation_key <> v_corr OR BINARY s.name <> BINARY v_name
                                         OR BINARY s.payload_version <> BINARY v_version THEN 'CORRELATION_MISMATCH'
                                    WHEN s.accepted_at >= v_deadline THEN 'LATE'
                                    ELSE in_match_disposition END,
               s.consumed_at = in_now, s.version = s.version + 1
         WHERE s.instance_id = in_instance_id AND s.target_step_key = v_step_key
           AND s.target_activation_seq = v_seq AND s.status = 'PENDING'
           AND (in_match_disposition IS NOT NULL OR s.correlation_key <> v_corr OR BINARY s.name <> BINARY v_name
                OR BINARY s.payload_version <> BINARY v_version OR s.accepted_at >= v_deadline);
        CALL _weave_event(in_namespace_id, in_instance_id, 'SIGNALS_SETTLED', v_step_key, v_seq, in_now,
                          JSON_OBJECT('count', v_count + 0, 'signals', JSON_EXTRACT(v_list, '$')));
    END IF;
END
