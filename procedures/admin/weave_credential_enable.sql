-- A disabled credential's instances take no new step (R-8): their ROOT and POLL checks stay deferred,
-- IDENTITY_DISABLED, and a deferral is work that waits for something that can clear (R-18). Enabling the credential
-- again is what clears it, as setting a disabled app ACTIVE again clears APP_DISABLED. An expiry stays as it was:
-- an expired credential enabled again still authenticates no more, but the instances it started go on.
CREATE PROCEDURE weave_credential_enable(
        IN in_token         VARCHAR(512),
        IN in_namespace     VARCHAR(200),
        IN in_credential_id VARCHAR(64))
    COMMENT 'Description: enables a disabled credential of the namespace again: it authenticates again (until its
expiry, if it has one), and the instances it started take new work again: the checks they deferred for it are due at
once.
Enabling an active credential is a no-op.
Parameters: in_token (admin scope and every queue of the credential), in_namespace, in_credential_id (cred_...).
Result set: credential_id, actor, status.
Errors: 50001 UNAUTHENTICATED, 50002 FORBIDDEN, 50003 NOT_FOUND, 1205 (the row is held for more than a second, by a
long transaction that uses it: try again).
Rules: S-2, R-8, R-18.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_actor VARCHAR(128);
    DECLARE v_tx BOOLEAN DEFAULT FALSE;  -- TRUE once this routine has started its own transaction
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN IF v_tx THEN ROLLBACK; END IF; RESIGNAL; END;
    CALL _weave_transaction_begin('weave_credential_enable', v_tx);  -- READ COMMITTED: its wake locks no gaps
    CALL _weave_credential_status_put(in_token, in_namespace, in_credential_id, 'ACTIVE', v_actor);
    COMMIT;
    SELECT in_credential_id AS credential_id, v_actor AS actor, 'ACTIVE' AS status;
END
