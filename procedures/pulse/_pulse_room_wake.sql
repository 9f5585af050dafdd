-- A task's slot has just gone back to its app and its queue: the first in each line of work deferred for their room
-- (R-8) looks again now instead of at its next second's look, and takes the slot before a creator that did not wait
-- for it (_weave_task_room). Only checkpoints not due yet are woken, so the releases of a burst wake the line in its
-- order, one each. A checkpoint that another transaction holds is being looked at already and is passed over: the
-- release never waits for another instance's decision, which may itself be waiting for the app's row.
CREATE PROCEDURE _pulse_room_wake(
        IN in_task_id BIGINT UNSIGNED,
        IN in_now     DATETIME(6))
    COMMENT 'Internal. Description: makes the first checkpoint waiting for the room of the task''s app (QUOTA_FULL) and
of its queue (QUEUE_FULL), by the time its deferral began, and not due yet, due at in_now (skipping those another
transaction holds); counts them in @weave_made_due (see _weave_checkpoint_set). The caller has just released the
task''s slot.
Rules: R-8, R-18.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_app_first BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_queue_first BIGINT UNSIGNED DEFAULT NULL;
    SELECT id INTO v_app_first FROM weave_pending_advances FORCE INDEX (ix_checkpoint_room_line)
     WHERE deferred_reason = 'QUOTA_FULL' AND deferred_for = (SELECT app_id FROM pulse_tasks WHERE id = in_task_id)
       AND available_at > in_now
     ORDER BY deferred_since, id LIMIT 1 FOR UPDATE SKIP LOCKED;
    SELECT id INTO v_queue_first FROM weave_pending_advances FORCE INDEX (ix_checkpoint_room_line)
     WHERE deferred_reason = 'QUEUE_FULL' AND deferred_for = (SELECT queue_id FROM pulse_tasks WHERE id = in_task_id)
       AND available_at > in_now
     ORDER BY deferred_since, id LIMIT 1 FOR UPDATE SKIP LOCKED;
    IF v_app_first IS NOT NULL OR v_queue_first IS NOT NULL THEN
        UPDATE weave_pending_advances SET available_at = GREATEST(due_at, in_now), version = version + 1
         WHERE id IN (v_app_first, v_queue_first);
        SET @weave_made_due = COALESCE(@weave_made_due, 0) + ROW_COUNT();
    END IF;
END
