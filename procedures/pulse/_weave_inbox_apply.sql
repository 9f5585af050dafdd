-- One task outcome applied to its instance (K-7) after verifying ownership (R-6) from locked rows. Three
-- answers when the facts do not line up, never a repair by guessing:
--   - the task's activation is an older generation of its step: the outcome is STALE (recovery moved
--     on); it is recorded on the inbox row and nothing else changes;
--   - the task claims an instance, step, activation or round that does not own it: OWNERSHIP_MISMATCH,
--     the instance goes to review and nothing of the outcome is applied;
--   - the step is no longer waiting for it (settled, cancelled): the outcome is kept in the history.
-- POLL round tasks are handed to the POLL handler once the activation is known to be current.
-- A task's outcomes are applied in the order they occurred, so the event applied is always the task's first
-- PENDING one, read here under its lock. The caller holds the instance lock (R-3) and owns the transaction.
CREATE PROCEDURE _weave_inbox_apply(
        IN  in_namespace_id BIGINT UNSIGNED,
        IN  in_instance_id  BIGINT UNSIGNED,
        IN  in_task_id      BIGINT UNSIGNED,
        IN  in_now          DATETIME(6),
        OUT out_inbox_id    BIGINT UNSIGNED,
        OUT out_outcome     VARCHAR(16))
    COMMENT 'Internal. Description: verifies and applies the first PENDING inbox event of a task of the locked instance
