-- A new task's slot, taken from its app and its queue as the last write of the decision that created the task
-- (after the task, its round, its event and its audit row): the app and queue rows are the one place where every
-- task creation of an app waits for the others, so each holds them only from here to its commit. The take is
-- guarded by the counters themselves: of two creators racing for the last slot, the second finds no row to change
-- and its whole decision is retried (ROOM_TAKEN is transient), to defer then on the room check that comes before
-- anything is written (M-4.7). The rows are taken app first, then queue, as everywhere (STRAIGHT_JOIN keeps that
-- order). The slots given back come from the caller, which read the release stripes that a task's end writes
-- (_pulse_inbox_add) without a lock before this: a release that has not committed yet still counts as a task in
-- flight, so room is never over-counted, and a report never waits for a creation, nor a creation for a report.
-- (In the multi-table update below the same read would share-lock the stripes.)
CREATE PROCEDURE _pulse_slot_take(
        IN in_namespace_id   BIGINT UNSIGNED,
        IN in_instance_id    BIGINT UNSIGNED,
        IN in_queue          VARCHAR(64),
        IN in_app_released   BIGINT UNSIGNED,
        IN in_queue_released BIGINT UNSIGNED)
    COMMENT 'Internal. Description: takes one slot of the instance''s app and of queue in_queue for a task the caller
has just created: slots taken + 1 on both rows, when the slots taken less in_app_released, in_queue_released (the
slots given back, as the caller read their release stripes without a lock) leave room on both. The caller holds
the instance lock and makes this the last write of its decision.
Errors: 50014 ROOM_TAKEN (transient: the decision is retried) when either has no room left.
Rules: R-8, M-4.7.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_why VARCHAR(256);
    DECLARE v_no_app_released BIGINT UNSIGNED;  -- the room check's own reading of the stripes, not needed here
    DECLARE v_no_queue_released BIGINT UNSIGNED;
    DECLARE v_no_waits_for BIGINT UNSIGNED;
    UPDATE weave_apps a
      STRAIGHT_JOIN weave_queues q ON q.namespace_id = in_namespace_id AND q.name = in_queue
       SET a.slots_taken = a.slots_taken + 1, q.slots_taken = q.slots_taken + 1
     WHERE a.id = (SELECT i.app_id FROM weave_instances i WHERE i.id = in_instance_id)
       AND a.slots_taken - in_app_released < a.max_in_flight AND q.slots_taken - in_queue_released < q.capacity;
    IF ROW_COUNT() <> 2 THEN
        -- Room was seen before anything was written: lost to a concurrent creator (the message says what is full
        -- now), which is transient, so the whole decision is retried and then defers (R-8).
        CALL _weave_task_room(in_namespace_id, in_instance_id, '', in_queue, NULL, v_why, v_no_app_released,
                              v_no_queue_released, v_no_waits_for);
        CALL _weave_raise(50014, CONCAT('ROOM_TAKEN: no room for a task: ', COALESCE(v_why, 'taken concurrently')));
    END IF;
END
