-- Every terminal outcome of a task is written once to the inbox, in the transaction that decided it,
-- stamped with the outcome's own time: the orchestrator consumes it later (K-7) and judges races by
-- that time, never by when it happened to scan (P-10). A task reaches its final status exactly here,
-- so here it leaves the in-flight counters of its app and queue (M-4.7). When the caller holds the
-- task's instance (a worker's report, Settle at Report), the event is consumed here too, before the
-- counters: they are touched last, so their rows are held only for the end of the transaction (a
-- successor activated by the consumption sees the slot still taken and defers, R-8).
CREATE PROCEDURE _pulse_inbox_add(
        IN in_task_id     BIGINT UNSIGNED,
        IN in_kind        VARCHAR(16),
        IN in_result      LONGTEXT,
        IN in_occurred_at DATETIME(6),
        IN in_now         DATETIME(6),
        IN in_namespace_id BIGINT UNSIGNED,
        IN in_instance_id  BIGINT UNSIGNED,
        IN in_inst_status  VARCHAR(16))
    COMMENT 'Internal. Description: writes the inbox event of a task outcome (SUCCEEDED, FAILED, UNKNOWN, CANCELLED or
EXPIRED), available for consumption at once, and takes the task off its app''s and queue''s in-flight counters.
in_instance_id (with in_namespace_id and in_inst_status): the task''s instance, locked by the caller, whose
report consumes the event at once (_weave_inbox_settle, guarded); NULL leaves the event to the orchestrator.
Rules: K-3..K-7, M-4.7.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_settled VARCHAR(16);
    INSERT INTO pulse_inbox (namespace_id, task_id, instance_id, kind, result, occurred_at, state, available_at)
    SELECT namespace_id, id, instance_id, in_kind, in_result, in_occurred_at, 'PENDING', in_now
      FROM pulse_tasks WHERE id = in_task_id;
    IF in_instance_id IS NOT NULL THEN
        CALL _weave_inbox_settle(in_namespace_id, in_instance_id, in_inst_status, in_task_id, LAST_INSERT_ID(), in_now,
                                 TRUE, v_settled);
    END IF;
    UPDATE pulse_tasks t
      STRAIGHT_JOIN weave_apps a ON a.id = t.app_id
      STRAIGHT_JOIN weave_queues q ON q.id = t.queue_id
       SET a.in_flight = a.in_flight - 1, q.in_flight = q.in_flight - 1
     WHERE t.id = in_task_id;
END
