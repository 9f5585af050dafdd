-- One task outcome in its own transaction (the decision itself is _weave_inbox_decide, shared with
-- weave_candidates_advance).
CREATE PROCEDURE weave_inbox_consume(IN in_inbox_id BIGINT UNSIGNED)
    COMMENT 'Description: consumes one task-inbox event in its own transaction (K-7), after verifying the task''s
ownership (R-6).
Parameters: in_inbox_id - from weave_scan (class INBOX).
Result set: outcome - GONE (already consumed), BUSY (another node holds the instance), NOT_DUE, EARLIER_FIRST (a
fact of another step of the instance fell due before the outcome occurred and is still to be decided; it stays
due), STALE (the task''s activation is no longer current: recorded, nothing else changes), MISMATCH (corrupt
ownership: instance NEEDS_REVIEW OWNERSHIP_MISMATCH), SUCCEEDED (step settled, successors followed), REVIEW (step and instance
NEEDS_REVIEW: TASK_FAILED, TASK_UNKNOWN or TASK_EXPIRED), CANCELLED or RECORDED (kept in the history, step
unchanged), or the POLL handler''s outcome; made_due - 1 when the decision made a candidate due at its own time (as
weave_checkpoint_advance).
Errors: 50007 INVALID_STATE when the event names an instance that does not exist (the candidate backs off).
Rules: K-7, R-1, R-3, R-4, R-6, R-9, R-12, R-13, F-9.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_outcome VARCHAR(16) DEFAULT 'GONE';
    DECLARE v_due_before BIGINT DEFAULT @weave_made_due;  -- the session's count of candidates made due so far
    DECLARE v_tx BOOLEAN DEFAULT FALSE;  -- TRUE once this routine has started its own transaction
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN IF v_tx THEN ROLLBACK; END IF; RESIGNAL; END;
    CALL _weave_transaction_begin('weave_inbox_consume', v_tx);  -- refused inside a caller's transaction (R-1)
    CALL _weave_inbox_decide(in_inbox_id, v_outcome);
    COMMIT;
    SELECT v_outcome AS outcome, NOT (@weave_made_due <=> v_due_before) AS made_due;
END
