-- Permits are released here and nowhere else (M-4.6): only when Pulse records the end of the attempt that
-- holds one (a report, a lost lease), and in the same statement as that end. Releasing also frees the
-- attempt's mutex key, which the unique index on (namespace, mutex_held) kept exclusive while the attempt ran.
-- An attempt that holds no permit is a broken invariant, never an end to record. The task's new status is written
-- in the same statement (the task first: its result, a LONGTEXT, is written as it is read, the others through an
-- in-memory table of their new values). The caller holds the task and attempt locks.
CREATE PROCEDURE _pulse_attempt_end(
        IN in_attempt_id BIGINT UNSIGNED,
        IN in_status     VARCHAR(16),
        IN in_error      VARCHAR(2048),
        IN in_now        DATETIME(6),
        IN in_task_id    BIGINT UNSIGNED,
        IN in_task_status VARCHAR(16),
        IN in_task_result LONGTEXT,
        IN in_task_error VARCHAR(2048),
        IN in_available_at DATETIME(6))
    COMMENT 'Internal. Description: ends a RUNNING attempt (status in_status: SUCCEEDED, FAILED or UNKNOWN; error
in_error, NULL for none; ended_at in_now) and releases its execution permit, and sets its task in_task_id to
in_task_status (QUEUED again at in_available_at for a retry, else finished at in_now), with in_task_result and
in_task_error where given (NULL: kept), in one statement.
Errors: 50007 INVALID_STATE when the attempt holds no permit (M-4.6 would be broken).
Rules: K-3, K-4, M-4.6.'
    MODIFIES SQL DATA
BEGIN
    UPDATE pulse_tasks t STRAIGHT_JOIN pulse_attempts a ON a.id = in_attempt_id AND a.task_id = t.id
      STRAIGHT_JOIN pulse_permits p ON p.attempt_id = a.id AND p.released_at IS NULL
       SET t.status = in_task_status, t.result = COALESCE(in_task_result, t.result),
           t.error = COALESCE(in_task_error, t.error), t.available_at = COALESCE(in_available_at, t.available_at),
           t.finished_at = IF(in_task_status = 'QUEUED', t.finished_at, in_now), t.updated_at = in_now,
           a.status = in_status, a.ended_at = in_now, a.error = in_error, p.released_at = in_now, p.mutex_held = NULL
     WHERE t.id = in_task_id;
    IF ROW_COUNT() <> 3 THEN
        CALL _weave_raise(50007, 'INVALID_STATE: the attempt holds no execution permit');
    END IF;
END
