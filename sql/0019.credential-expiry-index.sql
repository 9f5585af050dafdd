-- Weave schema, level 19: the credentials that expire are found by their expiry. Every scrape of /metrics and every
-- `weave status` lists the active ones soonest first; without this index that read every credential of every
-- namespace, disabled ones included, and a platform's short-lived tokens that were never disabled pushed the ones
-- about to expire out of the list. Its cost: one index entry per credential, changed when it is disabled or enabled.
-- depends: 0018.console-session-credential

ALTER TABLE weave_credentials ADD KEY ix_credential_expiry (status, expires_at);
