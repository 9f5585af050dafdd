-- The closing a TIMER or SIGNAL wait shares when its step cannot succeed: a truncated timer (T-4) or a
-- SIGNAL wait at its deadline without a match (S-13). The step goes to NEEDS_REVIEW, its activation ends
-- and its wait is EXPIRED, in one statement in R-3 order (step, activation, wait: rows the step's opening
-- holds locked). The caller writes the event and opens the review reason.
CREATE PROCEDURE _weave_wait_expire(
        IN in_step_id       BIGINT UNSIGNED,
        IN in_activation_id BIGINT UNSIGNED,
        IN in_wait_id       BIGINT UNSIGNED,
        IN in_now           DATETIME(6))
    COMMENT 'Internal. Description: expires a wait whose step cannot succeed: step NEEDS_REVIEW, activation ended,
wait EXPIRED (settled_at in_now).
Rules: T-4, S-13, R-3.'
    MODIFIES SQL DATA
BEGIN
    UPDATE weave_steps s STRAIGHT_JOIN weave_activations a ON a.id = in_activation_id
           STRAIGHT_JOIN weave_waits w ON w.id = in_wait_id
       SET s.status = 'NEEDS_REVIEW', s.updated_at = in_now, a.ended_at = in_now, w.status = 'EXPIRED',
           w.settled_at = in_now
     WHERE s.id = in_step_id;
END
