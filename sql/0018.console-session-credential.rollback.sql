-- Back to level 17: a credential's console sessions are found by reading them all.
ALTER TABLE weave_console_sessions DROP KEY ix_console_session_credential;
