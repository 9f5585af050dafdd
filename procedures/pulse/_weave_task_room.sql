-- R-8 and M-4.7 for one new task: the queue must exist and have capacity left, the app quota must
-- have room. Read from the slots taken on the queue and app rows less their release stripes (one indexed read,
-- whatever the backlog), so a creator that finds no room defers without taking a lock. The answer is a
-- plain read: _pulse_slot_take takes the slot with a guarded conditional UPDATE of the same
-- counters, which is what keeps two creators from both taking the last one.
-- A missing queue is a reason to wait, not an error: an operator may create it later. The slots given back are
-- answered too (NULL when the app or queue is missing): a creation that follows takes its slot from them.
CREATE PROCEDURE _weave_task_room(
        IN  in_namespace_id BIGINT UNSIGNED,
        IN  in_instance_id  BIGINT UNSIGNED,
        IN  in_queue        VARCHAR(64),
        OUT out_why         VARCHAR(256),
        OUT out_app_released   BIGINT UNSIGNED,
        OUT out_queue_released BIGINT UNSIGNED)
    COMMENT 'Internal. Description: NULL when a task for the instance may be created on in_queue now, else why not
(queue missing, queue full, app quota full), from the slots taken less their releases; out_app_released,
out_queue_released: the slots the app and the queue have been given back (their release stripes), read without a
lock. The caller holds the instance lock.
Errors: 50007 INVALID_STATE when the app or queue has no release stripes.
Rules: R-8, M-4.7.'
    READS SQL DATA
BEGIN
    DECLARE v_queue BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_capacity INT UNSIGNED;
    DECLARE v_queue_taken BIGINT UNSIGNED;
    DECLARE v_app BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_quota INT UNSIGNED;
    DECLARE v_app_taken BIGINT UNSIGNED;

    SET out_why = NULL;
    SELECT a.id, a.max_in_flight, a.slots_taken,
           (SELECT SUM(r.released) FROM pulse_slot_releases r WHERE r.owner_kind = 'APP' AND r.owner_id = a.id),
           q.id, q.capacity, q.slots_taken,
           (SELECT SUM(r.released) FROM pulse_slot_releases r WHERE r.owner_kind = 'QUEUE' AND r.owner_id = q.id)
      INTO v_app, v_quota, v_app_taken, out_app_released, v_queue, v_capacity, v_queue_taken, out_queue_released
      FROM weave_instances i
      LEFT JOIN weave_apps a ON a.id = i.app_id
      LEFT JOIN weave_queues q ON q.namespace_id = i.namespace_id AND q.name = in_queue
     WHERE i.id = in_instance_id AND i.namespace_id = in_namespace_id;
    IF v_queue IS NULL THEN
        SET out_why = CONCAT('QUEUE_NOT_FOUND: queue ', COALESCE(in_queue, '(none)'), ' does not exist');
    ELSEIF v_app IS NULL THEN
        SET out_why = 'APP_NOT_FOUND: app of the instance does not exist';
    ELSEIF out_app_released IS NULL OR out_queue_released IS NULL THEN
        -- Provisioning gives every app and queue its stripes (M-4.7b): without them room cannot be known.
        CALL _weave_raise(50007, 'INVALID_STATE: the app or queue has no release stripes; left for an operator');
    ELSEIF v_queue_taken - out_queue_released >= v_capacity THEN
        SET out_why = CONCAT('QUEUE_FULL: queue ', in_queue, ' is full (capacity ', v_capacity, ')');
    ELSEIF v_app_taken - out_app_released >= v_quota THEN
        SET out_why = CONCAT('QUOTA_FULL: app quota is full (max_in_flight ', v_quota, ')');
    END IF;
END
