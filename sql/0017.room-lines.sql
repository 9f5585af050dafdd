-- Weave schema, level 17: work waiting for room waits in line. A checkpoint deferred because its app's quota or its
-- queue's capacity was full (R-8) names what it waits for, so that a task's end can wake the first in line at once
-- and a creator with room seen leaves it to those that were waiting before it. Before, every waiter looked again a
-- second later in no order: one at a quota of one could wait until its deadline while newer work took each slot,
-- and a step behind a finished task waited a second for a slot that was free.
-- Its cost: none in writes. The line's index, on the deferral's reason, what it waits for and since when, takes the
-- place of the index on the reason alone (every checkpoint has an entry in either), whose readers read its first
-- column as they read that index. The checkpoints deferred for room when this runs join their line at their next
-- look, a second at most, in their place (deferred_since stays).
-- depends: 0016.failed-activation-numbers

ALTER TABLE weave_pending_advances
    ADD COLUMN deferred_for BIGINT UNSIGNED NULL
        COMMENT 'What the deferral waits for: the app (QUOTA_FULL, APP_DISABLED), queue (QUEUE_FULL) or identity (IDENTITY_DISABLED); NULL otherwise, and while the check fails.'
        AFTER deferrals,
    DROP KEY ix_checkpoint_deferred,
    ADD KEY ix_checkpoint_room_line (deferred_reason, deferred_for, deferred_since);
