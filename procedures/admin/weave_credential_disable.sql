CREATE PROCEDURE weave_credential_disable(
        IN in_token         VARCHAR(512),
        IN in_namespace     VARCHAR(200),
        IN in_credential_id VARCHAR(64))
    COMMENT 'Description: disables a credential of the namespace; it can no longer authenticate, and instances it
started get no new work (R-8) until it is enabled again (weave_credential_enable); its console sessions end for
good. Disabling a disabled credential changes nothing (it is audited again).
Parameters: in_token (admin scope and every queue of the credential), in_namespace, in_credential_id (cred_...).
Result set: credential_id, actor, status.
Errors: 50001 UNAUTHENTICATED, 50002 FORBIDDEN, 50003 NOT_FOUND, 1205 (the row is held for more than a second, by a
long transaction that uses it: try again).
Rules: S-2, R-8.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_actor VARCHAR(128);
    DECLARE v_tx BOOLEAN DEFAULT FALSE;  -- TRUE once this routine has started its own transaction
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN IF v_tx THEN ROLLBACK; END IF; RESIGNAL; END;
    CALL _weave_transaction_begin('weave_credential_disable', v_tx);  -- READ COMMITTED: its delete locks no gaps (see the put)
    CALL _weave_credential_status_put(in_token, in_namespace, in_credential_id, 'DISABLED', v_actor);
    COMMIT;
    SELECT in_credential_id AS credential_id, v_actor AS actor, 'DISABLED' AS status;
END
