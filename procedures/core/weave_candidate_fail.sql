-- Failure bookkeeping (R-12): only the next check time, the attempt count and the error move, and only
-- when the candidate is still the version that failed; due times, deadlines, results and budgets are
-- never touched by a failure.
CREATE PROCEDURE weave_candidate_fail(
        IN in_class   VARCHAR(16),
        IN in_id      BIGINT UNSIGNED,
        IN in_version BIGINT UNSIGNED,
        IN in_error   VARCHAR(4096))
    COMMENT 'Description: records a failed advance of a candidate and backs it off (100 ms doubling, at most 60 s).
Parameters: in_class (CHECKPOINT, INBOX or SIGNAL), in_id, in_version (as scanned), in_error.
Result set: recorded (1, or 0 when the candidate had changed or gone).
Errors: 50100 INVALID_ARGUMENT for an unknown class.
Rules: R-12.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_now DATETIME(6);
    DECLARE v_rows INT DEFAULT 0;
    DECLARE v_tx BOOLEAN DEFAULT FALSE;  -- TRUE once this routine has started its own transaction
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN IF v_tx THEN ROLLBACK; END IF; RESIGNAL; END;
    CALL _weave_transaction_own('weave_candidate_fail');
    SET v_tx = TRUE;
    START TRANSACTION;
    CALL _weave_now(v_now);
    IF in_class = 'CHECKPOINT' THEN
        UPDATE weave_pending_advances
           SET attempts = attempts + 1, last_error = LEFT(in_error, 1024), version = version + 1,
               available_at = GREATEST(due_at, v_now + INTERVAL LEAST(100 * POW(2, LEAST(attempts, 20)), 60000) * 1000 MICROSECOND)
         WHERE id = in_id AND version = in_version;
        SET v_rows = ROW_COUNT();
    ELSEIF in_class = 'INBOX' THEN
        UPDATE pulse_inbox
           SET attempts = attempts + 1, last_error = LEFT(in_error, 1024), version = version + 1,
               available_at = v_now + INTERVAL LEAST(100 * POW(2, LEAST(attempts, 20)), 60000) * 1000 MICROSECOND
         WHERE id = in_id AND version = in_version AND state = 'PENDING';
        SET v_rows = ROW_COUNT();
    ELSEIF in_class = 'SIGNAL' THEN
        UPDATE weave_signals
           SET attempts = attempts + 1, last_error = LEFT(in_error, 1024), version = version + 1,
               available_at = v_now + INTERVAL LEAST(100 * POW(2, LEAST(attempts, 20)), 60000) * 1000 MICROSECOND
         WHERE id = in_id AND version = in_version AND status = 'PENDING';
        SET v_rows = ROW_COUNT();
    ELSE
        CALL _weave_raise(50100, 'INVALID_ARGUMENT: unknown candidate class');
    END IF;
    COMMIT;
    SELECT v_rows AS recorded;
END
