-- A session is live while it has not expired on the engine clock (R-2) and its credential is still ACTIVE:
-- disabling a credential ends its console sessions at once, as it ends its API access (S-2).
CREATE PROCEDURE weave_console_session_get(
        IN in_session_hash VARCHAR(128))
    COMMENT 'Description: the live console session with this hash: its namespace, sealed token and the current scopes.
Parameters: in_session_hash (SHA-256 hex of the session id the cookie carries).
Result set: namespace, actor, scopes, queues, sealed_token, created_at, expires_at (the session''s, or its
credential''s expiry when that comes first), now_at.
Errors: 50001 UNAUTHENTICATED (no such session, expired, or its credential disabled or expired).
Rules: S-2, R-2.'
    READS SQL DATA
BEGIN
    DECLARE v_now DATETIME(6);
    DECLARE v_id BIGINT UNSIGNED DEFAULT NULL;
    CALL _weave_clock_own();  -- a session's life is on the server's clock, never one the caller set
    CALL _weave_now(v_now);
    SELECT s.id INTO v_id
      FROM weave_console_sessions s
      JOIN weave_credentials c ON c.id = s.credential_id AND c.namespace_id = s.namespace_id AND c.status = 'ACTIVE'
                              AND (c.expires_at IS NULL OR c.expires_at > v_now)
     WHERE s.session_hash = in_session_hash AND s.expires_at > v_now;
    IF v_id IS NULL THEN
        CALL _weave_raise(50001, 'UNAUTHENTICATED: no live console session');
    END IF;
    -- The session ends with its credential's expiry, when that comes first.
    SELECT n.name AS namespace, c.actor, c.scopes, c.queues, s.sealed_token, s.created_at,
           LEAST(s.expires_at, COALESCE(c.expires_at, s.expires_at)) AS expires_at, v_now AS now_at
      FROM weave_console_sessions s
      JOIN weave_credentials c ON c.id = s.credential_id
      JOIN weave_namespaces n ON n.id = s.namespace_id
     WHERE s.id = v_id;
END
