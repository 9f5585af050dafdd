-- Activation creates the next generation of a step (R-7): a new activation row with its frozen
-- inputs, the step's pointer moved to it, and the step type's wait, task or round with its checkpoint.
-- Callers have verified R-8 and hold the instance lock.
CREATE PROCEDURE _weave_step_activate(
        IN  in_namespace_id BIGINT UNSIGNED,
        IN  in_instance_id  BIGINT UNSIGNED,
        IN  in_step_id      BIGINT UNSIGNED,
        IN  in_now          DATETIME(6),
        OUT out_result      VARCHAR(16))
    COMMENT 'Internal. Description: activates a PENDING step (R-7): activation row, frozen inputs, wait/task and checkpoint.
out_result: ACTIVATED.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_key VARCHAR(64);
    DECLARE v_type VARCHAR(16);
    DECLARE v_seq INT UNSIGNED;
    DECLARE v_spec LONGTEXT;
    DECLARE v_deadline DATETIME(6);
    DECLARE v_activation BIGINT UNSIGNED;
    DECLARE v_delay BIGINT UNSIGNED;
    DECLARE v_planned DATETIME(6);
    DECLARE v_due DATETIME(6);

    SELECT s.step_key, s.type, s.activation_seq + 1, ds.spec, i.deadline_at
      INTO v_key, v_type, v_seq, v_spec, v_deadline
      FROM weave_steps s
      JOIN weave_instances i ON i.id = s.instance_id
      JOIN weave_definition_steps ds ON ds.definition_id = i.definition_id AND ds.step_key = s.step_key
     WHERE s.id = in_step_id AND s.instance_id = in_instance_id FOR UPDATE;

    IF v_type = 'TIMER' THEN
        SET v_delay = CAST(JSON_EXTRACT(v_spec, '$.delay_ms') AS UNSIGNED);
        INSERT INTO weave_activations (namespace_id, instance_id, step_id, step_key, seq, frozen, started_at, deadline_at)
        VALUES (in_namespace_id, in_instance_id, in_step_id, v_key, v_seq, JSON_OBJECT('delay_ms', v_delay + 0),
                in_now, v_deadline);
        SET v_activation = LAST_INSERT_ID();
        -- T-1: due = min(start + delay, instance deadline), fixed now and never re-timed.
        SET v_planned = in_now + INTERVAL v_delay * 1000 MICROSECOND;
        SET v_due = LEAST(v_planned, v_deadline);
        INSERT INTO weave_waits (namespace_id, instance_id, activation_id, step_key, activation_seq, kind, status,
                                 started_at, due_at, planned_due_at)
        VALUES (in_namespace_id, in_instance_id, v_activation, v_key, v_seq, 'TIMER', 'WAITING', in_now, v_due, v_planned);
        CALL _weave_checkpoint_set(in_namespace_id, in_instance_id, v_key, 'TIMER', v_activation, v_due, in_now);
        UPDATE weave_steps SET status = 'ACTIVE', activation_seq = v_seq, activation_id = v_activation,
                               updated_at = in_now WHERE id = in_step_id;
        CALL _weave_event(in_namespace_id, in_instance_id, 'STEP_ACTIVATED', v_key, v_seq, in_now,
             JSON_OBJECT('type', 'TIMER', 'delay_ms', v_delay + 0,
                         'due_at', DATE_FORMAT(v_due, '%Y-%m-%dT%H:%i:%s.%fZ'),
                         'planned_due_at', DATE_FORMAT(v_planned, '%Y-%m-%dT%H:%i:%s.%fZ'),
                         'truncated', v_due < v_planned));
    ELSE
        -- Steps that run tasks or wait for signals: activated with their frozen contract; the task,
        -- round or signal wait is created by the routines of those step types.
        INSERT INTO weave_activations (namespace_id, instance_id, step_id, step_key, seq, frozen, started_at, deadline_at)
        VALUES (in_namespace_id, in_instance_id, in_step_id, v_key, v_seq, v_spec, in_now, v_deadline);
        SET v_activation = LAST_INSERT_ID();
        UPDATE weave_steps SET status = 'ACTIVE', activation_seq = v_seq, activation_id = v_activation,
                               updated_at = in_now WHERE id = in_step_id;
        CALL _weave_event(in_namespace_id, in_instance_id, 'STEP_ACTIVATED', v_key, v_seq, in_now,
                          JSON_OBJECT('type', v_type));
    END IF;
    SET out_result = 'ACTIVATED';
END
