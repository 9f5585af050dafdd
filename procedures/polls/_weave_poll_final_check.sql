-- The one place where a POLL's final signal (05-signals, F-1..F-9) meets the POLL's own rules. Both POLL
-- decision points call it, with the instance locked and the step's rows up to date in the transaction:
--   - the POLL checkpoint handler, first, before it decides anything (a deadline outcome, a new round);
--     a signal accepted for the step makes that checkpoint due at once (R-5: one row per step, due at the
--     earliest of its reasons), so this is where an accepted final signal is looked at;
--   - the round outcome consumer, right after the round record got its outcome and result time, before
--     the step is settled, sent to review or scheduled for its next round.
-- Which of the two called is read from the rows, never passed: a latest round still IN_FLIGHT means a query
-- is out; a settled latest round while the poll is WAITING means no query is out; a settled latest round
-- while the poll is still IN_FLIGHT (or STOPPED at its deadline) means its outcome was stored just now.
--
-- The race is decided by stored times only (F-9): the round's result_at (Pulse's own time of the outcome)
-- against the signal's accepted_at; equal times go to the query (F-1). A signal looked at while the round's
-- outcome already sits in the inbox unconsumed is not judged here: the checkpoint waits for the inbox (with
-- its backoff), whose consumer then compares the two times. Once a winner is stored it is only followed.
--
-- out_outcome NULL means "no final signal decides now, go on with the query's own rules" (F-1 closes the wait
-- and still answers NULL: the query settles the step). A non-NULL out_outcome means this routine settled the
-- step, sent it to review, saved a winner and waits for the in-flight query, or deferred to the inbox, and the
-- caller must stop there.
CREATE PROCEDURE _weave_poll_final_check(
        IN  in_namespace_id  BIGINT UNSIGNED,
        IN  in_instance_id   BIGINT UNSIGNED,
        IN  in_step_key      VARCHAR(64),
        IN  in_activation_id BIGINT UNSIGNED,
        IN  in_now           DATETIME(6),
        OUT out_outcome      VARCHAR(16))
    COMMENT 'Internal. Description: applies the final-signal race of a POLL activation (its POLL_FINAL wait against the