(out_inbox_id: that event). out_outcome: STALE, MISMATCH, SUCCEEDED, REVIEW, CANCELLED, RECORDED, or the POLL handler''s outcome.
Rules: K-7, R-4, R-6, R-7, R-9.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_task BIGINT UNSIGNED;
    DECLARE v_kind VARCHAR(16);
    DECLARE v_result LONGTEXT;
    DECLARE v_occurred DATETIME(6);
    DECLARE v_inbox_ns BIGINT UNSIGNED;
    DECLARE v_t_id BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_t_ns BIGINT UNSIGNED;
    DECLARE v_t_inst BIGINT UNSIGNED;
    DECLARE v_t_step VARCHAR(64);
    DECLARE v_t_activation BIGINT UNSIGNED;
    DECLARE v_t_round INT UNSIGNED;
    DECLARE v_t_handler VARCHAR(128);
    DECLARE v_t_version VARCHAR(32);
    DECLARE v_t_used INT UNSIGNED;
    DECLARE v_t_max INT UNSIGNED;
    DECLARE v_t_error VARCHAR(2048);
    DECLARE v_t_created DATETIME(6);
    DECLARE v_t_deadline DATETIME(6);
    DECLARE v_inst_status VARCHAR(16);
    DECLARE v_s_id BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_s_type VARCHAR(16);
    DECLARE v_s_status VARCHAR(16);
    DECLARE v_s_activation BIGINT UNSIGNED;
    DECLARE v_s_seq INT UNSIGNED;
    DECLARE v_a_id BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_a_inst BIGINT UNSIGNED;
    DECLARE v_a_step BIGINT UNSIGNED;
    DECLARE v_a_seq INT UNSIGNED;
    DECLARE v_a_ended DATETIME(6);
    DECLARE v_a_frozen LONGTEXT;
    DECLARE v_queue_name VARCHAR(64);
    DECLARE v_owner BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_problem VARCHAR(128) DEFAULT NULL;
    DECLARE v_facts LONGTEXT;
    DECLARE v_root VARCHAR(16);
    DECLARE v_code VARCHAR(32);
    DECLARE v_last_worker VARCHAR(128);
    DECLARE v_last_started DATETIME(6);
    DECLARE v_inbox BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_p_state VARCHAR(16);  -- a POLL task's poll state and round record (none for a TASK)
    DECLARE v_p_rounds_used INT UNSIGNED;
    DECLARE v_p_max_rounds INT UNSIGNED;
    DECLARE v_p_interval BIGINT UNSIGNED;
    DECLARE v_p_deadline DATETIME(6);
    DECLARE v_p_current_task BIGINT UNSIGNED;
    DECLARE v_r_id BIGINT UNSIGNED;
    DECLARE v_r_task BIGINT UNSIGNED;
    DECLARE v_r_outcome VARCHAR(24);

    -- The task's first pending outcome, by the task's own index (in outcome-time order, K-7): through the index of
    -- every PENDING event, which looks cheaper while few are pending, the lock would take other instances' events.
    -- The same read locks the task it names, with the step of this instance the task names and the activation it
    -- names (the event first, then the task, as before), and for a POLL round the poll state of the task's
    -- activation and the task's round record, all that _weave_poll_outcome decides from; the instance row, which
    -- the caller holds, gives its status. What they claim is verified below, in this order. The index gives the
    -- event order, so the join stops at the first event. The queue's name is a subquery, a plain read: a queue row
    -- is shared by every task of the queue and is never locked here.
    SELECT e.id, e.task_id, e.kind, e.result, e.occurred_at, e.namespace_id,
           t.id, t.namespace_id, t.instance_id, t.step_key, t.activation_id, t.round_no, t.handler, t.handler_version,
           t.attempts_used, t.max_attempts, t.error, t.created_at, t.deadline_at,
           (SELECT q.name FROM weave_queues q WHERE q.id = t.queue_id), i.status,
           s.id, s.type, s.status, s.activation_id, s.activation_seq,
           a.id, a.instance_id, a.step_id, a.seq, a.ended_at, a.frozen,
           p.state, p.rounds_used, p.max_rounds, p.interval_ms, p.poll_deadline, p.current_task_id,
           r.id, r.task_id, r.outcome
      INTO v_inbox, v_task, v_kind, v_result, v_occurred, v_inbox_ns,
           v_t_id, v_t_ns, v_t_inst, v_t_step, v_t_activation, v_t_round, v_t_handler, v_t_version,
           v_t_used, v_t_max, v_t_error, v_t_created, v_t_deadline,
           v_queue_name, v_inst_status,
           v_s_id, v_s_type, v_s_status, v_s_activation, v_s_seq,
           v_a_id, v_a_inst, v_a_step, v_a_seq, v_a_ended, v_a_frozen,
           v_p_state, v_p_rounds_used, v_p_max_rounds, v_p_interval, v_p_deadline, v_p_current_task,
           v_r_id, v_r_task, v_r_outcome
      FROM pulse_inbox e FORCE INDEX (ix_inbox_task)
      JOIN weave_instances i ON i.id = in_instance_id
      LEFT JOIN pulse_tasks t ON t.id = e.task_id
      LEFT JOIN weave_steps s ON s.instance_id = in_instance_id AND s.step_key = t.step_key
      LEFT JOIN weave_activations a ON a.id = t.activation_id
      LEFT JOIN weave_poll_states p ON p.activation_id = t.activation_id AND p.instance_id = in_instance_id
      LEFT JOIN weave_poll_rounds r ON r.activation_id = p.activation_id AND r.round_no = t.round_no
     WHERE e.task_id = in_task_id AND e.instance_id = in_instance_id AND e.state = 'PENDING'
     ORDER BY e.occurred_at, e.id LIMIT 1 FOR UPDATE;
    IF v_inbox IS NULL THEN
        CALL _weave_raise(50007, 'INVALID_STATE: the inbox event vanished under its lock');
    END IF;
    IF v_t_id IS NOT NULL AND v_queue_name IS NULL THEN  -- a task's queue stays: cut short (_weave_root_advance)
        CALL _weave_raise(50016, 'INTERRUPTED: the outcome''s read of its task''s queue came back empty; nothing is changed');
    END IF;
    SET out_inbox_id = v_inbox;

    verify: BEGIN
        IF v_t_id IS NULL THEN
            SET v_problem = 'the task does not exist';
            LEAVE verify;
        END IF;
        IF v_t_inst <> in_instance_id OR v_t_ns <> in_namespace_id OR v_inbox_ns <> in_namespace_id THEN
            SET v_problem = 'the task belongs to another instance or namespace';
            LEAVE verify;
        END IF;
        IF v_s_id IS NULL THEN
            SET v_problem = 'the instance has no such step';
            LEAVE verify;
        END IF;
        IF v_a_id IS NULL OR v_a_inst <> in_instance_id OR v_a_step <> v_s_id THEN
            SET v_problem = 'the activation does not belong to the step';
            LEAVE verify;
        END IF;
        IF NOT ((v_s_type = 'TASK' AND v_t_round = 0) OR (v_s_type = 'POLL' AND v_t_round > 0)) THEN
            SET v_problem = 'the round does not fit the step type';
            LEAVE verify;
        END IF;
        IF v_s_activation IS NULL OR v_s_activation <> v_a_id THEN
            IF v_a_seq < v_s_seq THEN
                LEAVE verify;  -- an older generation: stale, decided below
            END IF;
            SET v_problem = 'the activation is not a generation of the step';
            LEAVE verify;
        END IF;
        IF v_s_type = 'TASK' THEN
            -- The activation's own task is the one it created: the first of round 0, with its frozen contract.
            SELECT MIN(id) INTO v_owner FROM pulse_tasks WHERE activation_id = v_a_id AND round_no = 0;
            IF v_owner <> v_task OR v_t_handler <> JSON_VALUE(v_a_frozen, '$.handler')
               OR v_t_version <> JSON_VALUE(v_a_frozen, '$.handler_version')
               OR NOT (v_queue_name <=> JSON_VALUE(v_a_frozen, '$.queue')) THEN
                SET v_problem = 'the activation does not own this task';
                LEAVE verify;
            END IF;
        END IF;
    END verify;

    IF v_problem IS NOT NULL THEN
        SET v_facts = JSON_OBJECT('problem', v_problem, 'inbox_id', v_inbox + 0, 'task_id', CONCAT('tsk_', v_task),
                                  'kind', v_kind, 'claimed_instance', CONCAT('wf_', v_t_inst),
                                  'claimed_step_key', v_t_step, 'claimed_activation_id', v_t_activation + 0,
                                  'claimed_round', v_t_round + 0,
                                  'occurred_at', DATE_FORMAT(v_occurred, '%Y-%m-%dT%H:%i:%s.%fZ'));
        UPDATE pulse_inbox SET state = 'MISMATCH', consumed_at = in_now, version = version + 1 WHERE id = v_inbox;
        CALL _weave_review_open(in_namespace_id, in_instance_id, 'OWNERSHIP_MISMATCH', '', 0, v_facts, in_now);
        CALL _weave_audit(in_namespace_id, in_instance_id, 0, 'weave.orchestrator', 'task.ownership_mismatch', NULL,
                          NULL, in_now, NULL, NULL, v_facts, NULL);
        SET out_outcome = 'MISMATCH';
    ELSEIF v_s_activation IS NULL OR v_s_activation <> v_a_id THEN
        -- K-7 / R-5: an old generation can never change the current one.
        UPDATE pulse_inbox SET state = 'STALE', consumed_at = in_now, version = version + 1 WHERE id = v_inbox;
        SET out_outcome = 'STALE';
    ELSEIF v_s_type = 'POLL' THEN
        CALL _weave_poll_outcome(in_namespace_id, in_instance_id, v_task, v_inbox, v_kind, v_result, v_occurred, in_now,
                                 v_t_step, v_t_activation, v_t_round, v_t_handler, v_t_version, v_queue_name, v_t_used,
                                 v_t_max, v_t_error, v_t_created, v_t_deadline, v_inst_status, v_s_id, v_s_status,
                                 v_s_seq, v_a_frozen, v_p_state, v_p_rounds_used, v_p_max_rounds, v_p_interval,
                                 v_p_deadline, v_p_current_task, v_r_id, v_r_task, v_r_outcome, out_outcome);
        -- The POLL handler marks a round whose ownership does not verify as MISMATCH itself.
        UPDATE pulse_inbox SET state = 'CONSUMED', consumed_at = in_now, version = version + 1
         WHERE id = v_inbox AND state = 'PENDING';
    ELSE
        SELECT worker_id, started_at INTO v_last_worker, v_last_started
          FROM pulse_attempts WHERE task_id = v_task AND attempt_no = v_t_used;
        SET v_facts = JSON_OBJECT('task_id', CONCAT('tsk_', v_task), 'kind', v_kind,
                                  'attempts_used', v_t_used + 0, 'max_attempts', v_t_max + 0,
                                  'last_error', v_t_error, 'last_worker', v_last_worker,
                                  'last_started_at', DATE_FORMAT(v_last_started, '%Y-%m-%dT%H:%i:%s.%fZ'),
                                  'created_at', DATE_FORMAT(v_t_created, '%Y-%m-%dT%H:%i:%s.%fZ'),
                                  'deadline_at', DATE_FORMAT(v_t_deadline, '%Y-%m-%dT%H:%i:%s.%fZ'),
                                  'occurred_at', DATE_FORMAT(v_occurred, '%Y-%m-%dT%H:%i:%s.%fZ'),
                                  'consumed_at', DATE_FORMAT(in_now, '%Y-%m-%dT%H:%i:%s.%fZ'));
        UPDATE pulse_inbox SET state = 'CONSUMED', consumed_at = in_now, version = version + 1 WHERE id = v_inbox;
        IF v_kind = 'CANCELLED' THEN
            -- Recorded for the cancel flows (C-2); a cancelled task never settles a step by itself.
            CALL _weave_event(in_namespace_id, in_instance_id, 'TASK_CANCELLED', v_t_step, v_s_seq, in_now, v_facts,
                              'task.record', NULL, NULL);
            SET out_outcome = 'CANCELLED';
        ELSEIF v_s_status <> 'ACTIVE' OR v_a_ended IS NOT NULL OR v_inst_status IN ('CANCELLING', 'CANCELLED') THEN
            -- The step is no longer waiting for this task (cancelled, or settled by an operator): keep the fact.
            CALL _weave_event(in_namespace_id, in_instance_id, 'TASK_OUTCOME_RECORDED', v_t_step, v_s_seq, in_now,
                              JSON_SET(v_facts, '$.result', JSON_EXTRACT(COALESCE(v_result, 'null'), '$')), NULL, NULL,
                              NULL);
            CALL _weave_audit(in_namespace_id, in_instance_id, 0, 'weave.orchestrator', 'task.record', NULL, NULL,
                              in_now, NULL, NULL, v_facts, NULL);
            SET out_outcome = 'RECORDED';
        ELSEIF v_kind = 'SUCCEEDED' THEN
            -- The handler's return value, verbatim, is the step output (04-polls, TASK).
            CALL _weave_step_close(in_namespace_id, in_instance_id, v_t_step, v_s_seq, v_a_id, NULL, v_result,
                                   'TASK_SUCCEEDED', 'task.settle', NULL, v_facts, in_now, v_root);
            SET out_outcome = 'SUCCEEDED';
        ELSE
            SET v_code = CONCAT('TASK_', v_kind);
            IF v_code NOT IN ('TASK_FAILED', 'TASK_UNKNOWN', 'TASK_EXPIRED') THEN
                CALL _weave_raise(50007, 'INVALID_STATE: unknown task outcome kind');
            END IF;
            SET v_facts = JSON_SET(v_facts, '$.outcome', JSON_EXTRACT(COALESCE(v_result, 'null'), '$'));
            UPDATE weave_steps s STRAIGHT_JOIN weave_activations a ON a.id = v_a_id
               SET s.status = 'NEEDS_REVIEW', s.updated_at = in_now, a.ended_at = in_now
             WHERE s.id = v_s_id;
            CALL _weave_event(in_namespace_id, in_instance_id, v_code, v_t_step, v_s_seq, in_now, v_facts,
                              'task.review', NULL, NULL);
            CALL _weave_review_open(in_namespace_id, in_instance_id, v_code, v_t_step, v_s_seq, v_facts, in_now);
            SET out_outcome = 'REVIEW';
        END IF;
    END IF;
END
