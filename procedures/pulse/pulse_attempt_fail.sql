-- K-3, failure. The retry decision uses only the task's frozen policy: backoff before attempt k+1 =
-- min(initial x coefficient^(k-1), max). A retry that could not start before the task deadline is not
-- scheduled (K-6 would expire it anyway); the failure is final instead, with the facts. A cancellation
-- requested while the attempt ran (K-5) forgoes the retry: the task ends CANCELLED.
CREATE PROCEDURE pulse_attempt_fail(
        IN in_attempt_id BIGINT UNSIGNED,
        IN in_worker_id  VARCHAR(512),
        IN in_error      LONGTEXT,
        IN in_retryable  TINYINT)
    COMMENT 'Description: records the failed end of a running attempt (K-3). Retryable with attempts left and the
next start before the deadline: task QUEUED again at now + backoff(k), permit released, no inbox event. Otherwise
task FAILED (or CANCELLED when cancellation was requested) with an inbox event, consumed in the same transaction
when the instance is not locked by another (as pulse_attempt_complete''s). A report for an attempt that is no
longer current is stored as a late report and changes nothing.
Parameters: in_attempt_id, in_worker_id (the claimant), in_error (text, kept up to 2048 chars), in_retryable (1 when
the handler raised a known-retryable failure).
Result set: outcome (RETRY_SCHEDULED, FAILED, CANCELLED, or LATE; this report sent again after its answer was lost
answers the outcome of the first, with available_at NULL), task_id, attempt_id, task_status, available_at (next
start when retried, else NULL), next_task_in_ms (the milliseconds until that next start, else NULL).
Errors: 50003 NOT_FOUND, 50012 ATTEMPT_NOT_CURRENT (another worker''s attempt), 50201 WORKER_ID_INVALID.
Rules: K-3, K-5, K-6, K-7, M-4.5, M-4.6.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_now DATETIME(6);
    DECLARE v_task BIGINT UNSIGNED;
    DECLARE v_current TINYINT;
    DECLARE v_outcome VARCHAR(16) DEFAULT 'LATE';
    DECLARE v_status VARCHAR(16);
    DECLARE v_error VARCHAR(2048) DEFAULT LEFT(COALESCE(in_error, 'unspecified failure'), 2048);
    DECLARE v_retryable TINYINT DEFAULT IF(COALESCE(in_retryable, 0) <> 0, 1, 0);
    DECLARE v_no INT UNSIGNED;
    DECLARE v_max INT UNSIGNED;
    DECLARE v_initial BIGINT UNSIGNED;
    DECLARE v_coefficient DOUBLE;
    DECLARE v_cap BIGINT UNSIGNED;
    DECLARE v_deadline DATETIME(6);
    DECLARE v_cancel TINYINT;
    DECLARE v_backoff_us BIGINT UNSIGNED;
    DECLARE v_next DATETIME(6) DEFAULT NULL;
    DECLARE v_reason VARCHAR(24);
    DECLARE v_facts LONGTEXT;
    DECLARE v_ns BIGINT UNSIGNED;
    DECLARE v_inst BIGINT UNSIGNED;
    DECLARE v_inst_status VARCHAR(16);
    DECLARE v_lines BOOLEAN;  -- whether work waits in line for the room of the task's app or queue
    DECLARE v_tx BOOLEAN DEFAULT FALSE;  -- TRUE once this routine has started its own transaction
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN IF v_tx THEN ROLLBACK; END IF; RESIGNAL; END;
    CALL _weave_transaction_begin('pulse_attempt_fail', v_tx);  -- refused inside a caller's transaction (R-1)
    CALL _pulse_attempt_current(in_attempt_id, in_worker_id, 'FAILED',
         JSON_OBJECT('error', v_error, 'retryable', JSON_EXTRACT(IF(v_retryable = 1, 'true', 'false'), '$')),
         v_retryable = 1, v_now, v_task, v_current, v_status, v_ns, v_inst, v_inst_status, v_lines);  -- R-2
    IF v_current = 1 THEN
        SELECT attempts_used, max_attempts, initial_backoff_ms, backoff_coefficient, max_backoff_ms, deadline_at,
               cancel_requested
          INTO v_no, v_max, v_initial, v_coefficient, v_cap, v_deadline, v_cancel
          FROM pulse_tasks WHERE id = v_task;
        SET v_backoff_us = ROUND(LEAST(v_initial * POW(v_coefficient, v_no - 1), v_cap) * 1000);
        SET v_next = v_now + INTERVAL v_backoff_us MICROSECOND;
        -- A handler told of a cancellation stops with a retryable failure: CANCELLED, whichever attempt it was.
        SET v_reason = CASE WHEN v_retryable = 0 THEN 'NON_RETRYABLE'
                            WHEN v_cancel = 1 THEN 'CANCEL_REQUESTED'
                            WHEN v_no >= v_max THEN 'ATTEMPTS_EXHAUSTED'
                            WHEN v_next >= v_deadline THEN 'DEADLINE'
                            ELSE NULL END;
        -- Back to its queue at v_next when a retry is allowed (K-3); otherwise the task ends with this failure.
        SET v_outcome = CASE WHEN v_reason IS NULL THEN 'RETRY_SCHEDULED'
                             WHEN v_reason = 'CANCEL_REQUESTED' THEN 'CANCELLED' ELSE 'FAILED' END;
        SET v_status = IF(v_reason IS NULL, 'QUEUED', v_outcome);
        SET v_next = IF(v_reason IS NULL, v_next, NULL);
        CALL _pulse_attempt_end(in_attempt_id, 'FAILED', v_error, v_now, v_task, v_status, NULL, v_error, v_next);
        IF v_reason IS NOT NULL THEN
            SET v_facts = JSON_OBJECT(
                'error', v_error, 'retryable', JSON_EXTRACT(IF(v_retryable = 1, 'true', 'false'), '$'),
                'reason', v_reason, 'attempt', v_no + 0, 'max_attempts', v_max + 0,
                'deadline_at', DATE_FORMAT(v_deadline, '%Y-%m-%dT%H:%i:%s.%fZ'),
                'failed_at', DATE_FORMAT(v_now, '%Y-%m-%dT%H:%i:%s.%fZ'));
            CALL _pulse_inbox_add(v_task, v_outcome, v_facts, v_now, v_now, v_ns, v_inst, v_inst_status, v_lines);
        END IF;
    ELSEIF v_current = 2 THEN  -- this report again, its first answer lost: answered as the first was
        SET v_outcome = IF(v_status = 'QUEUED', 'RETRY_SCHEDULED', v_status);
    END IF;
    COMMIT;  -- v_status: the task's status as this report leaves it (a late report: as locked)
    SELECT v_outcome AS outcome, CONCAT('tsk_', v_task) AS task_id, in_attempt_id AS attempt_id,
           v_status AS task_status,
           v_next AS available_at, GREATEST(TIMESTAMPDIFF(MICROSECOND, v_now, v_next), 0) DIV 1000 AS next_task_in_ms;
END
