-- Permits are released here and nowhere else (M-4.6): only when Pulse records the end of the attempt that
-- holds one (a report, a lost lease), and in the same statement as that end. Releasing also frees the
-- attempt's mutex key, which the unique index on (namespace, mutex_held) kept exclusive while the attempt ran.
-- An attempt that holds no permit is a broken invariant, never an end to record. The caller holds the task and
-- attempt locks.
CREATE PROCEDURE _pulse_attempt_end(
        IN in_attempt_id BIGINT UNSIGNED,
        IN in_status     VARCHAR(16),
        IN in_error      VARCHAR(2048),
        IN in_now        DATETIME(6))
    COMMENT 'Internal. Description: ends a RUNNING attempt (status in_status: SUCCEEDED, FAILED or UNKNOWN; error
in_error, NULL for none; ended_at in_now) and releases its execution permit, in one statement.
Errors: 50007 INVALID_STATE when the attempt holds no permit (M-4.6 would be broken).
Rules: K-3, K-4, M-4.6.'
    MODIFIES SQL DATA
BEGIN
    UPDATE pulse_attempts a STRAIGHT_JOIN pulse_permits p ON p.attempt_id = a.id AND p.released_at IS NULL
       SET a.status = in_status, a.ended_at = in_now, a.error = in_error, p.released_at = in_now, p.mutex_held = NULL
     WHERE a.id = in_attempt_id;
    IF ROW_COUNT() <> 2 THEN
        CALL _weave_raise(50007, 'INVALID_STATE: the attempt holds no execution permit');
    END IF;
END
