-- The scan only proposes (R-6); this routine decides, in one transaction of its own (the decision
-- itself is _weave_checkpoint_decide, shared with weave_candidates_advance).
CREATE PROCEDURE weave_checkpoint_advance(IN in_checkpoint_id BIGINT UNSIGNED)
    COMMENT 'Description: advances one due checkpoint (ROOT, TIMER, SIGNAL or POLL) in its own transaction.
Parameters: in_checkpoint_id - from weave_scan.
Result set: outcome - GONE (already handled), BUSY (another node holds the instance), NOT_DUE, EARLIER_FIRST (a
fact of another step of the instance fell due before it and is still to be decided; it stays due), STALE, or the
kind handler''s outcome (ROOT: IDLE, ACTIVATED, MORE, DEFERRED, REVIEW, SUCCEEDED; TIMER: SETTLED, TRUNCATED);
made_due - 1 when the decision made a candidate due at its own time (a checkpoint, a task outcome), so that the
caller scans again at once; 0 when everything it made waits for a later time.
Errors: 50007 INVALID_STATE when stored facts do not verify (the candidate backs off; nothing is changed).
Rules: R-1, R-3, R-5, R-6, R-7, R-8, R-9, R-13, F-9, T-1..T-7.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_outcome VARCHAR(16) DEFAULT 'GONE';
    DECLARE v_due_before BIGINT DEFAULT @weave_made_due;  -- the session's count of candidates made due so far
    DECLARE v_tx BOOLEAN DEFAULT FALSE;  -- TRUE once this routine has started its own transaction
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN IF v_tx THEN ROLLBACK; END IF; RESIGNAL; END;
    CALL _weave_transaction_begin('weave_checkpoint_advance', v_tx);  -- refused inside a caller's transaction (R-1)
    CALL _weave_checkpoint_decide(in_checkpoint_id, v_outcome);
    COMMIT;
    SELECT v_outcome AS outcome, NOT (@weave_made_due <=> v_due_before) AS made_due;
END
