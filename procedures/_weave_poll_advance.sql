-- The POLL checkpoint handler. One checkpoint row per step (R-5) stands for all of a POLL's clock work, so
-- the handler re-derives everything from the locked rows each time it runs, whatever woke it:
--   - the final-signal race first (F-1..F-9: its hook may settle the step, save a winner, or wait for the
--     inbox, and then this handler stops there);
--   - a round in flight: nothing to do before the poll deadline; at it, an outcome already stored in the
--     inbox decides by its own time (P-10), a round that never started is expired (K-6) and a running
--     one sends the instance to review while the round keeps its task (P-11);
--   - waiting between rounds: the deadline goes to review (P-9); otherwise, once next_poll_at has come,
--     the next round is created after verifying the rounds and the new-work conditions (P-4, R-8), in
--     this one transaction with its task, quota, round record, state, checkpoint, events and audit (P-5),
--     or deferred with nothing consumed and no deadline moved (P-6).
-- The caller (weave_checkpoint_advance) holds the locks of _weave_lock_instance and owns the transaction.
CREATE PROCEDURE _weave_poll_advance(
        IN  in_namespace_id  BIGINT UNSIGNED,
        IN  in_instance_id   BIGINT UNSIGNED,
        IN  in_step_key      VARCHAR(64),
        IN  in_activation_id BIGINT UNSIGNED,
        IN  in_now           DATETIME(6),
        OUT out_outcome      VARCHAR(16))
    COMMENT 'Internal. Description: advances a POLL checkpoint. out_outcome: ROUND (round n+1 created), DEFERRED (pause,
