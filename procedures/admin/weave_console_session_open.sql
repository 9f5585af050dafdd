-- The console signs in once with a bearer token: the token is authenticated exactly as every routine does
-- (S-2), and the session row keeps it only sealed. The expiry is measured on the engine clock (R-2), so a
-- test moves it with the test clock, and a session never outlives its credential: it expires with the credential
-- when that comes first, so its row, its audit row and the answer all say when it ends. Expired rows of any
-- namespace are swept here, a few at a time.
CREATE PROCEDURE weave_console_session_open(
        IN in_token        VARCHAR(512),
        IN in_namespace    VARCHAR(200),
        IN in_session_hash VARCHAR(128),
        IN in_sealed_token VARBINARY(2048),
        IN in_ttl_s        INT)
    COMMENT 'Description: opens an operator console session for a credential that may read workflows.
Parameters: in_token (workflows:read), in_namespace, in_session_hash (SHA-256 hex of the random session id the
cookie carries), in_sealed_token (the token sealed by the caller, 1-1024 bytes), in_ttl_s (60..604800 seconds).
Result set: actor, scopes, queues, expires_at (in_ttl_s from now, or the credential''s expiry when that comes
first), now_at.
Errors: 50001 UNAUTHENTICATED, 50002 FORBIDDEN, 50003 NOT_FOUND, 50013 IN_TRANSACTION, 50100 INVALID_ARGUMENT.
Rules: S-2, R-1, R-2, R-4.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_now DATETIME(6);
    DECLARE v_ns BIGINT UNSIGNED;
    DECLARE v_cred BIGINT UNSIGNED;
    DECLARE v_actor VARCHAR(128);
    DECLARE v_expires DATETIME(6);
    DECLARE v_allowed VARCHAR(2048);  -- the credential's own queues
    DECLARE v_tx BOOLEAN DEFAULT FALSE;  -- TRUE once this routine has started its own transaction
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN IF v_tx THEN ROLLBACK; END IF; RESIGNAL; END;
    CALL _weave_transaction_begin('weave_console_session_open', v_tx);  -- READ COMMITTED: no gap locks on the sessions
    CALL _weave_admin_begin(in_token, in_namespace, 'workflows:read', NULL, v_ns, v_cred, v_actor, v_now,
                            v_allowed);
    IF in_session_hash IS NULL OR in_session_hash NOT REGEXP '^[0-9a-f]{64}\\z' THEN
        CALL _weave_raise(50100, 'INVALID_ARGUMENT: the session hash must be 64 hex digits');
    END IF;
    IF in_sealed_token IS NULL OR OCTET_LENGTH(in_sealed_token) NOT BETWEEN 1 AND 1024 THEN
        CALL _weave_raise(50100, 'INVALID_ARGUMENT: the sealed token must be 1-1024 bytes');
    END IF;
    IF in_ttl_s IS NULL OR in_ttl_s NOT BETWEEN 60 AND 604800 THEN
        CALL _weave_raise(50100, 'INVALID_ARGUMENT: the session lifetime must be 60..604800 seconds');
    END IF;
    SELECT LEAST(v_now + INTERVAL in_ttl_s SECOND, COALESCE(expires_at, v_now + INTERVAL in_ttl_s SECOND))
      INTO v_expires FROM weave_credentials WHERE id = v_cred;
    -- The sweep finds expired sessions by a plain read and deletes each by its key alone: a locking range read would
    -- also lock the first live session past the range, and wait whenever another transaction holds it (a sign-out,
    -- or a disable ending its credential's sessions). A session deleted meanwhile by another sweep is not there.
    sweep: BEGIN
        DECLARE v_expired BIGINT UNSIGNED;
        DECLARE v_end BOOLEAN DEFAULT FALSE;
        DECLARE c_expired CURSOR FOR
            SELECT id FROM weave_console_sessions FORCE INDEX (ix_console_session_expiry)
             WHERE expires_at <= v_now ORDER BY expires_at LIMIT 100;
        DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_end = TRUE;
        OPEN c_expired;
        expired: LOOP
            FETCH c_expired INTO v_expired;
            IF v_end THEN
                LEAVE expired;
            END IF;
            -- By its key, forced: the optimizer would rather range-scan the expiry index for "expires_at <= now",
            -- which reads and locks up to the first live session past the range. An expiry never changes.
            DELETE s FROM weave_console_sessions s FORCE INDEX (PRIMARY) WHERE s.id = v_expired;
        END LOOP;
        CLOSE c_expired;
    END sweep;
    INSERT INTO weave_console_sessions (session_hash, namespace_id, credential_id, sealed_token, created_at,
                                        expires_at)
    VALUES (in_session_hash, v_ns, v_cred, in_sealed_token, v_now, v_expires);
    CALL _weave_audit(v_ns, 0, v_cred, v_actor, 'console.sign_in', NULL, NULL, v_now, v_expires, NULL,
                      JSON_OBJECT('expires_at', DATE_FORMAT(v_expires, '%Y-%m-%dT%H:%i:%s.%fZ')), NULL);
    COMMIT;
    SELECT c.actor, c.scopes, c.queues, v_expires AS expires_at, v_now AS now_at FROM weave_credentials c
     WHERE c.id = v_cred;
    IF @@autocommit = 0 THEN
        COMMIT;  -- the answer's read opened a transaction there: the session is left as the call found it
    END IF;
END
