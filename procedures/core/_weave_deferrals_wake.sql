-- A disabled identity or app is enabled again: the checkpoints deferred for it (R-8) look again now, as resume makes
-- a paused instance's due (C-1), instead of at their next look. They are found by what they wait for, one index
-- range. The caller holds the identity's or the app's row exclusively. Every decision of the identity's instances takes
-- the identity's row shared first (R-3): none of those is between its read of the status and its deferral. No
-- decision takes the app's row (_weave_instance_lock): one may read the app's status just before the enabling commits
-- and defer after it, and its deferral's back-off (at most ten seconds) bounds that. The caller wakes only when the identity or app was disabled until now:
-- then a decision that read it ACTIVE and waits for its row while holding a checkpoint this changes is one that read
-- it before the disabling, milliseconds ago, and such a deadlock is retried. A deferral whose look is failing has left
-- its line (weave_candidate_fail) and is not woken: its back-off brings it back.
CREATE PROCEDURE _weave_deferrals_wake(
        IN in_reason VARCHAR(32),
        IN in_for    BIGINT UNSIGNED,
        IN in_now    DATETIME(6))
    COMMENT 'Internal. Description: makes every checkpoint deferred with reason in_reason (IDENTITY_DISABLED or
APP_DISABLED) for in_for (the identity or app) and not due yet due at in_now, its deferral record kept for its look.
Rules: R-8, R-18.'
    MODIFIES SQL DATA
BEGIN
    UPDATE weave_pending_advances FORCE INDEX (ix_checkpoint_room_line)
       SET available_at = GREATEST(due_at, in_now), version = version + 1
     WHERE deferred_reason = in_reason AND deferred_for = in_for AND available_at > in_now;
END
