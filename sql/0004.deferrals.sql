-- Nothing stalls silently (R-18): a checkpoint deferred by something that can clear by itself (pause,
-- quota, capacity, a disabled identity or app) says why, since when, and how often it was looked at, so
-- that an instance's page, `weave status` and the metrics can show every deferral by reason. Failures keep
-- their own columns (attempts, last_error): a deferral is not a failure.
-- depends: 0001.schema

ALTER TABLE weave_pending_advances
    ADD COLUMN deferred_reason VARCHAR(32) NULL
        COMMENT 'Why the next check was deferred (PAUSED, GATE_CLOSED, IDENTITY_DISABLED, APP_DISABLED, QUOTA_FULL, QUEUE_FULL, ...); NULL when not deferred.',
    ADD COLUMN deferred_since DATETIME(6) NULL
        COMMENT 'When the current deferral began (the first deferral with this reason in a row).',
    ADD COLUMN deferrals INT UNSIGNED NOT NULL DEFAULT 0
        COMMENT 'Checks deferred in a row for the current reason.',
    ADD KEY ix_checkpoint_deferred (deferred_reason);
