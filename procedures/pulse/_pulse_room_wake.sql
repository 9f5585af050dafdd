-- Room for work waiting in line (R-8): a task's end has given a slot back, or a creator held back by a line has seen
-- room free. The line of the app (QUOTA_FULL) and of the queue (QUEUE_FULL) is woken: the checkpoint it wakes looks
-- again now instead of at its next look, and takes the slot before a creator that did not wait for it
-- (_weave_task_room). A slot given back wakes the first checkpoint not due yet, so the releases of a burst wake the
-- line in its order, one each. A creator held back wakes only the first in line, when it is not due yet: room that
-- no one in front of the creator is looking at is a wake that was missed (a deferral that committed while a task's
-- end was being decided, or a woken look that ended without the slot); one woken look held back in turn so wakes
-- nobody behind it. A checkpoint that another transaction holds is being looked at already and is passed over: the
-- wake never waits for another instance's decision, which may itself be waiting for the app's row.
CREATE PROCEDURE _pulse_room_wake(
        IN in_app        BIGINT UNSIGNED,
        IN in_queue      BIGINT UNSIGNED,
        IN in_now        DATETIME(6),
        IN in_first_only BOOLEAN)
    COMMENT 'Internal. Description: makes a checkpoint waiting for the room of app in_app (QUOTA_FULL) and one of queue
in_queue (QUEUE_FULL) due at in_now: the first by the time its deferral began that is not due yet, or with
in_first_only the first in line when it is not due yet; one another transaction holds is skipped. A NULL app or
queue wakes nothing in its line. Counts them in @weave_made_due (see _weave_checkpoint_set).
Rules: R-8, R-18.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_app_first BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_queue_first BIGINT UNSIGNED DEFAULT NULL;
    IF in_first_only THEN
        -- The first in each line, read without a lock; then taken only when it is not due and no one holds it.
        SELECT (SELECT id FROM weave_pending_advances FORCE INDEX (ix_checkpoint_room_line)
                 WHERE deferred_reason = 'QUOTA_FULL' AND deferred_for = in_app ORDER BY deferred_since, id LIMIT 1),
               (SELECT id FROM weave_pending_advances FORCE INDEX (ix_checkpoint_room_line)
                 WHERE deferred_reason = 'QUEUE_FULL' AND deferred_for = in_queue ORDER BY deferred_since, id LIMIT 1)
          INTO v_app_first, v_queue_first;
        SELECT MAX(IF(id = v_app_first, id, NULL)), MAX(IF(id = v_queue_first, id, NULL))
          INTO v_app_first, v_queue_first
          FROM weave_pending_advances WHERE id IN (v_app_first, v_queue_first) AND available_at > in_now
           FOR UPDATE SKIP LOCKED;
    ELSE
        SELECT id INTO v_app_first FROM weave_pending_advances FORCE INDEX (ix_checkpoint_room_line)
         WHERE deferred_reason = 'QUOTA_FULL' AND deferred_for = in_app AND available_at > in_now
         ORDER BY deferred_since, id LIMIT 1 FOR UPDATE SKIP LOCKED;
        SELECT id INTO v_queue_first FROM weave_pending_advances FORCE INDEX (ix_checkpoint_room_line)
         WHERE deferred_reason = 'QUEUE_FULL' AND deferred_for = in_queue AND available_at > in_now
         ORDER BY deferred_since, id LIMIT 1 FOR UPDATE SKIP LOCKED;
    END IF;
    IF v_app_first IS NOT NULL OR v_queue_first IS NOT NULL THEN
        UPDATE weave_pending_advances SET available_at = GREATEST(due_at, in_now), version = version + 1
         WHERE id IN (v_app_first, v_queue_first);
        SET @weave_made_due = COALESCE(@weave_made_due, 0) + ROW_COUNT();
    END IF;
END
