-- Operator pause (C-1). Allowed while RUNNING or NEEDS_REVIEW; a repeat is a no-op success (C-6).
CREATE PROCEDURE weave_instance_pause(
        IN in_token           VARCHAR(512),
        IN in_namespace       VARCHAR(200),
        IN in_workflow_id     VARCHAR(64),
        IN in_reason          VARCHAR(4096),
        IN in_idempotency_key VARCHAR(512))
    COMMENT 'Description: sets control PAUSED: facts are still collected (timers settle, outcomes and signals are consumed) but no step is activated and no task is created; no deadline moves.
Parameters: in_token (workflows:control and every queue of the definition), in_namespace, in_workflow_id, in_reason
(1-1024 chars), in_idempotency_key (1-128 printable ASCII).
Result set: workflow_id, control, changed (0 for a repeat), replayed (1 for a replay of this key).
Errors: 50001 UNAUTHENTICATED, 50002 FORBIDDEN, 50003 NOT_FOUND, 50005 IDEMPOTENCY_CONFLICT, 50007 INVALID_STATE,
50111 REASON_INVALID, 50113 IDEMPOTENCY_KEY_INVALID.
Rules: C-1, C-6, T-5.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_now DATETIME(6);
    DECLARE v_ns BIGINT UNSIGNED;
    DECLARE v_cred BIGINT UNSIGNED;
    DECLARE v_actor VARCHAR(128);
    DECLARE v_id BIGINT UNSIGNED;
    DECLARE v_replayed TINYINT;
    DECLARE v_status VARCHAR(16);
    DECLARE v_control VARCHAR(16);
    DECLARE v_changed TINYINT DEFAULT 0;
    DECLARE v_digest CHAR(64) DEFAULT SHA2(CONCAT('pause|', COALESCE(in_reason, '')), 256);
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
    START TRANSACTION;
    CALL _weave_now(v_now);
    CALL _weave_control_begin(in_token, in_namespace, in_workflow_id, 'workflows:control', 'instance.pause',
                              in_reason, in_idempotency_key, v_digest, v_ns, v_cred, v_actor, v_id, v_replayed);
    SELECT status, control INTO v_status, v_control FROM weave_instances WHERE id = v_id;
    IF v_replayed = 0 THEN
        IF v_status NOT IN ('RUNNING', 'NEEDS_REVIEW') THEN
            CALL _weave_raise(50007, CONCAT('INVALID_STATE: cannot pause an instance that is ', v_status));
        END IF;
        IF v_control <> 'PAUSED' THEN
            SET v_changed = 1;
            UPDATE weave_instances SET control = 'PAUSED' WHERE id = v_id;
            CALL _weave_event(v_ns, v_id, 'INSTANCE_PAUSED', '', 0, v_now,
                              JSON_OBJECT('actor', v_actor, 'reason', in_reason));
        END IF;
        CALL _weave_audit(v_ns, v_id, v_cred, v_actor, 'instance.pause', in_idempotency_key, v_digest, v_now, NULL,
                          in_reason, JSON_OBJECT('changed', v_changed = 1), NULL);
    END IF;
    COMMIT;
    SELECT in_workflow_id AS workflow_id, 'PAUSED' AS control, v_changed AS changed, v_replayed AS replayed;
END
