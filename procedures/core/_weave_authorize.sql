-- Authentication and authorisation shared by every public routine that takes a token (S-2).
-- The credential is read with a shared lock: it is first in the lock order (R-3), a concurrent
-- disable waits for the decisions in flight, and concurrent requests of one credential do not
-- queue behind each other. Another namespace answers exactly like a missing object (404). A credential made to
-- expire stops authenticating at its time, on the engine clock, which it reads only then: one that never expires
-- pays nothing for the check.
CREATE PROCEDURE _weave_authorize(
        IN  in_token        VARCHAR(512),
        IN  in_namespace    VARCHAR(200),
        IN  in_scope        VARCHAR(64),
        IN  in_queues       VARCHAR(2048),
        INOUT io_namespace_id BIGINT UNSIGNED,
        OUT out_credential_id BIGINT UNSIGNED,
        OUT out_actor         VARCHAR(128),
        OUT out_allowed       VARCHAR(2048))
    COMMENT 'Internal. Description: authenticates a bearer token for a namespace, a scope and the queues a definition uses.
Parameters: in_token, in_namespace (name), in_scope (NULL = none needed), in_queues (comma list, NULL or empty = none),
io_namespace_id (in: the id of in_namespace when the caller has just read it by that name, else NULL; out: the
namespace id), out_allowed (the credential''s queues: a comma list, or * for every queue).
Errors: 50017 CLOCK_FIXED (a session whose timestamp is set), 50001 UNAUTHENTICATED, 50003 NOT_FOUND, 50002
FORBIDDEN.'
    READS SQL DATA
BEGIN
    DECLARE v_ns BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_cred_ns BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_status VARCHAR(16) DEFAULT NULL;
    DECLARE v_scopes VARCHAR(512);
    DECLARE v_expires DATETIME(6) DEFAULT NULL;
    DECLARE v_now DATETIME(6);

    -- First, before any read can wait: a session whose clock is fixed would authenticate at the time it chose, a
    -- credential past its expiry with it (inside _weave_namespace_authorize, a function, the clock compared is its
    -- calling statement's start, a moment ago).
    CALL _weave_clock_own();
    SET out_credential_id = NULL, v_ns = io_namespace_id;
    IF in_token IS NOT NULL AND CHAR_LENGTH(in_token) BETWEEN 1 AND 256 THEN
        SELECT id, namespace_id, actor, scopes, queues, status, expires_at
          INTO out_credential_id, v_cred_ns, out_actor, v_scopes, out_allowed, v_status, v_expires
          FROM weave_credentials WHERE token_hash = SHA2(in_token, 256) LOCK IN SHARE MODE;
    END IF;
    IF out_credential_id IS NULL OR v_status <> 'ACTIVE' THEN
        CALL _weave_raise(50001, 'UNAUTHENTICATED: unknown or disabled credential');
    END IF;
    IF v_expires IS NOT NULL THEN
        CALL _weave_now(v_now);
        IF v_now >= v_expires THEN
            CALL _weave_raise(50001, 'UNAUTHENTICATED: the credential has expired');
        END IF;
    END IF;

    IF v_ns IS NULL THEN
        -- As written: the collation pads spaces, and 'acme ' found acme, and was answered as typed.
        SELECT id INTO v_ns FROM weave_namespaces
         WHERE name = in_namespace AND OCTET_LENGTH(name) = OCTET_LENGTH(in_namespace);
    END IF;
    IF v_ns IS NULL OR v_ns <> v_cred_ns THEN
        CALL _weave_raise(50003, 'NOT_FOUND: no such object in this namespace');
    END IF;
    SET io_namespace_id = v_ns;

    IF in_scope IS NOT NULL AND FIND_IN_SET(in_scope, v_scopes) = 0 THEN
        CALL _weave_raise(50002, CONCAT('FORBIDDEN: missing scope ', in_scope));
    END IF;

    IF out_allowed <> '*' AND in_queues IS NOT NULL AND in_queues <> '' THEN
        CALL _weave_queues_check(in_queues, out_allowed);
    END IF;
END
