-- Weave schema, level 18: a credential's console sessions are found by the credential. A disable ends them in its
-- transaction; without this index that delete read every session of every namespace and, under REPEATABLE READ, locked
-- each one (and the gaps between them) until the disable committed, holding up every sign-in, sign-out and expiry
-- sweep. Its cost: one index entry per session, written at sign-in and removed at sign-out or expiry.
-- depends: 0017.room-lines

ALTER TABLE weave_console_sessions ADD KEY ix_console_session_credential (credential_id);
