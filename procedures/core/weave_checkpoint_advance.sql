-- The scan only proposes (R-6); this routine decides. The shared candidate opening takes the locks in
-- R-3 order (the instance SKIP LOCKED so orchestrators never queue behind each other, R-13), then the
-- checkpoint and the step's rows are re-read and verified under them, and the step kind's handler runs.
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
    advance: BEGIN
        CALL _weave_candidate_open('CHECKPOINT', in_checkpoint_id, v_ns, v_inst, v_now, v_outcome);
        IF v_outcome IS NOT NULL THEN
            LEAVE advance;
        END IF;
        SET v_outcome = 'GONE';
        SELECT kind, step_key, activation_id, available_at INTO v_kind, v_step_key, v_activation, v_available
          FROM weave_pending_advances WHERE id = in_checkpoint_id AND instance_id = v_inst FOR UPDATE;
        IF v_kind IS NULL THEN
            LEAVE advance;
        END IF;
        IF v_available > v_now THEN
            SET v_outcome = 'NOT_DUE';
            LEAVE advance;
        END IF;
        CALL _weave_step_advance(v_ns, v_inst, v_kind, v_step_key, v_activation, v_now, v_outcome);
    END advance;
    COMMIT;
    SELECT v_outcome AS outcome;
END
