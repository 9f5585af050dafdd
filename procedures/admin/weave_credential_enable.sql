-- A disabled credential's instances take no new step (R-8): their ROOT and POLL checks stay deferred,
-- IDENTITY_DISABLED, and a deferral is work that waits for something that can clear (R-18). Enabling the credential
-- again is what clears it, as setting a disabled app ACTIVE again clears APP_DISABLED. An expiry stays as it was:
-- an expired credential enabled again still authenticates no more, but the instances it started go on.
CREATE PROCEDURE weave_credential_enable(
        IN in_token         VARCHAR(512),
        IN in_namespace     VARCHAR(200),
        IN in_credential_id VARCHAR(64))
    COMMENT 'Description: enables a disabled credential of the namespace again: it authenticates again (until its
expiry, if it has one), and the instances it started take new work again, each at its next check (within a second).
Enabling an active credential is a no-op.
Parameters: in_token (admin scope and every queue of the credential), in_namespace, in_credential_id (cred_...).
Result set: credential_id, actor, status.
Errors: 50001 UNAUTHENTICATED, 50002 FORBIDDEN, 50003 NOT_FOUND.
Rules: S-2, R-8, R-18.'
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
    CALL _weave_transaction_claim('weave_credential_enable', v_tx);
    CALL _weave_admin_begin(in_token, in_namespace, 'admin', NULL, v_ns, v_admin, v_admin_actor, v_now, v_allowed);
    IF in_credential_id REGEXP '^cred_[0-9]{1,19}\\z' THEN
        SELECT id, actor, queues INTO v_id, v_actor, v_queues FROM weave_credentials
         WHERE id = CAST(SUBSTRING(in_credential_id, 6) AS UNSIGNED) AND namespace_id = v_ns FOR UPDATE;
    END IF;
    IF v_id IS NULL THEN
        CALL _weave_raise(50003, 'NOT_FOUND: no such object in this namespace');
    END IF;
    -- An admin restricted to some queues enables only the credentials of its queues, as it disables only those.
    CALL _weave_queues_check(v_queues, v_allowed);
    UPDATE weave_credentials SET status = 'ACTIVE', disabled_at = NULL WHERE id = v_id;
    CALL _weave_audit(v_ns, 0, v_admin, v_admin_actor, 'credential.enable', NULL, NULL, v_now, NULL, NULL,
                      JSON_OBJECT('credential_id', in_credential_id), NULL);
    COMMIT;
    SELECT in_credential_id AS credential_id, v_actor AS actor, 'ACTIVE' AS status;
END
