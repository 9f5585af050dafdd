ALTER TABLE weave_pending_advances DROP KEY ix_checkpoint_deferred, DROP COLUMN deferrals,
    DROP COLUMN deferred_since, DROP COLUMN deferred_reason;
