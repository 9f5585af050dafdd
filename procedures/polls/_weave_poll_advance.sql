-- The POLL checkpoint handler. One checkpoint row per step (R-5) stands for all of a POLL's clock work, so
-- the handler re-derives everything from the locked rows each time it runs, whatever woke it:
--   - the final-signal race first (F-1..F-9: its hook may settle the step, save a winner, or wait for the
--     inbox, and then this handler stops there);
--   - a round in flight: nothing to do before the poll deadline; at it, an outcome already stored in the
--     inbox decides by its own time (P-10), as one does whose attempt lost its lease before the deadline (once
--     the lease recovery has stored it: K-4), a round that never started is expired (K-6) and a running one
--     sends the instance to review while the round keeps its task (P-11);
--   - waiting between rounds: the deadline goes to review (P-9); otherwise, once next_poll_at has come,
--     _weave_poll_round_start creates the next round after verifying the rounds and the new-work
--     conditions (P-4, R-8), in this one transaction with its task, quota, round record, state,
--     checkpoint, events and audit (P-5), or defers it with nothing consumed and no deadline moved (P-6).
-- The caller (weave_checkpoint_advance) holds the locks of _weave_instance_lock and owns the transaction.
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
consumed, or its attempt lost its lease before the deadline and the outcome is still to be recorded: re-checked
shortly), REVIEW (POLL_DEADLINE, POLL_DEADLINE_IN_FLIGHT or INSTANCE_DEADLINE), IDLE (nothing
left for the clock: checkpoint removed), STALE (the checkpoint''s activation is no longer current: removed), or the
final-signal hook''s outcome.
Errors: 50007 INVALID_STATE when the poll''s stored facts do not verify (left untouched for an operator).
Rules: P-4, P-5, P-6, P-9, P-10, P-11, R-5, R-6, R-8, K-4, K-6.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_step BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_step_status VARCHAR(16);
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
    DECLARE v_deferred BOOLEAN;
    DECLARE v_facts LONGTEXT;
    -- The opening's wait outputs, unused: a POLL names no wait kind (its state is its own row, read below).
    DECLARE v_no_wait BIGINT UNSIGNED;
    DECLARE v_no_status VARCHAR(16);
    DECLARE v_no_time DATETIME(6);
    DECLARE v_no_frozen LONGTEXT;
    DECLARE v_deferral LONGTEXT;  -- what its next round had been waiting for, when it met the poll deadline

    SET out_outcome = NULL;
    -- The checkpoint stays for the paths below that defer it (a deferral keeps its due time and attempts).
    CALL _weave_step_open(in_instance_id, in_step_key, in_activation_id, NULL, v_step, v_step_status, v_seq,
                          v_no_wait, v_no_status, v_no_time, v_no_time, v_no_time, v_no_time, v_no_frozen);

    poll: BEGIN
        IF v_step IS NULL THEN
            SET out_outcome = 'STALE';
            LEAVE poll;
        END IF;
        -- The activation and its poll state, both locked by one read (activation first).
        SELECT a.frozen, p.state, p.rounds_used, p.max_rounds, p.poll_deadline, p.current_task_id, p.next_poll_at
          INTO v_frozen, v_state, v_rounds_used, v_max_rounds, v_poll_deadline, v_current_task, v_next
          FROM weave_activations a
          STRAIGHT_JOIN weave_poll_states p ON p.activation_id = a.id AND p.instance_id = in_instance_id
         WHERE a.id = in_activation_id FOR UPDATE;
        IF v_state IS NULL OR v_frozen IS NULL THEN
            CALL _weave_raise(50007, 'INVALID_STATE: POLL activation without frozen inputs or poll state');
        END IF;
        IF v_step_status <> 'ACTIVE' OR v_state NOT IN ('IN_FLIGHT', 'WAITING') THEN
            -- Settled, stopped for review or cancelled: the clock has nothing left to do for this step.
            DELETE FROM weave_pending_advances WHERE instance_id = in_instance_id AND step_key = in_step_key;
            SET out_outcome = 'IDLE';
            LEAVE poll;
        END IF;

        -- Only a step that declares a final signal has a POLL_FINAL wait (_weave_poll_activate) to look at.
        IF JSON_TYPE(JSON_EXTRACT(v_frozen, '$.final_signal')) = 'OBJECT' THEN
            CALL _weave_poll_final_check(in_namespace_id, in_instance_id, in_step_key, in_activation_id, in_now,
                                         v_hook);
        END IF;
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
                -- expired as Pulse does (K-6), and its outcome consumed at once, judged by its own time. The slot it
                -- gives back wakes no one (this decision writes on); the first in line finds it at its next look.
                CALL _pulse_task_expire(v_t_id, in_now, FALSE, v_expired);
                IF v_expired <> 'EXPIRED' THEN
                    CALL _weave_raise(50007, 'INVALID_STATE: the queued round task could not be expired');
                END IF;
                CALL _weave_inbox_apply(in_namespace_id, in_instance_id, v_t_id, in_now, v_inbox, out_outcome);
                LEAVE poll;
            END IF;
            IF v_t_status = 'RUNNING' THEN
                SELECT lease_expires_at, worker_id INTO v_lease, v_worker
                  FROM pulse_attempts WHERE task_id = v_t_id AND attempt_no = v_t_used;
                IF v_lease < v_poll_deadline THEN
                    -- By the stored times the attempt was lost at its lease's end, before the poll deadline (K-4):
                    -- its outcome (UNKNOWN, dated then) is the lease recovery's to record, due already, and then the
                    -- inbox's to decide by that time (P-10), whichever of the two candidates a scan served first.
                    CALL _weave_checkpoint_defer(
                        in_namespace_id, in_instance_id, in_step_key, 'POLL', in_activation_id,
                        in_now + INTERVAL 1 SECOND, in_now,
                        'LEASE_LOST: the round''s attempt lost its lease before the poll deadline', NULL);
                    SET out_outcome = 'INBOX_FIRST';
                    LEAVE poll;
                END IF;
                -- P-11: the external request may be under way. Review now; the step stays ACTIVE and the
                -- round keeps its task; the permit stays with the attempt until Pulse records its end.
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
            CALL _weave_poll_inbox_first(in_namespace_id, in_instance_id, in_step_key, in_activation_id, v_t_id, TRUE,
                                         in_now, 'the round outcome is in the inbox', v_deferred);
            SET out_outcome = 'INBOX_FIRST';
            LEAVE poll;
        END IF;

        -- WAITING between rounds.
        IF in_now >= v_poll_deadline THEN
            -- A next round that waited for room until the deadline: the review says so (the rounds never ran).
            SELECT JSON_OBJECT('reason', deferred_reason,
                               'since', DATE_FORMAT(deferred_since, '%Y-%m-%dT%H:%i:%s.%fZ'), 'detail', last_error)
              INTO v_deferral
              FROM weave_pending_advances
             WHERE instance_id = in_instance_id AND step_key = in_step_key AND deferred_reason IS NOT NULL;
            SET v_facts = JSON_OBJECT('round', v_rounds_used + 0, 'rounds_used', v_rounds_used + 0,
                                      'max_rounds', v_max_rounds + 0,
                                      'next_poll_at', DATE_FORMAT(v_next, '%Y-%m-%dT%H:%i:%s.%fZ'),
                                      'poll_deadline', DATE_FORMAT(v_poll_deadline, '%Y-%m-%dT%H:%i:%s.%fZ'),
                                      'checked_at', DATE_FORMAT(in_now, '%Y-%m-%dT%H:%i:%s.%fZ'),
                                      'deferred', JSON_EXTRACT(v_deferral, '$'));
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

        CALL _weave_poll_round_start(in_namespace_id, in_instance_id, in_step_key, v_seq, in_activation_id, v_frozen,
                                     v_state, v_rounds_used, v_max_rounds, v_poll_deadline, v_current_task, v_next,
                                     in_now, out_outcome);
    END poll;
END
