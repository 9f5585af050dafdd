-- T-1: due = min(start + delay, instance deadline), fixed at activation and never re-timed; the
-- TIMER checkpoint pinned to this activation wakes it (T-2: no task, no permit).
CREATE PROCEDURE _weave_timer_activate(
        IN in_namespace_id  BIGINT UNSIGNED,
        IN in_instance_id   BIGINT UNSIGNED,
        IN in_activation_id BIGINT UNSIGNED,
        IN in_step_key      VARCHAR(64),
        IN in_seq           INT UNSIGNED,
        IN in_frozen        LONGTEXT,
        IN in_now           DATETIME(6),
        IN in_deadline      DATETIME(6))
    COMMENT 'Internal. Description: creates the TIMER wait and its checkpoint for a new activation (T-1, T-2).'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_delay BIGINT UNSIGNED DEFAULT CAST(JSON_VALUE(in_frozen, '$.delay_ms') AS UNSIGNED);
    DECLARE v_planned DATETIME(6);
    DECLARE v_due DATETIME(6);
    SET v_planned = in_now + INTERVAL v_delay * 1000 MICROSECOND;
    SET v_due = LEAST(v_planned, in_deadline);
    INSERT INTO weave_waits (namespace_id, instance_id, activation_id, step_key, activation_seq, kind, status,
                             started_at, due_at, planned_due_at)
    VALUES (in_namespace_id, in_instance_id, in_activation_id, in_step_key, in_seq, 'TIMER', 'WAITING', in_now,
            v_due, v_planned);
    CALL _weave_checkpoint_set(in_namespace_id, in_instance_id, in_step_key, 'TIMER', in_activation_id, v_due, in_now);
    CALL _weave_event(in_namespace_id, in_instance_id, 'STEP_ACTIVATED', in_step_key, in_seq, in_now,
         JSON_OBJECT('type', 'TIMER', 'delay_ms', v_delay + 0,
                     'due_at', DATE_FORMAT(v_due, '%Y-%m-%dT%H:%i:%s.%fZ'),
                     'planned_due_at', DATE_FORMAT(v_planned, '%Y-%m-%dT%H:%i:%s.%fZ'),
                     'truncated', v_due < v_planned), NULL, NULL);
END
