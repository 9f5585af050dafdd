-- Never the token: only its hash is stored, and not even that leaves the database. An admin restricted to some
-- queues sees the credentials it administers: those of its queues (S-2), as it may create and disable only them.
CREATE PROCEDURE weave_credential_list(
        IN in_token     VARCHAR(512),
        IN in_namespace VARCHAR(200))
    COMMENT 'Description: every credential of the namespace, without any token or hash (for an admin restricted to
some queues, every credential of those queues).
Parameters: in_token (admin), in_namespace.
Result set: credential_id, actor, scopes, queues, status (ACTIVE, DISABLED, or EXPIRED: active, past its expiry),
created_at, disabled_at, expires_at (NULL: never).
Errors: 50001 UNAUTHENTICATED, 50002 FORBIDDEN, 50003 NOT_FOUND.
Rules: S-2.'
    READS SQL DATA
BEGIN
    DECLARE v_ns BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_cred BIGINT UNSIGNED;
    DECLARE v_actor VARCHAR(128);
    DECLARE v_allowed VARCHAR(2048);  -- the credential's own queues
    DECLARE v_now DATETIME(6);
    CALL _weave_admin_begin(in_token, in_namespace, 'admin', NULL, v_ns, v_cred, v_actor, v_now, v_allowed);
    SELECT CONCAT('cred_', id) AS credential_id, actor, scopes, queues,
           IF(status = 'ACTIVE' AND expires_at <= v_now, 'EXPIRED', status) AS status, created_at, disabled_at,
           expires_at
      FROM weave_credentials
     WHERE namespace_id = v_ns AND (v_allowed = '*' OR _weave_queue_refused(queues, v_allowed) IS NULL) ORDER BY id;
END