latest round). out_outcome: NULL when nothing is decided here (the caller goes on; when the query''s final result,
or a failed, unknown or invalid round, came first the wait is CANCELLED and its PENDING signals REJECTED
QUERY_SETTLED), else ADOPTED (step SUCCEEDED with
the signal''s payload), REVIEW (POLL_REVIEW_VALUE for a review-status signal; POLL_UNKNOWN, POLL_INVALID_RESULT or
FINAL_RESULT_CONFLICT when the query''s own answer cannot agree), SIGNAL_FIRST (winner saved while the query is out:
a queued task is cancelled, a running one asked to stop; the step stays ACTIVE until Pulse reports), INBOX_FIRST
(the round''s outcome is stored and unconsumed: re-checked after the inbox) or PROOF_MISMATCH (S-12).
Errors: 50007 INVALID_STATE when the poll''s stored facts do not verify.
Rules: F-1..F-9, S-11, S-12, P-10, R-13.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_wait BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_wait_status VARCHAR(16);
    DECLARE v_winner BIGINT UNSIGNED;
    DECLARE v_deadline DATETIME(6);
    DECLARE v_started DATETIME(6);  -- when the wait opened: an early signal expired before it is not taken (S-14)
    DECLARE v_name VARCHAR(128);
    DECLARE v_version VARCHAR(32);
    DECLARE v_corr VARBINARY(512);
    DECLARE v_seq INT UNSIGNED;
    DECLARE v_frozen LONGTEXT;
    DECLARE v_state VARCHAR(16) DEFAULT NULL;
    DECLARE v_rounds_used INT UNSIGNED;
    DECLARE v_max_rounds INT UNSIGNED;
    DECLARE v_poll_deadline DATETIME(6);
    DECLARE v_round BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_task BIGINT UNSIGNED;
    DECLARE v_outcome VARCHAR(24);
    DECLARE v_result LONGTEXT;
    DECLARE v_result_at DATETIME(6);
    DECLARE v_first BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_first_at DATETIME(6);
    DECLARE v_t_status VARCHAR(16);
    DECLARE v_t_ends DATETIME(6);  -- when the round's task ends by its stored times alone: its deadline while queued,
    -- its attempt's lease while running (the end its expiry or its lease's recovery records, K-4, K-6)
    DECLARE v_deferred BOOLEAN;
    DECLARE v_proof VARCHAR(16);
    DECLARE v_winner_at DATETIME(6);  -- the winner's acceptance time and payload (from _weave_signal_pick)
    DECLARE v_winner_payload LONGTEXT;
    DECLARE v_cancel VARCHAR(16);
    DECLARE v_payload LONGTEXT;
    DECLARE v_accepted DATETIME(6);
    DECLARE v_s_status LONGTEXT;
    DECLARE v_q_status LONGTEXT;
    DECLARE v_same TINYINT DEFAULT 0;
    DECLARE v_success TINYINT DEFAULT 0;
    DECLARE v_review TINYINT DEFAULT 0;
    DECLARE v_code VARCHAR(32) DEFAULT NULL;
    DECLARE v_root VARCHAR(16);
    DECLARE v_facts LONGTEXT;

    SET out_outcome = NULL;
    SELECT id, status, winner_signal_id, deadline_at, started_at, signal_name, payload_version, correlation_key
      INTO v_wait, v_wait_status, v_winner, v_deadline, v_started, v_name, v_version, v_corr
      FROM weave_waits
     WHERE activation_id = in_activation_id AND kind = 'POLL_FINAL' AND instance_id = in_instance_id FOR UPDATE;

    hook: BEGIN
        -- No final signal declared, or its wait already closed (query settled it, cancel): the query's rules.
        IF v_wait IS NULL OR v_wait_status NOT IN ('WAITING', 'SATISFIED') THEN
            LEAVE hook;
        END IF;
        SELECT activation_seq INTO v_seq FROM weave_steps
         WHERE instance_id = in_instance_id AND step_key = in_step_key FOR UPDATE;
        SELECT frozen INTO v_frozen FROM weave_activations WHERE id = in_activation_id;
        SELECT state, rounds_used, max_rounds, poll_deadline
          INTO v_state, v_rounds_used, v_max_rounds, v_poll_deadline
          FROM weave_poll_states WHERE activation_id = in_activation_id AND instance_id = in_instance_id FOR UPDATE;
        SELECT id, task_id, outcome, result, result_at INTO v_round, v_task, v_outcome, v_result, v_result_at
          FROM weave_poll_rounds WHERE activation_id = in_activation_id AND round_no = v_rounds_used FOR UPDATE;
        IF v_state IS NULL OR v_round IS NULL OR v_frozen IS NULL
           OR (v_wait_status = 'SATISFIED' AND v_winner IS NULL) THEN
            CALL _weave_raise(50007, 'INVALID_STATE: the poll''s final-signal facts do not verify');
        END IF;
        SET v_facts = JSON_OBJECT('round', v_rounds_used + 0, 'task_id', CONCAT('tsk_', v_task),
                                  'round_outcome', v_outcome,
                                  'round_result', JSON_EXTRACT(COALESCE(v_result, 'null'), '$'),
                                  'result_at', DATE_FORMAT(v_result_at, '%Y-%m-%dT%H:%i:%s.%fZ'),
                                  'rounds_used', v_rounds_used + 0, 'max_rounds', v_max_rounds + 0,
                                  'poll_deadline', DATE_FORMAT(v_poll_deadline, '%Y-%m-%dT%H:%i:%s.%fZ'),
                                  'checked_at', DATE_FORMAT(in_now, '%Y-%m-%dT%H:%i:%s.%fZ'));

        IF v_wait_status = 'WAITING' THEN
            -- A review already stopped this activation (a deadline with the query out, a tampered signal): the
            -- wait consumes nothing more until recovery.
            IF v_state = 'STOPPED' THEN
                LEAVE hook;
            END IF;
            -- The first on-time match by acceptance order (S-11); its proof is checked only if it is to win. Read
            -- by the wait's own index prefix, so the lock never takes another instance's signals (see
            -- _weave_signal_pick).
            SELECT id, accepted_at INTO v_first, v_first_at FROM weave_signals FORCE INDEX (ix_signal_target)
             WHERE instance_id = in_instance_id AND target_step_key = in_step_key AND target_activation_seq = v_seq
               AND status = 'PENDING' AND TIMESTAMPDIFF(MICROSECOND, accepted_at, v_deadline) > 0
               AND TIMESTAMPDIFF(MICROSECOND, v_started, expires_at) > 0
               AND correlation_key = v_corr AND BINARY name = BINARY v_name
               AND BINARY payload_version = BINARY v_version
             ORDER BY accepted_at, id LIMIT 1 FOR UPDATE;

            IF v_outcome = 'IN_FLIGHT' THEN
                -- A query is out (the checkpoint or a fresh signal looks).
                IF v_first IS NULL THEN
                    LEAVE hook;
                END IF;
                SELECT t.status,
                       IF(t.status = 'QUEUED', t.deadline_at,
                          (SELECT a.lease_expires_at FROM pulse_attempts a FORCE INDEX (uq_attempt_no)
                            WHERE a.task_id = t.id AND a.attempt_no = t.attempts_used AND a.status = 'RUNNING'))
                  INTO v_t_status, v_t_ends FROM pulse_tasks t WHERE t.id = v_task FOR UPDATE;
                -- F-9: once the round's outcome is stored, whichever happened first is for its consumer to
                -- compare, by the two stored times.
                CALL _weave_poll_inbox_first(in_namespace_id, in_instance_id, in_step_key, in_activation_id, v_task,
                                             v_t_status NOT IN ('QUEUED', 'RUNNING'), in_now,
                                             'a final signal waits for the round outcome in the inbox', v_deferred);
                IF v_deferred THEN
                    SET out_outcome = 'INBOX_FIRST';
                    LEAVE hook;
                END IF;
                -- R-13, F-9: the round's task ended before the signal came, by the stored times alone (its deadline
                -- passed while it was queued, or its lease ran out), but nothing has recorded it yet (every runner
                -- was down): that end comes first, whichever candidate is looked at first. The look waits a second
                -- for the expiry or the lease's recovery, which stores the outcome at that time.
                IF v_t_ends <= v_first_at THEN
                    CALL _weave_checkpoint_defer(in_namespace_id, in_instance_id, in_step_key, 'POLL', in_activation_id,
                                                 in_now + INTERVAL 1 SECOND, in_now,
                                                 'OUTCOME_DUE: the round''s task ended before the final signal came',
                                                 NULL);
                    SET out_outcome = 'INBOX_FIRST';
                    LEAVE hook;
                END IF;
                SET v_facts = JSON_SET(v_facts, '$.decision', IF(v_t_status = 'QUEUED', 'SIGNAL_FIRST_QUEUED',
                                                                 'SIGNAL_FIRST_RUNNING'));
            ELSEIF v_state = 'WAITING' THEN
                -- F-2: between rounds no query is out; the first on-time signal settles the POLL.
                IF v_first IS NULL THEN
                    LEAVE hook;
                END IF;
                SET v_facts = JSON_SET(v_facts, '$.decision', 'SIGNAL_BETWEEN_ROUNDS');
            ELSEIF v_first IS NULL OR v_first_at >= v_result_at THEN
                -- The round's outcome was stored just now and happened first (equal times: the query's).
                IF v_outcome IN ('DONE', 'REVIEW_VALUE', 'FAILED', 'UNKNOWN', 'INVALID', 'CANCELLED')
                   AND v_result_at < v_poll_deadline THEN
                    -- F-1: the query's final result wins. A failure, an unknown effect or an invalid answer
                    -- that came first ends the activation too (P-8: review, and no continue): this wait can
                    -- never win any more, so it closes now and its signals are answered, rather than
                    -- taking signals that could only sit PENDING beside the review.
                    UPDATE weave_waits SET status = 'CANCELLED', settled_at = in_now WHERE id = v_wait;
                    CALL _weave_wait_signals_settle(in_namespace_id, in_instance_id, v_wait, 'QUERY_SETTLED', in_now);
                    SET v_facts = JSON_SET(v_facts,
                                           '$.decision', IF(v_outcome IN ('DONE', 'REVIEW_VALUE'), 'QUERY_FIRST',
                                                            'QUERY_STOPPED_FIRST'),
                                           '$.wait_status', 'CANCELLED',
                                           '$.first_signal_id', IF(v_first IS NULL, NULL, CONCAT('sig_', v_first)));
                    CALL _weave_event(in_namespace_id, in_instance_id, 'POLL_FINAL_WAIT_CLOSED', in_step_key, v_seq,
                                      in_now, v_facts, 'poll.final_close', v_deadline, NULL);
                    LEAVE hook;
                END IF;
                IF v_first IS NULL OR v_outcome <> 'POLL_PENDING' OR v_rounds_used >= v_max_rounds
                   OR v_result_at >= v_poll_deadline THEN
                    -- The round budget or the poll deadline ran out first: the query's own rules send the step
                    -- to review (P-9, P-11). That review can be continued, so the wait stays open with it.
                    LEAVE hook;
                END IF;
                -- F-2 by stored times: PENDING came first, so when the signal came no query was out.
                SET v_facts = JSON_SET(v_facts, '$.decision', 'SIGNAL_AFTER_PENDING');
            ELSE
                -- F-5 / F-6: the signal came first, while this round's query was out (nobody looked in time).
                SET v_facts = JSON_SET(v_facts, '$.decision', 'SIGNAL_FIRST_STORED');
            END IF;

            -- The first match is to win: its proof is checked now (S-12). With the query still out, the round
            -- keeps collecting as at a deadline (P-11): the step stays ACTIVE until Pulse reports.
            CALL _weave_signal_pick(in_namespace_id, in_instance_id, v_wait, in_now, NULL, v_winner, v_proof,
                                    v_winner_at, v_winner_payload);
            IF v_proof = 'MISMATCH' THEN
                CALL _weave_poll_review(in_namespace_id, in_instance_id, in_step_key, v_seq, in_activation_id,
                     'ACCEPTANCE_PROOF_MISMATCH', IF(v_outcome = 'IN_FLIGHT', 'ACTIVE', 'NEEDS_REVIEW'),
                     JSON_SET(v_facts, '$.signal_id', CONCAT('sig_', v_winner)), in_now);
                SET out_outcome = 'PROOF_MISMATCH';
                LEAVE hook;
            END IF;
            IF v_winner IS NULL OR v_winner <> v_first THEN
                CALL _weave_raise(50007, 'INVALID_STATE: the final signal changed under its lock');
            END IF;
            IF v_outcome = 'IN_FLIGHT' THEN
                -- F-3 (not started: cancelled at once, its CANCELLED outcome comes through the inbox) and F-4
                -- (running: only the intent; the task, the ACTIVE step and the permit stay until Pulse reports).
                CALL _pulse_task_cancel(v_task, in_now, v_cancel);
                CALL _weave_poll_final_win(in_namespace_id, in_instance_id, in_step_key, v_seq, v_wait, v_winner,
                     JSON_SET(v_facts, '$.task_status', v_t_status, '$.task_cancel', v_cancel), in_now);
                DELETE FROM weave_pending_advances WHERE instance_id = in_instance_id AND step_key = in_step_key;
                SET out_outcome = 'SIGNAL_FIRST';
                LEAVE hook;
            END IF;
            CALL _weave_poll_final_win(in_namespace_id, in_instance_id, in_step_key, v_seq, v_wait, v_winner, v_facts,
                                       in_now);
        ELSEIF v_outcome = 'IN_FLIGHT' THEN
            -- F-8: the winner is stored and the query is still out: nothing for the clock; Pulse's report of the
            -- round's end (CANCELLED, UNKNOWN after a lost lease, or an answer) comes through the inbox.
            DELETE FROM weave_pending_advances WHERE instance_id = in_instance_id AND step_key = in_step_key;
            SET out_outcome = 'SIGNAL_FIRST';
            LEAVE hook;
        END IF;

        -- A winner is stored and no query is out: the latest round's real outcome decides whether the signal is
        -- adopted (F-2, F-5) or both facts go to a person (F-6). A signal never overrides an unknown fact.
        SELECT accepted_at, CONVERT(payload USING utf8mb4) INTO v_accepted, v_payload
          FROM weave_signals WHERE id = v_winner AND instance_id = in_instance_id;
        SET v_s_status = JSON_VALUE(v_payload, '$.status');
        SET v_success = COALESCE(JSON_CONTAINS(JSON_EXTRACT(v_frozen, '$.result.success'), JSON_QUOTE(v_s_status)), 0);
        SET v_review = COALESCE(JSON_CONTAINS(JSON_EXTRACT(v_frozen, '$.result.review'), JSON_QUOTE(v_s_status)), 0);
        IF v_s_status IS NULL OR (v_success = 0 AND v_review = 0) THEN
            CALL _weave_raise(50007, 'INVALID_STATE: the stored final signal does not carry a final status');
        END IF;
        IF v_outcome IN ('POLL_PENDING', 'FAILED', 'CANCELLED') THEN
            SET v_code = NULL;
        ELSEIF v_outcome IN ('DONE', 'REVIEW_VALUE') THEN
            SET v_q_status = JSON_VALUE(v_result, '$.status');
            IF v_q_status <=> v_s_status THEN
                CALL _weave_json_equal(JSON_EXTRACT(v_result, '$.output'), JSON_EXTRACT(v_payload, '$.output'),
                                       v_same);
            END IF;
            SET v_code = IF(v_same = 1, NULL, 'FINAL_RESULT_CONFLICT');
        ELSEIF v_outcome = 'UNKNOWN' THEN
            SET v_code = 'POLL_UNKNOWN';
        ELSEIF v_outcome = 'INVALID' THEN
            SET v_code = 'POLL_INVALID_RESULT';
        ELSE
            CALL _weave_raise(50007, 'INVALID_STATE: the latest round has no outcome to judge the final signal by');
        END IF;
        SET v_facts = JSON_SET(v_facts, '$.signal_id', CONCAT('sig_', v_winner),
                               '$.signal_accepted_at', DATE_FORMAT(v_accepted, '%Y-%m-%dT%H:%i:%s.%fZ'),
                               '$.signal_payload', JSON_EXTRACT(v_payload, '$'));
        IF v_code IS NULL AND v_review = 1 THEN
            SET v_code = 'POLL_REVIEW_VALUE';
        END IF;
        IF v_code IS NOT NULL THEN
            CALL _weave_poll_review(in_namespace_id, in_instance_id, in_step_key, v_seq, in_activation_id, v_code,
                                    'NEEDS_REVIEW', v_facts, in_now);
            SET out_outcome = 'REVIEW';
            LEAVE hook;
        END IF;
        -- Adopted: the signal's result object is the step output (05-signals), successors follow (R-7).
        UPDATE weave_poll_states SET state = 'SETTLED', current_task_id = NULL, updated_at = in_now
         WHERE activation_id = in_activation_id;
        SET v_facts = JSON_SET(v_facts, '$.settled_by', 'FINAL_SIGNAL');
        CALL _weave_step_close(in_namespace_id, in_instance_id, in_step_key, v_seq, in_activation_id, NULL, v_payload,
                               'POLL_SUCCEEDED', 'poll.settle', v_deadline, v_facts, in_now, v_root);
        SET out_outcome = 'ADOPTED';
    END hook;
END
