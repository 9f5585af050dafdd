-- K-3, success: guarded by the attempt's own id and worker, so a worker whose lease was recovered
-- cannot settle a task that moved on. The task, the attempt, the permit and the inbox event change
-- together. A worker never waits on the engine: when the instance is free, the report takes its lock
-- and consumes the inbox event at once, as the orchestrator would (Settle at Report, K-7); when another
-- transaction holds it, the orchestrator consumes the event later.
CREATE PROCEDURE pulse_attempt_complete(
        IN in_attempt_id BIGINT UNSIGNED,
        IN in_worker_id  VARCHAR(512),
        IN in_result     LONGTEXT)
    COMMENT 'Description: records the successful end of a running attempt (K-3): task SUCCEEDED with the result,
permit released, inbox event SUCCEEDED at the report''s time, consumed in the same transaction when the instance
is not locked by another (the step settles as the orchestrator would settle it), else left for the orchestrator. A
report for an attempt that is no longer current is stored as a late report and changes nothing.
Parameters: in_attempt_id, in_worker_id (the claimant), in_result (the handler''s return value: JSON of at most 1 MiB,
nested at most 32 levels deep, no key twice in one object, no number beyond a double''s range).
Result set: outcome (SUCCEEDED, also for this report sent again after its answer was lost; or LATE for a report that
was stored without effect), task_id, attempt_id, task_status,
next_task_in_ms (when the answer left its POLL step waiting for the next round: the milliseconds until that round is
due and its task is created, else NULL), round_outcome (for a POLL round''s task: the round''s outcome as this report
left it, such as POLL_PENDING, DONE, REVIEW_VALUE or INVALID, IN_FLIGHT when the orchestrator consumes the answer
later; else NULL).
Errors: 50003 NOT_FOUND, 50012 ATTEMPT_NOT_CURRENT (another worker''s attempt), 50201 WORKER_ID_INVALID,
50203 RESULT_INVALID.
Rules: K-3, K-7, M-4.6.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_now DATETIME(6);
    DECLARE v_task BIGINT UNSIGNED;
    DECLARE v_current TINYINT;
    DECLARE v_outcome VARCHAR(16) DEFAULT 'LATE';
    DECLARE v_status VARCHAR(16);
    DECLARE v_ns BIGINT UNSIGNED;
    DECLARE v_inst BIGINT UNSIGNED;
    DECLARE v_inst_status VARCHAR(16);
    DECLARE v_lines BOOLEAN;  -- whether work waits in line for the room of the task's app or queue
    DECLARE v_tx BOOLEAN DEFAULT FALSE;  -- TRUE once this routine has started its own transaction
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN IF v_tx THEN ROLLBACK; END IF; RESIGNAL; END;
    CALL _weave_transaction_begin('pulse_attempt_complete', v_tx);  -- refused inside a caller's transaction (R-1)
    IF in_result IS NULL OR OCTET_LENGTH(in_result) > 1048576 OR NOT _weave_json_strict(in_result) THEN
        -- What the result broke: its size, or its text (the server reads no JSON nested deeper than 32 levels).
        CALL _weave_raise(50203, IF(OCTET_LENGTH(in_result) > 1048576,
                                    'RESULT_INVALID: the result must be JSON of at most 1 MiB',
                                    'RESULT_INVALID: the result must be one JSON value, nested at most 32 levels '
                                    'deep, no key twice, no number past a double'));
    END IF;
    CALL _pulse_attempt_current(in_attempt_id, in_worker_id, 'SUCCEEDED', in_result, FALSE, v_now, v_task, v_current,
                                v_status, v_ns, v_inst, v_inst_status, v_lines);  -- the locks, then the clock (R-2)
    IF v_current = 1 THEN
        CALL _pulse_attempt_end(in_attempt_id, 'SUCCEEDED', NULL, v_now, v_task, 'SUCCEEDED', in_result, NULL, NULL);
        CALL _pulse_inbox_add(v_task, 'SUCCEEDED', in_result, v_now, v_now, v_ns, v_inst, v_inst_status, v_lines);
        SET v_outcome = 'SUCCEEDED', v_status = 'SUCCEEDED';
    ELSEIF v_current = 2 THEN  -- this report again, its first answer lost: answered as the first was
        SET v_outcome = 'SUCCEEDED';
    END IF;
    COMMIT;
    -- The next round's due time, when this report's consumption left the poll waiting for it: a worker with nothing
    -- else to do then claims at that time instead of whenever its idle back-off looks next. A plain read, after the
    -- commit, of the rows the report just wrote, in the answer's statement.
    SELECT v_outcome AS outcome, CONCAT('tsk_', v_task) AS task_id, in_attempt_id AS attempt_id,
           v_status AS task_status,
           (SELECT GREATEST(TIMESTAMPDIFF(MICROSECOND, v_now, p.next_poll_at), 0) DIV 1000
              FROM pulse_tasks t STRAIGHT_JOIN weave_poll_states p ON p.activation_id = t.activation_id
             WHERE v_outcome = 'SUCCEEDED' AND t.id = v_task AND t.round_no > 0 AND p.state = 'WAITING')
           AS next_task_in_ms,
           -- What the answer was to the poll: a result it could not take (INVALID) or a value for a person
           -- (REVIEW_VALUE) sends the step to review, though the task SUCCEEDED; the worker says so.
           (SELECT r.outcome FROM weave_poll_rounds r WHERE v_outcome = 'SUCCEEDED' AND r.task_id = v_task)
           AS round_outcome;
    IF @@autocommit = 0 THEN
        COMMIT;  -- the answer's read opened a transaction there: the session is left as the call found it
    END IF;
END
