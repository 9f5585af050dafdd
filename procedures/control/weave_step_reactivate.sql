-- C-4 reactivate: a new activation k+1 with fresh budgets and deadlines measured from now (capped by the
-- instance deadline) and inputs resolved again. The step's sequence moves to k+1 at once, so signals for
-- k can no longer win (S-8); the activation row, its task or wait are created by the ROOT advance as soon
-- as R-8 allows. Nothing of activation k is rewritten (C-5).
CREATE PROCEDURE weave_step_reactivate(
        IN in_token           VARCHAR(512),
        IN in_namespace       VARCHAR(200),
        IN in_workflow_id     VARCHAR(64),
        IN in_step_key        VARCHAR(200),
        IN in_timeout_ms      BIGINT,
        IN in_reason          VARCHAR(4096),
        IN in_idempotency_key VARCHAR(512),
        IN in_activation_sequence INT UNSIGNED)
    COMMENT 'Description: reactivates a step in NEEDS_REVIEW as activation k+1; closes its review reasons; the instance
reopens when no reason is left.
Parameters: in_token (workflows:review and every queue of the definition), in_namespace, in_workflow_id, in_step_key,
in_timeout_ms (optional new timeout_ms for SIGNAL/POLL steps, > 0), in_reason, in_idempotency_key,
in_activation_sequence (optional: the activation the action is meant for; another one in review is refused
INVALID_STATE, nothing changed).
Result set: workflow_id, step_key, activation_sequence, status (of the instance), replayed.
Result sets 2-6: the instance as it is now, as weave_instance_get answers it (the action''s scope is enough).
Errors: 50001 UNAUTHENTICATED, 50002 FORBIDDEN, 50003 NOT_FOUND, 50005 IDEMPOTENCY_CONFLICT, 50007 INVALID_STATE,
50008 TASK_IN_FLIGHT, 50100 INVALID_ARGUMENT, 50111 REASON_INVALID, 50113 IDEMPOTENCY_KEY_INVALID.
Rules: C-4, C-5, C-6, S-8.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_id BIGINT UNSIGNED;
    DECLARE v_replayed TINYINT;
    DECLARE v_seq INT UNSIGNED;
    DECLARE v_status VARCHAR(16);
    -- The activation, when given, follows the step key ('@k', where no other field can start so; absent, the
    -- digest is the one a request without it always had).
    DECLARE v_digest CHAR(64) DEFAULT SHA2(CONCAT_WS('|', 'reactivate', COALESCE(in_step_key, ''),
                                                     CONCAT('@', in_activation_sequence),
                                                     COALESCE(in_timeout_ms, '-'), COALESCE(in_reason, '')), 256);
    DECLARE v_tx BOOLEAN DEFAULT FALSE;  -- TRUE once this routine has started its own transaction
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN IF v_tx THEN ROLLBACK; END IF; RESIGNAL; END;
    CALL _weave_transaction_begin('weave_step_reactivate', v_tx);  -- refused inside a caller's transaction (R-1)
    CALL _weave_step_recover('reactivate', in_token, in_namespace, in_workflow_id, in_step_key, NULL, NULL,
                             in_timeout_ms, NULL, NULL, in_reason, in_idempotency_key, v_digest, in_activation_sequence,
                             v_id, v_replayed);
    SELECT status INTO v_status FROM weave_instances WHERE id = v_id;
    SELECT activation_seq INTO v_seq FROM weave_steps WHERE instance_id = v_id AND step_key = in_step_key;
    COMMIT;
    SELECT in_workflow_id AS workflow_id, in_step_key AS step_key, v_seq AS activation_sequence, v_status AS status,
           v_replayed AS replayed;
    -- The instance as it is now, for the credential that acted (its scope is enough, 07-api), in its own snapshot:
    -- REPEATABLE READ whatever the session's level, under which a snapshot would read uncommitted or later rows.
    SET TRANSACTION ISOLATION LEVEL REPEATABLE READ;
    START TRANSACTION WITH CONSISTENT SNAPSHOT;
    CALL _weave_instance_show(in_namespace, CAST(SUBSTRING(in_workflow_id, 4) AS UNSIGNED), NULL);
    COMMIT;
END
