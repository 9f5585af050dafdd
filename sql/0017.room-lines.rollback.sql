-- Back to level 16: work waiting for room looks again every second, in no order.
ALTER TABLE weave_pending_advances DROP KEY ix_checkpoint_room_line, DROP COLUMN deferred_for,
    ADD KEY ix_checkpoint_deferred (deferred_reason);
