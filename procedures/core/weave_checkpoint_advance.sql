-- The scan only proposes (R-6); this routine decides. Lock order R-3: identity and app (shared),
-- then the instance (exclusive, SKIP LOCKED so orchestrators never queue behind each other, R-13),
-- then the checkpoint and the step's rows. Everything is re-read and verified under those locks.
CREATE PROCEDURE weave_checkpoint_advance(IN in_checkpoint_id BIGINT UNSIGNED)
    COMMENT 'Description: advances one due checkpoint (ROOT, TIMER, SIGNAL or POLL) in its own transaction.
Parameters: in_checkpoint_id - from weave_scan.
Result set: outcome - GONE (already handled), BUSY (another node holds the instance), NOT_DUE, STALE, or the
kind handler''s outcome (ROOT: IDLE, ACTIVATED, MORE, DEFERRED, REVIEW, SUCCEEDED; TIMER: SETTLED, TRUNCATED).
Errors: 50007 INVALID_STATE when stored facts do not verify (the candidate backs off; nothing is changed).
Rules: R-1, R-3, R-5, R-6, R-7, R-8, R-9, R-13, T-1..T-7.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_now DATETIME(6);
    DECLARE v_ns BIGINT UNSIGNED;
    DECLARE v_inst BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_locked TINYINT DEFAULT 0;
    DECLARE v_kind VARCHAR(8) DEFAULT NULL;
    DECLARE v_step_key VARCHAR(64);
    DECLARE v_activation BIGINT UNSIGNED;
    DECLARE v_available DATETIME(6);
    DECLARE v_outcome VARCHAR(16) DEFAULT 'GONE';
    DECLARE v_tx BOOLEAN DEFAULT FALSE;  -- TRUE once this routine has started its own transaction
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN IF v_tx THEN ROLLBACK; END IF; RESIGNAL; END;
    CALL _weave_transaction_own('weave_checkpoint_advance');

    SET v_tx = TRUE;
    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
    START TRANSACTION;
    SELECT instance_id INTO v_inst FROM weave_pending_advances WHERE id = in_checkpoint_id;
    advance: BEGIN
        IF v_inst IS NULL THEN
            LEAVE advance;
        END IF;
        CALL _weave_instance_lock(v_inst, 1, v_ns, v_locked);
        IF v_locked <> 1 THEN
            SET v_outcome = IF(v_locked = 0, 'BUSY', 'GONE');
            LEAVE advance;
        END IF;
        CALL _weave_now(v_now);  -- R-2: after the lock that orders this decision
        SELECT kind, step_key, activation_id, available_at INTO v_kind, v_step_key, v_activation, v_available
          FROM weave_pending_advances WHERE id = in_checkpoint_id AND instance_id = v_inst FOR UPDATE;
        IF v_kind IS NULL THEN
            LEAVE advance;
        END IF;
        IF v_available > v_now THEN
            SET v_outcome = 'NOT_DUE';
            LEAVE advance;
        END IF;
        CASE v_kind
            WHEN 'ROOT' THEN CALL _weave_root_advance(v_ns, v_inst, v_now, 32, v_outcome);
            WHEN 'TIMER' THEN CALL _weave_timer_advance(v_ns, v_inst, v_step_key, v_activation, v_now, v_outcome);
            WHEN 'SIGNAL' THEN CALL _weave_signal_advance(v_ns, v_inst, v_step_key, v_activation, v_now, v_outcome);
            WHEN 'POLL' THEN CALL _weave_poll_advance(v_ns, v_inst, v_step_key, v_activation, v_now, v_outcome);
        END CASE;
    END advance;
    COMMIT;
    SELECT v_outcome AS outcome;
END
