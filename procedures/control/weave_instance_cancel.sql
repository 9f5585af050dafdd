-- C-2 cancel: CANCELLING with the gate CLOSED; queued tasks are cancelled at once and running ones asked
-- to stop (their real outcome is still collected, K-5); waiting waits are cancelled, pending signals
-- rejected INSTANCE_SETTLED, every non-final step CANCELLED and open review reasons closed. The
-- instance becomes CANCELLED (final) when no task of it is in flight any more. The decision itself is
-- _weave_instance_control, shared with pause and resume.
CREATE PROCEDURE weave_instance_cancel(
        IN in_token           VARCHAR(512),
        IN in_namespace       VARCHAR(200),
        IN in_workflow_id     VARCHAR(64),
        IN in_reason          VARCHAR(4096),
        IN in_idempotency_key VARCHAR(512))
    COMMENT 'Description: cancels an instance (C-2); cancelling a CANCELLING or CANCELLED instance is a no-op success.
Parameters: in_token (workflows:control and every queue of the definition), in_namespace, in_workflow_id, in_reason
(1-1024 chars), in_idempotency_key (1-128 printable ASCII, no space).
Result set: workflow_id, status (CANCELLING or CANCELLED), changed, replayed.
Result sets 2-6: the instance as it is now, as weave_instance_get answers it (the action''s scope is enough).
Errors: 50001 UNAUTHENTICATED, 50002 FORBIDDEN, 50003 NOT_FOUND, 50005 IDEMPOTENCY_CONFLICT, 50007 INVALID_STATE
(SUCCEEDED), 50111 REASON_INVALID, 50113 IDEMPOTENCY_KEY_INVALID.
Rules: C-2, C-6, K-5, S-9.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_status VARCHAR(16);
    DECLARE v_changed TINYINT;
    DECLARE v_replayed TINYINT;
    DECLARE v_tx BOOLEAN DEFAULT FALSE;  -- TRUE once this routine has started its own transaction
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN IF v_tx THEN ROLLBACK; END IF; RESIGNAL; END;
    CALL _weave_transaction_begin('weave_instance_cancel', v_tx);  -- refused inside a caller's transaction (R-1)
    CALL _weave_instance_control(in_token, in_namespace, in_workflow_id, in_reason, in_idempotency_key, 'cancel',
                                 v_status, v_changed, v_replayed);
    COMMIT;
    SELECT in_workflow_id AS workflow_id, v_status AS status, v_changed AS changed, v_replayed AS replayed;
    -- The instance as it is now, for the credential that acted (its scope is enough, 07-api), in its own snapshot:
    -- REPEATABLE READ whatever the session's level, under which a snapshot would read uncommitted or later rows.
    SET TRANSACTION ISOLATION LEVEL REPEATABLE READ;
    START TRANSACTION WITH CONSISTENT SNAPSHOT;
    CALL _weave_instance_show(in_namespace, CAST(SUBSTRING(in_workflow_id, 4) AS UNSIGNED), NULL);
    COMMIT;
END
