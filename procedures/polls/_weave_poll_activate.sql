-- P-1: a POLL activation creates its first business round in the activation's own transaction: the
-- round-1 task (under the quota and capacity locks the caller holds and already checked), the round
-- record, the poll state with its budgets and the POLL checkpoint at the poll deadline. Every deadline is
-- measured from the activation and capped by the instance deadline in force now, and is never re-timed.
-- A step with a final signal also gets its POLL_FINAL wait here, pinned to this activation. Early final
-- signals (S-10) are looked at once the activation commits: mismatches are rejected now (S-11), and any
-- other makes the POLL checkpoint due at once instead of at the poll deadline, so that the race of F-3 is
-- decided by the hook as soon as it can be.
CREATE PROCEDURE _weave_poll_activate(
        IN in_namespace_id  BIGINT UNSIGNED,
        IN in_instance_id   BIGINT UNSIGNED,
        IN in_activation_id BIGINT UNSIGNED,
        IN in_step_key      VARCHAR(64),
        IN in_seq           INT UNSIGNED,
        IN in_frozen        LONGTEXT,
        IN in_now           DATETIME(6),
        IN in_deadline      DATETIME(6),
        OUT out_facts LONGTEXT, OUT out_action VARCHAR(48), OUT out_audit_deadline DATETIME(6))
    COMMENT 'Internal. Description: creates a POLL activation''s work: poll_deadline = min(now + timeout_ms, instance
deadline); round 1 (task with deadline min(now + task_timeout_ms, poll deadline), round record IN_FLIGHT, rounds
used 1, poll state IN_FLIGHT); the POLL checkpoint at the poll deadline; the POLL_FINAL wait when the step declares
a final signal (early signals that do not match are REJECTED CORRELATION_MISMATCH; a matching one makes the
checkpoint due at once). out_facts, out_action, out_audit_deadline: the STEP_ACTIVATED event''s data and its audit
row, poll.round with the poll deadline, which the caller writes.
Rules: P-1, P-4, P-5, K-6, R-4, S-10, S-11.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_timeout BIGINT UNSIGNED DEFAULT CAST(JSON_VALUE(in_frozen, '$.timeout_ms') AS UNSIGNED);
    DECLARE v_task_timeout BIGINT UNSIGNED DEFAULT COALESCE(CAST(JSON_VALUE(in_frozen, '$.task_timeout_ms') AS UNSIGNED),
                                                             30000);
    DECLARE v_interval BIGINT UNSIGNED DEFAULT CAST(JSON_VALUE(in_frozen, '$.interval_ms') AS UNSIGNED);
    DECLARE v_max_rounds INT UNSIGNED DEFAULT CAST(JSON_VALUE(in_frozen, '$.max_rounds') AS UNSIGNED);
    DECLARE v_final LONGTEXT DEFAULT JSON_EXTRACT(in_frozen, '$.final_signal');
    DECLARE v_correlation VARBINARY(512);
    DECLARE v_poll_deadline DATETIME(6);
    DECLARE v_task_deadline DATETIME(6);
    DECLARE v_task BIGINT UNSIGNED;
    DECLARE v_wait BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_early INT DEFAULT 0;

    IF v_timeout IS NULL OR v_interval IS NULL OR v_max_rounds IS NULL OR v_max_rounds < 1 THEN
        CALL _weave_raise(50007, 'INVALID_STATE: frozen POLL inputs lack timeout_ms, interval_ms or max_rounds');
    END IF;
    SET v_poll_deadline = LEAST(in_now + INTERVAL v_timeout * 1000 MICROSECOND, in_deadline);
    SET v_task_deadline = LEAST(in_now + INTERVAL v_task_timeout * 1000 MICROSECOND, v_poll_deadline, in_deadline);
    CALL _pulse_task_create(in_namespace_id, in_instance_id, in_step_key, in_activation_id, 1, in_frozen,
                            v_task_deadline, in_now, v_task);
    INSERT INTO weave_poll_states (activation_id, namespace_id, instance_id, step_key, state, rounds_used, max_rounds,
                                   interval_ms, poll_deadline, current_task_id, next_poll_at, last_outcome,
                                   stop_reason, updated_at)
    VALUES (in_activation_id, in_namespace_id, in_instance_id, in_step_key, 'IN_FLIGHT', 1, v_max_rounds, v_interval,
            v_poll_deadline, v_task, NULL, NULL, NULL, in_now);
    INSERT INTO weave_poll_rounds (namespace_id, instance_id, activation_id, round_no, task_id, outcome, created_at)
    VALUES (in_namespace_id, in_instance_id, in_activation_id, 1, v_task, 'IN_FLIGHT', in_now);
    IF v_final IS NOT NULL AND JSON_TYPE(v_final) = 'OBJECT' THEN
        SELECT correlation_key INTO v_correlation FROM weave_activations WHERE id = in_activation_id;
        INSERT INTO weave_waits (namespace_id, instance_id, activation_id, step_key, activation_seq, kind, status,
                                 started_at, deadline_at, signal_name, payload_version, payload_type, correlation_key)
        VALUES (in_namespace_id, in_instance_id, in_activation_id, in_step_key, in_seq, 'POLL_FINAL', 'WAITING', in_now,
                v_poll_deadline, JSON_VALUE(v_final, '$.name'), JSON_VALUE(v_final, '$.payload_version'), 'object',
                v_correlation);
        SET v_wait = LAST_INSERT_ID();
        CALL _weave_wait_signals_settle(in_namespace_id, in_instance_id, v_wait, NULL, in_now);
        SELECT COUNT(*) INTO v_early FROM weave_signals
         WHERE instance_id = in_instance_id AND target_step_key = in_step_key AND target_activation_seq = in_seq
           AND status = 'PENDING';
    END IF;
    CALL _weave_checkpoint_set(in_namespace_id, in_instance_id, in_step_key, 'POLL', in_activation_id,
                               IF(v_early > 0, in_now, v_poll_deadline), in_now);
    SET out_facts = JSON_OBJECT('type', 'POLL', 'round', 1, 'task_id', CONCAT('tsk_', v_task),
                              'queue', JSON_VALUE(in_frozen, '$.queue'),
                              'handler', JSON_VALUE(in_frozen, '$.handler'),
                              'handler_version', JSON_VALUE(in_frozen, '$.handler_version'),
                              'max_rounds', v_max_rounds + 0, 'interval_ms', v_interval + 0,
                              'task_deadline_at', DATE_FORMAT(v_task_deadline, '%Y-%m-%dT%H:%i:%s.%fZ'),
                              'poll_deadline', DATE_FORMAT(v_poll_deadline, '%Y-%m-%dT%H:%i:%s.%fZ'),
                              'final_signal', JSON_EXTRACT(COALESCE(v_final, 'null'), '$'));
    SET out_action = 'poll.round', out_audit_deadline = v_poll_deadline;
END
