-- Every terminal outcome of a task is written once to the inbox, in the transaction that decided it,
-- stamped with the outcome's own time: the orchestrator consumes it later (K-7) and judges races by
-- that time, never by when it happened to scan (P-10). A task reaches its final status exactly here,
-- so here its slot is released to its app and queue (M-4.7), and the first of the work waiting in line for that
-- room is woken (R-8). When the caller holds the task's instance (a worker's report, Settle at Report), the event is
-- consumed here too, after the release: a successor the consumption activates takes the slot that has just come
-- back, unless work waited for it before (then it waits in line behind that, and the wake comes last).
CREATE PROCEDURE _pulse_inbox_add(
        IN in_task_id     BIGINT UNSIGNED,
        IN in_kind        VARCHAR(16),
        IN in_result      LONGTEXT,
        IN in_occurred_at DATETIME(6),
        IN in_now         DATETIME(6),
        IN in_namespace_id BIGINT UNSIGNED,
        IN in_instance_id  BIGINT UNSIGNED,
        IN in_inst_status  VARCHAR(16),
        IN in_lines        BOOLEAN)
    COMMENT 'Internal. Description: writes the inbox event of a task outcome (SUCCEEDED, FAILED, UNKNOWN, CANCELLED or
EXPIRED), available for consumption at once, and releases the task''s slot to its app and queue (a release stripe each).
in_instance_id (with in_namespace_id and in_inst_status): the task''s instance, locked by the caller, whose
report consumes the event at once (_weave_inbox_settle, guarded); NULL leaves the event to the orchestrator.
in_lines: whether work waits in line for the room of the task''s app or queue, as the caller has read it (TRUE wakes
the first of each line, _pulse_room_wake, as the last write); NULL reads it here; FALSE wakes no one (also for a
caller that writes more than its audit row after this call).
Rules: K-3..K-7, M-4.7, R-8.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_settled VARCHAR(16);
    DECLARE v_event BIGINT UNSIGNED;
    DECLARE v_lines BOOLEAN DEFAULT in_lines;
    INSERT INTO pulse_inbox (namespace_id, task_id, instance_id, kind, result, occurred_at, state, available_at)
    SELECT namespace_id, id, instance_id, in_kind, in_result, in_occurred_at, 'PENDING', in_now
      FROM pulse_tasks WHERE id = in_task_id;
    SET v_event = LAST_INSERT_ID();
    -- The task's slot goes back to its app and its queue through their release stripes of this task, which no
    -- creation locks (_pulse_slot_take reads them without a lock): the two rows in primary key order, app first.
    -- The task's app and queue are constant subqueries, so this is a one-table update of two primary-key rows: a
    -- join with the task would make MariaDB collect the stripes' changes in a temporary table first (about 20 us).
    UPDATE pulse_slot_releases r
       SET r.released = r.released + 1
     WHERE r.stripe = in_task_id MOD 16
       AND ((r.owner_kind = 'APP' AND r.owner_id = (SELECT app_id FROM pulse_tasks WHERE id = in_task_id))
            OR (r.owner_kind = 'QUEUE' AND r.owner_id = (SELECT queue_id FROM pulse_tasks WHERE id = in_task_id)));
    IF ROW_COUNT() <> 2 THEN
        CALL _weave_raise(50007, 'INVALID_STATE: the app or queue of the task has no release stripe for it');
    END IF;
    IF in_instance_id IS NOT NULL THEN
        CALL _weave_inbox_settle(in_namespace_id, in_instance_id, in_inst_status, in_task_id, v_event, in_now, TRUE,
                                 v_settled);
    END IF;
    -- The wake is the last write: the checkpoint it takes is another instance's, and nothing may be waited for
    -- after it (the successor's slot, taken above, may have queued for the app's row). A caller that writes more
    -- than an audit row after this passes FALSE (a task's cancel).
    IF v_lines IS NULL THEN
        SELECT EXISTS (SELECT 1 FROM weave_pending_advances w WHERE w.deferred_reason = 'QUOTA_FULL'
                          AND w.deferred_for = t.app_id)
               OR EXISTS (SELECT 1 FROM weave_pending_advances w WHERE w.deferred_reason = 'QUEUE_FULL'
                             AND w.deferred_for = t.queue_id)
          INTO v_lines FROM pulse_tasks t WHERE t.id = in_task_id;
    END IF;
    IF v_lines THEN
        CALL _pulse_room_wake((SELECT app_id FROM pulse_tasks WHERE id = in_task_id),
                              (SELECT queue_id FROM pulse_tasks WHERE id = in_task_id), in_now, FALSE);
    END IF;
END
