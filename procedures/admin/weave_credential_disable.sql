CREATE PROCEDURE weave_credential_disable(
        IN in_token         VARCHAR(512),
        IN in_namespace     VARCHAR(200),
        IN in_credential_id VARCHAR(64))
    COMMENT 'Description: disables a credential of the namespace; it can no longer authenticate, and instances it
started get no new work (R-8) until it is enabled again (weave_credential_enable). Disabling a disabled credential is
a no-op.
Parameters: in_token (admin scope and every queue of the credential), in_namespace, in_credential_id (cred_...).
Result set: credential_id, actor, status.
Errors: 50001 UNAUTHENTICATED, 50002 FORBIDDEN, 50003 NOT_FOUND.
Rules: S-2, R-8.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_now DATETIME(6);
    DECLARE v_ns BIGINT UNSIGNED;
    DECLARE v_admin BIGINT UNSIGNED;
    DECLARE v_admin_actor VARCHAR(128);
    DECLARE v_id BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_actor VARCHAR(128);
    DECLARE v_queues VARCHAR(2048);
    DECLARE v_allowed VARCHAR(2048);  -- the credential's own queues
    DECLARE v_tx BOOLEAN DEFAULT FALSE;  -- TRUE once this routine has started its own transaction
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN IF v_tx THEN ROLLBACK; END IF; RESIGNAL; END;
    CALL _weave_transaction_claim('weave_credential_disable', v_tx);
    CALL _weave_admin_begin(in_token, in_namespace, 'admin', NULL, v_ns, v_admin, v_admin_actor, v_now, v_allowed);
    IF in_credential_id REGEXP '^cred_[0-9]{1,19}\\z' THEN
        SELECT id, actor, queues INTO v_id, v_actor, v_queues FROM weave_credentials
         WHERE id = CAST(SUBSTRING(in_credential_id, 6) AS UNSIGNED) AND namespace_id = v_ns FOR UPDATE;
    END IF;
    IF v_id IS NULL THEN
        CALL _weave_raise(50003, 'NOT_FOUND: no such object in this namespace');
    END IF;
    -- An admin restricted to some queues disables only the credentials of its queues (one for every queue only
    -- from an admin of every queue), as it creates only those.
    CALL _weave_queues_check(v_queues, v_allowed);
    UPDATE weave_credentials SET status = 'DISABLED', disabled_at = COALESCE(disabled_at, v_now)
     WHERE id = v_id;
    CALL _weave_audit(v_ns, 0, v_admin, v_admin_actor, 'credential.disable', NULL, NULL, v_now, NULL, NULL,
                      JSON_OBJECT('credential_id', in_credential_id), NULL);
    COMMIT;
    SELECT in_credential_id AS credential_id, v_actor AS actor, 'DISABLED' AS status;
END
