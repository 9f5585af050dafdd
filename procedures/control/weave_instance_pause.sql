-- Operator pause (C-1); the decision itself is _weave_instance_control, shared with resume
-- and cancel.
CREATE PROCEDURE weave_instance_pause(
        IN in_token           VARCHAR(512),
        IN in_namespace       VARCHAR(200),
        IN in_workflow_id     VARCHAR(64),
        IN in_reason          VARCHAR(4096),
        IN in_idempotency_key VARCHAR(512))
    COMMENT 'Description: sets control PAUSED: facts are still collected (timers settle, outcomes and signals are consumed) but no step is activated and no task is created; no deadline moves.
Parameters: in_token (workflows:control and every queue of the definition), in_namespace, in_workflow_id, in_reason
(1-1024 chars), in_idempotency_key (1-128 printable ASCII, no space).
Result set: workflow_id, control, changed (0 for a repeat), replayed (1 for a replay of this key).
Result sets 2-6: the instance as it is now, as weave_instance_get answers it (the action''s scope is enough).
Errors: 50001 UNAUTHENTICATED, 50002 FORBIDDEN, 50003 NOT_FOUND, 50005 IDEMPOTENCY_CONFLICT, 50007 INVALID_STATE,
50111 REASON_INVALID, 50113 IDEMPOTENCY_KEY_INVALID.
Rules: C-1, C-6, T-5.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_status VARCHAR(16);
    DECLARE v_changed TINYINT;
    DECLARE v_replayed TINYINT;
    DECLARE v_behind BOOLEAN;
    DECLARE v_tx BOOLEAN DEFAULT FALSE;  -- TRUE once this routine has started its own transaction
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN IF v_tx THEN ROLLBACK; END IF; RESIGNAL; END;
    CALL _weave_transaction_begin('weave_instance_pause', v_tx);  -- refused inside a caller's transaction (R-1)
    CALL _weave_instance_control(in_token, in_namespace, in_workflow_id, in_reason, in_idempotency_key, 'pause',
                                 FALSE, v_status, v_changed, v_replayed, v_behind);
    COMMIT;
    SELECT in_workflow_id AS workflow_id, 'PAUSED' AS control, v_changed AS changed, v_replayed AS replayed;
    -- The instance as it is now, for the credential that acted (its scope is enough, 07-api), in its own snapshot:
    -- REPEATABLE READ whatever the session's level, under which a snapshot would read uncommitted or later rows.
    SET TRANSACTION ISOLATION LEVEL REPEATABLE READ;
    START TRANSACTION WITH CONSISTENT SNAPSHOT;
    CALL _weave_instance_show(in_namespace, CAST(SUBSTRING(in_workflow_id, 4) AS UNSIGNED), NULL);
    COMMIT;
END
