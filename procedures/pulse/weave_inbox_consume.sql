-- K-7: task outcomes reach their instance only here, under the instance lock (R-3, taken SKIP LOCKED so
-- orchestrators never queue behind each other, R-13). Consumption is idempotent: an event is applied
-- only while it is PENDING, read under lock, and leaves that state in the same transaction. Outcomes
-- of one task are applied in the order of their own times: an earlier one still pending goes first.
CREATE PROCEDURE weave_inbox_consume(IN in_inbox_id BIGINT UNSIGNED)
    COMMENT 'Description: consumes one task-inbox event in its own transaction (K-7), after verifying the task''s
ownership (R-6).
Parameters: in_inbox_id - from weave_scan (class INBOX).
Result set: outcome - GONE (already consumed), BUSY (another node holds the instance), NOT_DUE, STALE (the task''s
activation is no longer current: recorded, nothing else changes), MISMATCH (corrupt ownership: instance
NEEDS_REVIEW OWNERSHIP_MISMATCH), SUCCEEDED (step settled, successors followed), REVIEW (step and instance
NEEDS_REVIEW: TASK_FAILED, TASK_UNKNOWN or TASK_EXPIRED), CANCELLED or RECORDED (kept in the history, step
unchanged), or the POLL handler''s outcome; made_due - 1 when the decision made a candidate due at its own time (as
weave_checkpoint_advance).
Errors: 50007 INVALID_STATE when the event names an instance that does not exist (the candidate backs off).
Rules: K-7, R-1, R-3, R-4, R-6, R-9, R-12, R-13.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_now DATETIME(6);
    DECLARE v_inst BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_ns BIGINT UNSIGNED;
    DECLARE v_task BIGINT UNSIGNED;
    DECLARE v_state VARCHAR(16) DEFAULT NULL;
    DECLARE v_available DATETIME(6);
    DECLARE v_next BIGINT UNSIGNED;
    DECLARE v_step_outcome VARCHAR(16);
    DECLARE v_guard INT DEFAULT 0;
    DECLARE v_outcome VARCHAR(16) DEFAULT 'GONE';
    DECLARE v_due_before BIGINT DEFAULT @weave_made_due;  -- the session's count of candidates made due so far
    DECLARE v_finished TINYINT;
    DECLARE v_status VARCHAR(16);  -- the instance's, read under its lock
    DECLARE v_tx BOOLEAN DEFAULT FALSE;  -- TRUE once this routine has started its own transaction
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN IF v_tx THEN ROLLBACK; END IF; RESIGNAL; END;
    CALL _weave_transaction_begin('weave_inbox_consume', v_tx);  -- refused inside a caller's transaction (R-1)
    START TRANSACTION;
    consume: BEGIN
        CALL _weave_candidate_open('INBOX', in_inbox_id, v_ns, v_inst, v_now, v_status, v_outcome);
        IF v_outcome IS NOT NULL THEN
            LEAVE consume;
        END IF;
        SET v_outcome = 'GONE';
        SELECT task_id, state, available_at INTO v_task, v_state, v_available
          FROM pulse_inbox WHERE id = in_inbox_id AND instance_id = v_inst FOR UPDATE;
        IF v_state IS NULL OR v_state <> 'PENDING' THEN
            LEAVE consume;
        END IF;
        IF v_available > v_now THEN
            SET v_outcome = 'NOT_DUE';
            LEAVE consume;
        END IF;
        -- Ours is PENDING and locked, so the first pending outcome of the task always exists; at worst it is ours.
        REPEAT
            CALL _weave_inbox_apply(v_ns, v_inst, v_task, v_now, v_next, v_step_outcome);
            SET v_guard = v_guard + 1;
        UNTIL v_next = in_inbox_id OR v_guard >= 16 END REPEAT;
        SET v_outcome = v_step_outcome;
        IF v_status = 'CANCELLING' THEN  -- no outcome makes an instance CANCELLING: only a cancel does
            CALL _weave_instance_cancel_finish(v_ns, v_inst, v_now, v_finished);
        END IF;
    END consume;
    COMMIT;
    SELECT v_outcome AS outcome, NOT (@weave_made_due <=> v_due_before) AS made_due;
END
