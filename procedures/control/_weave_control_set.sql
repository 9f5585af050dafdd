-- Pause and resume are one decision with two directions (C-1): set the control state, audit it with actor
-- and reason, and on resume make ROOT and every overdue checkpoint due at once. Allowed while RUNNING or
-- NEEDS_REVIEW; a repeat is a no-op success that is still audited under its key (C-6).
CREATE PROCEDURE _weave_control_set(
        IN  in_token           VARCHAR(512),
        IN  in_namespace       VARCHAR(200),
        IN  in_workflow_id     VARCHAR(64),
        IN  in_reason          VARCHAR(4096),
        IN  in_idempotency_key VARCHAR(512),
        IN  in_action          VARCHAR(16),
        OUT out_changed        TINYINT,
        OUT out_replayed       TINYINT)
    COMMENT 'Internal. Description: the body of weave_instance_pause (in_action pause) and weave_instance_resume (resume).'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_ns BIGINT UNSIGNED;
    DECLARE v_cred BIGINT UNSIGNED;
    DECLARE v_actor VARCHAR(128);
    DECLARE v_id BIGINT UNSIGNED;
    DECLARE v_now DATETIME(6);
    DECLARE v_status VARCHAR(16);
    DECLARE v_control VARCHAR(16);
    DECLARE v_target VARCHAR(16) DEFAULT IF(in_action = 'pause', 'PAUSED', 'ACTIVE');
    DECLARE v_audit_action VARCHAR(48) DEFAULT CONCAT('instance.', in_action);
    DECLARE v_digest CHAR(64) DEFAULT SHA2(CONCAT(in_action, '|', COALESCE(in_reason, '')), 256);
    SET out_changed = 0;
    CALL _weave_control_begin(in_token, in_namespace, in_workflow_id, 'workflows:control', v_audit_action,
                              in_reason, in_idempotency_key, v_digest, v_ns, v_cred, v_actor, v_id, out_replayed, v_now);
    SELECT status, control INTO v_status, v_control FROM weave_instances WHERE id = v_id;
    IF out_replayed = 0 THEN
        IF v_status NOT IN ('RUNNING', 'NEEDS_REVIEW') THEN
            CALL _weave_raise(50007, CONCAT('INVALID_STATE: cannot ', in_action, ' an instance that is ', v_status));
        END IF;
        IF v_control <> v_target THEN
            SET out_changed = 1;
            UPDATE weave_instances SET control = v_target WHERE id = v_id;
            IF in_action = 'resume' THEN
                CALL _weave_checkpoint_set(v_ns, v_id, '', 'ROOT', 0, v_now, v_now);
                UPDATE weave_pending_advances SET available_at = v_now, version = version + 1
                 WHERE instance_id = v_id AND due_at <= v_now AND available_at > v_now;
            END IF;
            CALL _weave_event(v_ns, v_id, IF(in_action = 'pause', 'INSTANCE_PAUSED', 'INSTANCE_RESUMED'), '', 0,
                              v_now, JSON_OBJECT('actor', v_actor, 'reason', in_reason));
        END IF;
        CALL _weave_audit(v_ns, v_id, v_cred, v_actor, v_audit_action, in_idempotency_key, v_digest, v_now, NULL,
                          in_reason, JSON_OBJECT('changed', out_changed = 1), NULL);
    END IF;
END
