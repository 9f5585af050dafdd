-- S-11 and S-12, for any wait that pins a signal (SIGNAL now, POLL_FINAL later): the candidate is the
-- first PENDING match by (accepted_at, id) among signals accepted strictly before the wait's deadline
-- (S-13: an on-time signal wins even when the deadline has passed by the time it is looked at) and
-- still alive when the wait opened: an early signal whose expires_at came first had expired by the stored
-- times (S-14), whether or not its expiry was looked at before the wait opened (F-9). It
-- only wins with its acceptance proof intact: the digest recomputed from the stored row must equal
-- the one its acceptance audit row recorded. A row changed after acceptance is rejected here and the
-- caller sends the step to review; the engine never consumes content it cannot prove it accepted.
-- The caller holds the instance and wait row locks and decides what winning means for its step type.
-- in_fresh_id names a signal the caller accepted in this very transaction (Settle at Send): its row and
-- its audit row were written a moment ago from one digest, under the locks still held, so its proof is
-- that write itself and is not read back. When that signal is the instance's first, _weave_signal_advance
-- tests it by this search's match conditions without calling the search: a change to them is made in both.
CREATE PROCEDURE _weave_signal_pick(
        IN  in_namespace_id BIGINT UNSIGNED,
        IN  in_instance_id  BIGINT UNSIGNED,
        IN  in_wait_id      BIGINT UNSIGNED,
        IN  in_now          DATETIME(6),
        IN  in_fresh_id     BIGINT UNSIGNED,
        OUT out_signal_id   BIGINT UNSIGNED,
        OUT out_proof       VARCHAR(16),
        OUT out_accepted_at DATETIME(6),
        OUT out_payload     LONGTEXT)
    COMMENT 'Internal. Description: the winner candidate of a WAITING wait with its acceptance proof checked (not read
back for in_fresh_id, a signal accepted in this transaction; NULL: none).
out_signal_id: the first on-time match not expired when the wait opened (NULL: none), out_accepted_at and out_payload (as text) its own; out_proof: OK, or MISMATCH (the signal is now REJECTED
ACCEPTANCE_PROOF_MISMATCH with an event; the caller opens the review).
Rules: S-11, S-12, S-13, S-14.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_id BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_key VARCHAR(128);
    DECLARE v_stored_digest CHAR(64);
    DECLARE v_s_name VARCHAR(128);
    DECLARE v_s_version VARCHAR(32);
    DECLARE v_s_step VARCHAR(64);
    DECLARE v_s_seq INT UNSIGNED;
    DECLARE v_s_corr VARBINARY(512);
    DECLARE v_s_payload LONGBLOB;
    DECLARE v_s_reason VARCHAR(1024);
    DECLARE v_s_evidence VARCHAR(512);
    DECLARE v_recomputed CHAR(64);
    DECLARE v_audit_digest CHAR(64) DEFAULT NULL;

    SET out_signal_id = NULL, out_proof = 'OK', out_accepted_at = NULL, out_payload = NULL;
    -- The wait's pins and its first match in one read: the wait is a constant of the join, so the signal
    -- index gives the order and the read stops at the first match. The locking read must never touch another
    -- instance's signals, or a send would wait on a neighbour's open send and two would deadlock (1213). So
    -- the index is named (the index of every PENDING signal, the scan's, looks cheaper while few are
    -- PENDING), and it is read by an equality prefix alone: the on-time test is written so that it cannot
    -- bound a range, because a range read locks the first entry past its end (at READ COMMITTED too), which is
    -- the next instance's, while a prefix read stops before it.
    SELECT s.id, s.idempotency_key, s.request_digest, s.name, s.payload_version, s.target_step_key,
           s.target_activation_seq, s.correlation_key, s.payload, s.reason, s.evidence_ref, s.accepted_at
      INTO v_id, v_key, v_stored_digest, v_s_name, v_s_version, v_s_step, v_s_seq, v_s_corr, v_s_payload,
           v_s_reason, v_s_evidence, out_accepted_at
      FROM weave_waits w
      JOIN weave_signals s FORCE INDEX (ix_signal_target)
        ON s.instance_id = w.instance_id AND s.target_step_key = w.step_key AND s.target_activation_seq = w.activation_seq
       AND s.status = 'PENDING' AND TIMESTAMPDIFF(MICROSECOND, s.accepted_at, w.deadline_at) > 0
       AND TIMESTAMPDIFF(MICROSECOND, w.started_at, s.expires_at) > 0
       AND s.correlation_key = w.correlation_key
       AND BINARY s.name = BINARY w.signal_name AND BINARY s.payload_version = BINARY w.payload_version
     WHERE w.id = in_wait_id AND w.instance_id = in_instance_id
     ORDER BY s.accepted_at, s.id LIMIT 1 FOR UPDATE;
    IF v_id IS NOT NULL THEN
        SET out_signal_id = v_id, out_payload = CONVERT(v_s_payload USING utf8mb4);
    END IF;
    IF v_id IS NOT NULL AND NOT (v_id <=> in_fresh_id) THEN
        SELECT request_digest INTO v_audit_digest FROM weave_audit
         WHERE instance_id = in_instance_id AND action = 'signal.accept' AND idempotency_key = v_key
         ORDER BY id LIMIT 1 LOCK IN SHARE MODE;
        SET v_recomputed = _weave_signal_digest(v_s_name, v_s_version, v_s_step, v_s_seq, v_s_corr, v_s_payload,
                                                v_s_reason, v_s_evidence, 'CANONICAL');
        -- A signal stored by an earlier release carries its digest in an earlier form.
        IF v_recomputed <> v_audit_digest AND _weave_signal_digest_earlier(v_s_name, v_s_version, v_s_step, v_s_seq,
               v_s_corr, v_s_payload, v_s_reason, v_s_evidence, v_audit_digest) THEN
            SET v_recomputed = v_audit_digest;
        END IF;
        IF v_audit_digest IS NULL OR v_recomputed <> v_audit_digest OR v_stored_digest <> v_audit_digest THEN
            SET out_proof = 'MISMATCH';
            UPDATE weave_signals SET status = 'REJECTED', disposition = 'ACCEPTANCE_PROOF_MISMATCH',
                                     consumed_at = in_now, version = version + 1
             WHERE id = v_id;
            CALL _weave_event(in_namespace_id, in_instance_id, 'SIGNAL_REJECTED', v_s_step, v_s_seq, in_now,
                 JSON_OBJECT('signal_id', CONCAT('sig_', v_id), 'disposition', 'ACCEPTANCE_PROOF_MISMATCH',
                             'recomputed_digest', v_recomputed, 'stored_digest', v_stored_digest,
                             'audit_digest', v_audit_digest), NULL, NULL, NULL);
        END IF;
    END IF;
END
