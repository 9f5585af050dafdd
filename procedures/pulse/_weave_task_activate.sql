-- A TASK step is one Pulse task, created in the activation's own transaction (R-4): the activation,
-- the task and the quota it takes stand or fall together. Its deadline is measured from the
-- activation and capped by the instance deadline in force now (T-1's rule for every due time). No
-- checkpoint is needed: the task's outcome reaches the step through the inbox (K-7).
CREATE PROCEDURE _weave_task_activate(
        IN in_namespace_id  BIGINT UNSIGNED,
        IN in_instance_id   BIGINT UNSIGNED,
        IN in_activation_id BIGINT UNSIGNED,
        IN in_step_key      VARCHAR(64),
        IN in_seq           INT UNSIGNED,
        IN in_frozen        LONGTEXT,
        IN in_now           DATETIME(6),
        IN in_deadline      DATETIME(6),
        OUT out_facts LONGTEXT, OUT out_action VARCHAR(48), OUT out_audit_deadline DATETIME(6))
    COMMENT 'Internal. Description: creates the TASK step''s task for a new activation, deadline =
min(now + task_timeout_ms, instance deadline). out_facts, out_action, out_audit_deadline: the STEP_ACTIVATED
event''s data (with the task id) and its audit row, task.create with the task''s deadline, which the caller writes.
Rules: K-1, K-6, R-4, R-7.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_timeout BIGINT UNSIGNED DEFAULT COALESCE(CAST(JSON_VALUE(in_frozen, '$.task_timeout_ms') AS UNSIGNED),
                                                        30000);
    DECLARE v_deadline DATETIME(6);
    DECLARE v_task BIGINT UNSIGNED;

    SET v_deadline = LEAST(in_now + INTERVAL v_timeout * 1000 MICROSECOND, in_deadline);
    CALL _pulse_task_create(in_namespace_id, in_instance_id, in_step_key, in_activation_id, 0, in_frozen, v_deadline,
                            in_now, v_task);
    SET out_facts = JSON_OBJECT('type', 'TASK', 'task_id', CONCAT('tsk_', v_task),
                              'queue', JSON_VALUE(in_frozen, '$.queue'),
                              'handler', JSON_VALUE(in_frozen, '$.handler'),
                              'handler_version', JSON_VALUE(in_frozen, '$.handler_version'),
                              'deadline_at', DATE_FORMAT(v_deadline, '%Y-%m-%dT%H:%i:%s.%fZ'));
    SET out_action = 'task.create', out_audit_deadline = v_deadline;
END
