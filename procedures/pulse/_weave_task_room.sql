-- R-8 and M-4.7 for one new task: the queue must exist and have capacity left, the app quota must
-- have room. Read from the slots taken on the queue and app rows less their release stripes (one indexed read,
-- whatever the backlog), so a creator that finds no room defers without taking a lock. The answer is a
-- plain read: _pulse_task_create takes the slot with a guarded conditional UPDATE of the same
-- counters, which is what keeps two creators from both taking the last one.
-- A missing queue is a reason to wait, not an error: an operator may create it later.
CREATE PROCEDURE _weave_task_room(
        IN  in_namespace_id BIGINT UNSIGNED,
        IN  in_instance_id  BIGINT UNSIGNED,
        IN  in_queue        VARCHAR(64),
        OUT out_why         VARCHAR(256))
    COMMENT 'Internal. Description: NULL when a task for the instance may be created on in_queue now, else why not
(queue missing, queue full, app quota full), from the slots taken less their releases. The caller holds the instance lock.
Rules: R-8, M-4.7.'
    READS SQL DATA
BEGIN
    DECLARE v_queue BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_capacity INT UNSIGNED;
    DECLARE v_queue_used INT UNSIGNED;
    DECLARE v_app BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_quota INT UNSIGNED;
    DECLARE v_app_used INT UNSIGNED;

    SET out_why = NULL;
    SELECT a.id, a.max_in_flight,
           a.slots_taken - (SELECT SUM(r.released) FROM pulse_slot_releases r
                             WHERE r.owner_kind = 'APP' AND r.owner_id = a.id),
           q.id, q.capacity,
           q.slots_taken - (SELECT SUM(r.released) FROM pulse_slot_releases r
                             WHERE r.owner_kind = 'QUEUE' AND r.owner_id = q.id)
      INTO v_app, v_quota, v_app_used, v_queue, v_capacity, v_queue_used
      FROM weave_instances i
      LEFT JOIN weave_apps a ON a.id = i.app_id
      LEFT JOIN weave_queues q ON q.namespace_id = i.namespace_id AND q.name = in_queue
     WHERE i.id = in_instance_id AND i.namespace_id = in_namespace_id;
    IF v_queue IS NULL THEN
        SET out_why = CONCAT('QUEUE_NOT_FOUND: queue ', COALESCE(in_queue, '(none)'), ' does not exist');
    ELSEIF v_app IS NULL THEN
        SET out_why = 'APP_NOT_FOUND: app of the instance does not exist';
    ELSEIF v_queue_used >= v_capacity THEN
        SET out_why = CONCAT('QUEUE_FULL: queue ', in_queue, ' is full (capacity ', v_capacity, ')');
    ELSEIF v_app_used >= v_quota THEN
        SET out_why = CONCAT('QUOTA_FULL: app quota is full (max_in_flight ', v_quota, ')');
    END IF;
END
