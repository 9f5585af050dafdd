-- The one way a Pulse task comes into being, for a TASK step (round 0) and for every POLL round.
-- Everything the task will ever run with is copied from the activation's frozen inputs here and never
-- re-derived: handler + version, input, keys, priority and the retry policy (P-4). The caller has
-- already checked R-8 and holds the locks of _weave_instance_lock; gate and deadlines are checked again
-- anyway, because a task created past them would break M-4.8 for good. The task's slot is the caller's
-- to take, with _pulse_slot_take as the last write of its decision (M-4.7).
CREATE PROCEDURE _pulse_task_create(
        IN  in_namespace_id  BIGINT UNSIGNED,
        IN  in_instance_id   BIGINT UNSIGNED,
        IN  in_step_key      VARCHAR(64),
        IN  in_activation_id BIGINT UNSIGNED,
        IN  in_round_no      INT UNSIGNED,
        IN  in_frozen        LONGTEXT,
        IN  in_deadline      DATETIME(6),
        IN  in_now           DATETIME(6),
        OUT out_task_id      BIGINT UNSIGNED)
    COMMENT 'Internal. Description: creates a QUEUED task for (instance, step, activation, round) from the frozen
step inputs (queue, handler, handler_version, input, priority, retry, task_timeout_ms, business_key, mutex_key),
available at once, with the absolute deadline in_deadline (no attempt starts at or after it); its slot is taken by
the caller (_pulse_slot_take), after its other writes.
Errors: 50007 INVALID_STATE when the instance may not get new work or a frozen field does not fit.
Rules: K-1, K-6, R-8, P-4, M-4.8.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_queue_name VARCHAR(64) DEFAULT JSON_VALUE(in_frozen, '$.queue');
    DECLARE v_business LONGTEXT;
    DECLARE v_mutex LONGTEXT;
    DECLARE v_retry LONGTEXT DEFAULT JSON_EXTRACT(in_frozen, '$.retry');

    -- Keys are compared as text: a JSON string is used unquoted, any other JSON value as its JSON text.
    SET v_business = CASE WHEN JSON_TYPE(JSON_EXTRACT(in_frozen, '$.business_key')) IS NULL
                            OR JSON_TYPE(JSON_EXTRACT(in_frozen, '$.business_key')) = 'NULL' THEN NULL
                          WHEN JSON_TYPE(JSON_EXTRACT(in_frozen, '$.business_key')) = 'STRING'
                            THEN JSON_VALUE(in_frozen, '$.business_key')
                          ELSE JSON_EXTRACT(in_frozen, '$.business_key') END;
    SET v_mutex = CASE WHEN JSON_TYPE(JSON_EXTRACT(in_frozen, '$.mutex_key')) IS NULL
                         OR JSON_TYPE(JSON_EXTRACT(in_frozen, '$.mutex_key')) = 'NULL' THEN NULL
                       WHEN JSON_TYPE(JSON_EXTRACT(in_frozen, '$.mutex_key')) = 'STRING'
                         THEN JSON_VALUE(in_frozen, '$.mutex_key')
                       ELSE JSON_EXTRACT(in_frozen, '$.mutex_key') END;
    IF CHAR_LENGTH(v_business) > 256 OR CHAR_LENGTH(v_mutex) > 256 THEN
        CALL _weave_raise(50007, 'INVALID_STATE: a resolved business_key or mutex_key is longer than 256 characters');
    END IF;
    IF v_retry IS NULL OR JSON_VALUE(in_frozen, '$.handler') IS NULL
       OR JSON_VALUE(in_frozen, '$.handler_version') IS NULL THEN
        CALL _weave_raise(50007, 'INVALID_STATE: frozen inputs lack handler, handler_version or retry');
    END IF;

    -- The task is written only from an instance that may get new work, with a deadline after now and within
    -- the instance's (R-8, K-6): the caller has checked both, and this insert checks them again on the row.
    INSERT INTO pulse_tasks (namespace_id, app_id, queue_id, instance_id, step_key, activation_id, round_no, handler,
                             handler_version, input, priority, business_key, mutex_key, max_attempts,
                             initial_backoff_ms, backoff_coefficient, max_backoff_ms, timeout_ms, deadline_at, status,
                             attempts_used, cancel_requested, available_at, created_at, updated_at)
    SELECT in_namespace_id, i.app_id, q.id, in_instance_id, in_step_key, in_activation_id, in_round_no,
           JSON_VALUE(in_frozen, '$.handler'), JSON_VALUE(in_frozen, '$.handler_version'),
           COALESCE(JSON_EXTRACT(in_frozen, '$.input'), '{}'),
           COALESCE(CAST(JSON_VALUE(in_frozen, '$.priority') AS SIGNED), 0), v_business, v_mutex,
           CAST(JSON_VALUE(v_retry, '$.max_attempts') AS UNSIGNED),
           CAST(JSON_VALUE(v_retry, '$.initial_backoff_ms') AS UNSIGNED),
           CAST(JSON_VALUE(v_retry, '$.backoff_coefficient') AS DOUBLE),
           CAST(JSON_VALUE(v_retry, '$.max_backoff_ms') AS UNSIGNED),
           COALESCE(CAST(JSON_VALUE(in_frozen, '$.task_timeout_ms') AS UNSIGNED), 30000),
           in_deadline, 'QUEUED', 0, 0, in_now, in_now, in_now
      FROM weave_instances i
      -- A join, not a subquery of the select list: a KILL QUERY that lands in such a subquery gives it no value and
      -- no error (see _weave_root_advance), and the task failed as a NULL queue (1048), not as interrupted.
      JOIN weave_queues q ON q.namespace_id = in_namespace_id AND q.name = v_queue_name
     WHERE i.id = in_instance_id AND i.namespace_id = in_namespace_id AND i.status = 'RUNNING'
       AND i.control = 'ACTIVE' AND i.gate = 'OPEN' AND in_now < i.deadline_at
       AND in_deadline > in_now AND in_deadline <= i.deadline_at;
    IF ROW_COUNT() <> 1 THEN
        CALL _weave_raise(50007, CONCAT('INVALID_STATE: no new task unless the instance is RUNNING, ACTIVE, gate ',
                                        'OPEN, with a task deadline after now and within the instance''s'));
    END IF;
    SET out_task_id = LAST_INSERT_ID();
END
