-- Permits are released here and nowhere else (M-4.6): only when Pulse records the end of the attempt
-- that holds one (a report, a lost lease). Releasing also frees the attempt's mutex key, which the
-- unique index on (namespace, mutex_held) kept exclusive while the attempt ran.
CREATE PROCEDURE _pulse_permit_release(IN in_attempt_id BIGINT UNSIGNED, IN in_now DATETIME(6))
    COMMENT 'Internal. Description: releases the execution permit of an attempt whose end is being recorded.
Errors: 50007 INVALID_STATE when the attempt holds no permit (M-4.6 would be broken).
Rules: K-3, K-4, M-4.6.'
    MODIFIES SQL DATA
BEGIN
    UPDATE pulse_permits SET released_at = in_now, mutex_held = NULL
     WHERE attempt_id = in_attempt_id AND released_at IS NULL;
    IF ROW_COUNT() <> 1 THEN
        CALL _weave_raise(50007, 'INVALID_STATE: the attempt holds no execution permit');
    END IF;
END