gate, identity, app, quota or capacity in the way: only the next check time moved), NOT_DUE (checkpoint re-set to
next_poll_at or the poll deadline), INBOX_FIRST (at the deadline the round''s outcome is stored and not yet
consumed: re-checked shortly), REVIEW (POLL_DEADLINE, POLL_DEADLINE_IN_FLIGHT or INSTANCE_DEADLINE), IDLE (nothing
left for the clock: checkpoint removed), STALE (the checkpoint''s activation is no longer current: removed), or the
final-signal hook''s outcome.
Errors: 50007 INVALID_STATE when the poll''s stored facts do not verify (left untouched for an operator).
Rules: P-4, P-5, P-6, P-9, P-10, P-11, R-5, R-6, R-8, K-6.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_step BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_step_status VARCHAR(16);
    DECLARE v_current BIGINT UNSIGNED;
    DECLARE v_seq INT UNSIGNED;
    DECLARE v_frozen LONGTEXT;
    DECLARE v_state VARCHAR(16) DEFAULT NULL;
    DECLARE v_rounds_used INT UNSIGNED;
    DECLARE v_max_rounds INT UNSIGNED;
    DECLARE v_poll_deadline DATETIME(6);
    DECLARE v_current_task BIGINT UNSIGNED;
    DECLARE v_next DATETIME(6);
    DECLARE v_hook VARCHAR(16);
    DECLARE v_t_id BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_t_status VARCHAR(16);
    DECLARE v_t_activation BIGINT UNSIGNED;
    DECLARE v_t_round INT UNSIGNED;
    DECLARE v_t_used INT UNSIGNED;
    DECLARE v_t_max INT UNSIGNED;
    DECLARE v_t_deadline DATETIME(6);
    DECLARE v_lease DATETIME(6);
    DECLARE v_worker VARCHAR(128);
    DECLARE v_expired VARCHAR(16);
    DECLARE v_inbox BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_inbox_available DATETIME(6);
    DECLARE v_rounds INT UNSIGNED;
    DECLARE v_top INT UNSIGNED;
    DECLARE v_last_outcome VARCHAR(24);
    DECLARE v_unsettled INT UNSIGNED;
    DECLARE v_first_handler VARCHAR(128);
    DECLARE v_first_version VARCHAR(32);
    DECLARE v_first_input LONGTEXT;
    DECLARE v_inst_status VARCHAR(16);
    DECLARE v_control VARCHAR(16);
    DECLARE v_gate VARCHAR(16);
    DECLARE v_inst_deadline DATETIME(6);
    DECLARE v_cred_status VARCHAR(16);
    DECLARE v_app_status VARCHAR(16);
    DECLARE v_why VARCHAR(256) DEFAULT NULL;
    DECLARE v_task_timeout BIGINT UNSIGNED;
    DECLARE v_task_deadline DATETIME(6);
    DECLARE v_task BIGINT UNSIGNED;
    DECLARE v_facts LONGTEXT;

    SET out_outcome = NULL;
    SELECT id, status, activation_id, activation_seq INTO v_step, v_step_status, v_current, v_seq
      FROM weave_steps WHERE instance_id = in_instance_id AND step_key = in_step_key FOR UPDATE;

    poll: BEGIN
        -- R-5: a checkpoint of an activation that is no longer current is stale, never acted on.
        IF v_step IS NULL OR v_current IS NULL OR v_current <> in_activation_id THEN
            DELETE FROM weave_pending_advances WHERE instance_id = in_instance_id AND step_key = in_step_key
               AND activation_id = in_activation_id;
            SET out_outcome = 'STALE';
            LEAVE poll;
        END IF;
        SELECT frozen INTO v_frozen FROM weave_activations WHERE id = in_activation_id FOR UPDATE;
        SELECT state, rounds_used, max_rounds, poll_deadline, current_task_id, next_poll_at
          INTO v_state, v_rounds_used, v_max_rounds, v_poll_deadline, v_current_task, v_next
          FROM weave_poll_states WHERE activation_id = in_activation_id AND instance_id = in_instance_id FOR UPDATE;
        IF v_state IS NULL OR v_frozen IS NULL THEN
            CALL _weave_raise(50007, 'INVALID_STATE: POLL activation without frozen inputs or poll state');
        END IF;
        IF v_step_status <> 'ACTIVE' OR v_state NOT IN ('IN_FLIGHT', 'WAITING') THEN
            -- Settled, stopped for review or cancelled: the clock has nothing left to do for this step.
            DELETE FROM weave_pending_advances WHERE instance_id = in_instance_id AND step_key = in_step_key;
            SET out_outcome = 'IDLE';
            LEAVE poll;
        END IF;

        CALL _weave_poll_final_check(in_namespace_id, in_instance_id, in_step_key, in_activation_id, in_now, v_hook);
        IF v_hook IS NOT NULL THEN
            SET out_outcome = v_hook;
            LEAVE poll;
        END IF;

        IF v_state = 'IN_FLIGHT' THEN
            IF in_now < v_poll_deadline THEN
                -- The round's outcome reaches the step through the inbox; the clock only guards the deadline.
                CALL _weave_checkpoint_set(in_namespace_id, in_instance_id, in_step_key, 'POLL', in_activation_id,
                                           v_poll_deadline, in_now);
                SET out_outcome = 'NOT_DUE';
                LEAVE poll;
            END IF;
            SELECT id, status, activation_id, round_no, attempts_used, max_attempts, deadline_at
              INTO v_t_id, v_t_status, v_t_activation, v_t_round, v_t_used, v_t_max, v_t_deadline
              FROM pulse_tasks WHERE id = v_current_task FOR UPDATE;
            IF v_t_id IS NULL OR v_t_activation <> in_activation_id OR v_t_round <> v_rounds_used THEN
                CALL _weave_raise(50007, 'INVALID_STATE: the poll''s task in flight does not belong to its last round');
            END IF;
            IF v_t_status = 'QUEUED' THEN
                -- P-11: it never started and now never will (its own deadline is at most the poll deadline):
                -- expired as Pulse does (K-6), and its outcome consumed at once, judged by its own time.
                CALL _pulse_task_expire(v_t_id, in_now, v_expired);
                IF v_expired <> 'EXPIRED' THEN
                    CALL _weave_raise(50007, 'INVALID_STATE: the queued round task could not be expired');
                END IF;
                SELECT id INTO v_inbox FROM pulse_inbox
                 WHERE task_id = v_t_id AND state = 'PENDING' ORDER BY occurred_at, id LIMIT 1 FOR UPDATE;
                CALL _weave_inbox_apply(in_namespace_id, in_instance_id, v_inbox, in_now, out_outcome);
                LEAVE poll;
            END IF;
            IF v_t_status = 'RUNNING' THEN
                -- P-11: the external request may be under way. Review now; the step stays ACTIVE and the
                -- round keeps its task; the permit stays with the attempt until Pulse records its end.
                SELECT lease_expires_at, worker_id INTO v_lease, v_worker
                  FROM pulse_attempts WHERE task_id = v_t_id AND attempt_no = v_t_used;
                SET v_facts = JSON_OBJECT('round', v_rounds_used + 0, 'task_id', CONCAT('tsk_', v_t_id),
                                          'task_status', v_t_status, 'attempts_used', v_t_used + 0,
                                          'max_attempts', v_t_max + 0, 'worker_id', v_worker,
                                          'lease_expires_at', DATE_FORMAT(v_lease, '%Y-%m-%dT%H:%i:%s.%fZ'),
                                          'rounds_used', v_rounds_used + 0, 'max_rounds', v_max_rounds + 0,
                                          'poll_deadline', DATE_FORMAT(v_poll_deadline, '%Y-%m-%dT%H:%i:%s.%fZ'),
                                          'checked_at', DATE_FORMAT(in_now, '%Y-%m-%dT%H:%i:%s.%fZ'));
                CALL _weave_poll_review(in_namespace_id, in_instance_id, in_step_key, v_seq, in_activation_id,
                                        'POLL_DEADLINE_IN_FLIGHT', 'ACTIVE', v_facts, in_now);
                SET out_outcome = 'REVIEW';
                LEAVE poll;
            END IF;
            -- P-10: the round's outcome is stored; the inbox decides by its own time (respecting its backoff).
            SELECT id, available_at INTO v_inbox, v_inbox_available FROM pulse_inbox
             WHERE task_id = v_t_id AND state = 'PENDING' ORDER BY occurred_at, id LIMIT 1 FOR UPDATE;
            IF v_inbox IS NULL THEN
                CALL _weave_raise(50007, 'INVALID_STATE: the round task ended but its outcome is not in the inbox');
            END IF;
            CALL _weave_checkpoint_defer(in_namespace_id, in_instance_id, in_step_key, 'POLL', in_activation_id,
                                         GREATEST(in_now + INTERVAL 1 SECOND, v_inbox_available), in_now,
                                         'DEFERRED: the round outcome is in the inbox');
            SET out_outcome = 'INBOX_FIRST';
            LEAVE poll;
        END IF;

        -- WAITING between rounds.
        IF in_now >= v_poll_deadline THEN
            SET v_facts = JSON_OBJECT('round', v_rounds_used + 0, 'rounds_used', v_rounds_used + 0,
                                      'max_rounds', v_max_rounds + 0,
                                      'next_poll_at', DATE_FORMAT(v_next, '%Y-%m-%dT%H:%i:%s.%fZ'),
                                      'poll_deadline', DATE_FORMAT(v_poll_deadline, '%Y-%m-%dT%H:%i:%s.%fZ'),
                                      'checked_at', DATE_FORMAT(in_now, '%Y-%m-%dT%H:%i:%s.%fZ'));
            CALL _weave_poll_review(in_namespace_id, in_instance_id, in_step_key, v_seq, in_activation_id,
                                    'POLL_DEADLINE', 'NEEDS_REVIEW', v_facts, in_now);
            SET out_outcome = 'REVIEW';
            LEAVE poll;
        END IF;
        IF v_next IS NULL OR in_now < v_next THEN
            CALL _weave_checkpoint_set(in_namespace_id, in_instance_id, in_step_key, 'POLL', in_activation_id,
                                       COALESCE(v_next, v_poll_deadline), in_now);
            SET out_outcome = 'NOT_DUE';
            LEAVE poll;
        END IF;

        -- P-4: the rounds are 1..n without a gap, n = rounds used, round n answered PENDING, nothing of the
        -- activation is in flight, the budget has room, and round 1 carries the frozen contract reused below.
        SELECT COUNT(*), MAX(round_no) INTO v_rounds, v_top
          FROM weave_poll_rounds WHERE activation_id = in_activation_id FOR UPDATE;
        SELECT outcome INTO v_last_outcome
          FROM weave_poll_rounds WHERE activation_id = in_activation_id AND round_no = v_rounds_used;
        SELECT COUNT(*) INTO v_unsettled FROM pulse_tasks
         WHERE activation_id = in_activation_id AND status IN ('QUEUED', 'RUNNING');
        SELECT t.handler, t.handler_version, t.input INTO v_first_handler, v_first_version, v_first_input
          FROM weave_poll_rounds r JOIN pulse_tasks t ON t.id = r.task_id
         WHERE r.activation_id = in_activation_id AND r.round_no = 1;
        IF v_rounds <> v_rounds_used OR v_top <> v_rounds_used OR NOT (v_last_outcome <=> 'POLL_PENDING')
           OR v_current_task IS NOT NULL OR v_unsettled <> 0 OR v_rounds_used >= v_max_rounds
           OR NOT (v_first_handler <=> JSON_VALUE(v_frozen, '$.handler'))
           OR NOT (v_first_version <=> JSON_VALUE(v_frozen, '$.handler_version'))
           OR NOT (v_first_input <=> COALESCE(JSON_EXTRACT(v_frozen, '$.input'), '{}')) THEN
            CALL _weave_raise(50007, 'INVALID_STATE: the poll''s rounds do not verify (P-4); left for an operator');
        END IF;

        -- R-8 for the new round.
        SELECT i.status, i.control, i.gate, i.deadline_at, c.status, a.status
          INTO v_inst_status, v_control, v_gate, v_inst_deadline, v_cred_status, v_app_status
          FROM weave_instances i
          JOIN weave_credentials c ON c.id = i.credential_id
          JOIN weave_apps a ON a.id = i.app_id
         WHERE i.id = in_instance_id;
        IF v_inst_status = 'RUNNING' AND in_now >= v_inst_deadline THEN
            CALL _weave_review_open(in_namespace_id, in_instance_id, 'INSTANCE_DEADLINE', '', 0,
                 JSON_OBJECT('deadline_at', DATE_FORMAT(v_inst_deadline, '%Y-%m-%dT%H:%i:%s.%fZ'),
                             'checked_at', DATE_FORMAT(in_now, '%Y-%m-%dT%H:%i:%s.%fZ'),
                             'step_key', in_step_key, 'next_round', v_rounds_used + 1), in_now);
            CALL _weave_audit(in_namespace_id, in_instance_id, 0, 'weave.orchestrator', 'poll.review', NULL, NULL,
                              in_now, v_inst_deadline, NULL,
                              JSON_OBJECT('code', 'INSTANCE_DEADLINE', 'step_key', in_step_key), NULL);
            SET v_why = 'instance deadline passed';
            SET out_outcome = 'REVIEW';
        ELSEIF v_control = 'PAUSED' THEN
            SET v_why = 'instance paused';
        ELSEIF v_inst_status <> 'RUNNING' OR v_gate <> 'OPEN' THEN
            SET v_why = 'gate closed';
        ELSEIF v_cred_status <> 'ACTIVE' THEN
            SET v_why = 'starting identity disabled';
        ELSEIF v_app_status <> 'ACTIVE' THEN
            SET v_why = 'app disabled';
        ELSE
            CALL _weave_task_room(in_namespace_id, in_instance_id, JSON_VALUE(v_frozen, '$.queue'), v_why);
        END IF;
        IF v_why IS NOT NULL THEN
            -- P-6: only the next check time moves, never past the poll deadline (which must still be seen
            -- on time). Resume makes an overdue checkpoint due at once (C-1), so a pause can wait longer.
            CALL _weave_checkpoint_defer(in_namespace_id, in_instance_id, in_step_key, 'POLL', in_activation_id,
                 LEAST(in_now + INTERVAL IF(v_control = 'PAUSED', 60, 1) SECOND, v_poll_deadline), in_now,
                 CONCAT('DEFERRED: ', v_why));
            SET out_outcome = COALESCE(out_outcome, 'DEFERRED');
            LEAVE poll;
        END IF;

        -- P-4, P-5: round n+1 from the activation's frozen inputs, never re-evaluated.
        SET v_task_timeout = COALESCE(CAST(JSON_VALUE(v_frozen, '$.task_timeout_ms') AS UNSIGNED), 30000);
        SET v_task_deadline = LEAST(in_now + INTERVAL v_task_timeout * 1000 MICROSECOND, v_poll_deadline,
                                    v_inst_deadline);
        CALL _pulse_task_create(in_namespace_id, in_instance_id, in_step_key, in_activation_id, v_rounds_used + 1,
                                v_frozen, v_task_deadline, in_now, v_task);
        INSERT INTO weave_poll_rounds (namespace_id, instance_id, activation_id, round_no, task_id, outcome,
                                       created_at)
        VALUES (in_namespace_id, in_instance_id, in_activation_id, v_rounds_used + 1, v_task, 'IN_FLIGHT', in_now);
        UPDATE weave_poll_states
           SET rounds_used = rounds_used + 1, current_task_id = v_task, state = 'IN_FLIGHT', next_poll_at = NULL,
               updated_at = in_now
         WHERE activation_id = in_activation_id AND rounds_used = v_rounds_used AND state = 'WAITING';
        IF ROW_COUNT() <> 1 THEN
            CALL _weave_raise(50007, 'INVALID_STATE: the poll state changed under its lock');
        END IF;
        CALL _weave_checkpoint_set(in_namespace_id, in_instance_id, in_step_key, 'POLL', in_activation_id,
                                   v_poll_deadline, in_now);
        SET v_facts = JSON_OBJECT('round', v_rounds_used + 1, 'task_id', CONCAT('tsk_', v_task),
                                  'due_at', DATE_FORMAT(v_next, '%Y-%m-%dT%H:%i:%s.%fZ'),
                                  'lateness_ms', TIMESTAMPDIFF(MICROSECOND, v_next, in_now) / 1000,
                                  'task_deadline_at', DATE_FORMAT(v_task_deadline, '%Y-%m-%dT%H:%i:%s.%fZ'),
                                  'rounds_used', v_rounds_used + 1, 'max_rounds', v_max_rounds + 0,
                                  'poll_deadline', DATE_FORMAT(v_poll_deadline, '%Y-%m-%dT%H:%i:%s.%fZ'));
        CALL _weave_event(in_namespace_id, in_instance_id, 'POLL_ROUND_STARTED', in_step_key, v_seq, in_now, v_facts);
        CALL _weave_audit(in_namespace_id, in_instance_id, 0, 'weave.orchestrator', 'poll.round', NULL, NULL, in_now,
                          v_poll_deadline, NULL, v_facts, NULL);
        SET out_outcome = 'ROUND';
    END poll;
END
