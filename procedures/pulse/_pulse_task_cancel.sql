-- K-5: a task that has not started is cancelled at once (its outcome goes to the inbox like any
-- other); a running one only gets the intent: its permit stays with the attempt until the worker
-- reports or the lease is lost, because the external effect may be under way. Used by instance cancel
-- (C-2) and by the final-signal race, which hold the instance lock and own the transaction.
CREATE PROCEDURE _pulse_task_cancel(
        IN  in_task_id  BIGINT UNSIGNED,
        IN  in_now      DATETIME(6),
        OUT out_outcome VARCHAR(16))
    COMMENT 'Internal. Description: cancels a task (K-5). out_outcome: CANCELLED (was QUEUED: now CANCELLED with an
inbox event), REQUESTED (was RUNNING: cancel_requested = 1, permit kept), or the task''s final status unchanged
(SUCCEEDED, FAILED, UNKNOWN, CANCELLED, EXPIRED), or GONE when there is no such task. An inbox event written is
counted in @weave_made_due (see _weave_checkpoint_set).
Rules: K-5, C-2.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_status VARCHAR(16) DEFAULT NULL;
    DECLARE v_used INT UNSIGNED;
    SELECT status, attempts_used INTO v_status, v_used FROM pulse_tasks WHERE id = in_task_id FOR UPDATE;
    IF v_status IS NULL THEN
        SET out_outcome = 'GONE';
    ELSEIF v_status = 'QUEUED' THEN
        UPDATE pulse_tasks SET status = 'CANCELLED', finished_at = in_now, updated_at = in_now WHERE id = in_task_id;
        -- No wake of the work waiting for its room: a cancel goes on writing (more tasks, the instance), and must
        -- not hold another instance's checkpoint meanwhile. The first in line looks every second (_weave_checkpoint_defer).
        CALL _pulse_inbox_add(in_task_id, 'CANCELLED',
             JSON_OBJECT('cancelled_at', DATE_FORMAT(in_now, '%Y-%m-%dT%H:%i:%s.%fZ'), 'attempts_used', v_used + 0),
             in_now, in_now, NULL, NULL, NULL, FALSE);
        SET @weave_made_due = COALESCE(@weave_made_due, 0) + 1;  -- its event is due at once (see _weave_checkpoint_set)
        SET out_outcome = 'CANCELLED';
    ELSEIF v_status = 'RUNNING' THEN
        UPDATE pulse_tasks SET cancel_requested = 1, updated_at = in_now WHERE id = in_task_id;
        SET out_outcome = 'REQUESTED';
    ELSE
        SET out_outcome = v_status;
    END IF;
END
