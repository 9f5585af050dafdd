-- Weave schema, level 2: server-side sessions of the operator console.
-- The console signs in with a bearer token once. The browser keeps only an opaque random session id
-- (HttpOnly cookie); the row is found by the id's SHA-256, and it holds the token sealed with a key
-- derived from that same id, so that neither the table alone nor the cookie alone yields the token.
-- depends: 0001.schema

CREATE TABLE weave_console_sessions (
    id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT COMMENT 'Internal session id (never shown).',
    session_hash CHAR(64) NOT NULL COMMENT 'SHA-256 hex of the random session id the cookie carries; the id itself is never stored.',
    namespace_id BIGINT UNSIGNED NOT NULL COMMENT 'Namespace the signed-in credential belongs to.',
    credential_id BIGINT UNSIGNED NOT NULL COMMENT 'The credential that signed in; a disabled credential ends its sessions.',
    sealed_token VARBINARY(1024) NOT NULL COMMENT 'The bearer token, sealed (AES-GCM) with a key derived from the session id.',
    created_at DATETIME(6) NOT NULL COMMENT 'When the session was opened (engine clock).',
    expires_at DATETIME(6) NOT NULL COMMENT 'When the session ends (engine clock); sign-out ends it at once.',
    PRIMARY KEY (id),
    UNIQUE KEY uq_console_session (session_hash),
    KEY ix_console_session_expiry (expires_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='Operator console sessions: opaque cookie id -> credential, with an expiry.';

-- The console (and GET /workflows) find instances by their business key: an exact match per namespace,
-- newest first, without scanning the namespace.
ALTER TABLE weave_instances ADD KEY ix_instance_business_key (namespace_id, business_key, id);
