-- K-6 in one place: a QUEUED task at or past its deadline will never start, so it ends EXPIRED and its
-- outcome goes to the inbox stamped with the deadline itself, not the time of the scan (P-10). Shared by
-- the orchestrator's expiry class and by the POLL deadline, which expires a round that never started
-- (P-11). The caller owns the transaction.
CREATE PROCEDURE _pulse_task_expire(
        IN  in_task_id  BIGINT UNSIGNED,
        IN  in_now      DATETIME(6),
        IN  in_wake     BOOLEAN,
        OUT out_outcome VARCHAR(16))
    COMMENT 'Internal. Description: expires one QUEUED task whose deadline has passed (K-6): status EXPIRED, inbox event
EXPIRED at the deadline (counted in @weave_made_due, see _weave_checkpoint_set), audit task.expire. out_outcome:
EXPIRED, NOT_DUE, or GONE (no such task or not QUEUED). in_wake: whether the slot given back wakes the work
waiting in line for it (_pulse_inbox_add), which a caller that writes on after this call must not do.
Rules: K-6, P-10, P-11.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_id BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_status VARCHAR(16);
    DECLARE v_deadline DATETIME(6);
    DECLARE v_ns BIGINT UNSIGNED;
    DECLARE v_inst BIGINT UNSIGNED;
    DECLARE v_used INT UNSIGNED;
    DECLARE v_max INT UNSIGNED;
    DECLARE v_error VARCHAR(2048);
    DECLARE v_facts LONGTEXT;
    DECLARE v_mutex VARCHAR(256);
    DECLARE v_held_since DATETIME(6);  -- since when a RUNNING attempt holds the task's mutex key, if one does

    -- With the task, its mutex key and since when a RUNNING attempt holds it, if one does: why it never started is
    -- the first thing the person in review asks (a key held all along, or no worker that took it).
    SELECT t.id, t.status, t.deadline_at, t.namespace_id, t.instance_id, t.attempts_used, t.max_attempts, t.error,
           t.mutex_key,
           (SELECT p.taken_at FROM pulse_permits p FORCE INDEX (uq_permit_mutex_held)
             WHERE p.namespace_id = t.namespace_id AND p.mutex_held = t.mutex_key LIMIT 1)
      INTO v_id, v_status, v_deadline, v_ns, v_inst, v_used, v_max, v_error, v_mutex, v_held_since
      FROM pulse_tasks t WHERE t.id = in_task_id FOR UPDATE;
    IF v_id IS NULL OR v_status <> 'QUEUED' THEN
        SET out_outcome = 'GONE';
    ELSEIF v_deadline > in_now THEN
        SET out_outcome = 'NOT_DUE';
    ELSE
        SET v_facts = JSON_OBJECT('task_id', CONCAT('tsk_', in_task_id),
                                  'deadline_at', DATE_FORMAT(v_deadline, '%Y-%m-%dT%H:%i:%s.%fZ'),
                                  'expired_at', DATE_FORMAT(in_now, '%Y-%m-%dT%H:%i:%s.%fZ'),
                                  'attempts_used', v_used + 0, 'max_attempts', v_max + 0, 'last_error', v_error,
                                  'mutex_key', v_mutex,
                                  'why', IF(v_held_since IS NULL,
                                            'no worker took it before its deadline (none served its queue, or every '
                                            'one was busy)',
                                            CONCAT('it waited for its mutex key, which another attempt has held since ',
                                                   DATE_FORMAT(v_held_since, '%Y-%m-%dT%H:%i:%s.%fZ'))));
        UPDATE pulse_tasks SET status = 'EXPIRED', finished_at = in_now, updated_at = in_now WHERE id = in_task_id;
        CALL _pulse_inbox_add(in_task_id, 'EXPIRED', v_facts, v_deadline, in_now, NULL, NULL, NULL,
                              IF(in_wake, NULL, FALSE));
        SET @weave_made_due = COALESCE(@weave_made_due, 0) + 1;  -- its event is due at once (see _weave_checkpoint_set)
        CALL _weave_audit(v_ns, v_inst, 0, 'weave.orchestrator', 'task.expire', NULL, NULL, in_now, v_deadline, NULL,
                          v_facts, NULL);
        SET out_outcome = 'EXPIRED';
    END IF;
END
