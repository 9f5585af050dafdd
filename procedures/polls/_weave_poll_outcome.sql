-- Inlined: installed as a block in each routine that calls it, not called (procedures/inlining.py).
-- A POLL round's task outcome, settled in the inbox consumer's transaction (K-7) once the consumer has
-- verified that the task's activation is the step's current one. The consumer's one locking read has read
-- (and locked) the task, its instance, step and activation, the poll state and the task's round record, and
-- hands their values in. Here the round itself is verified from them (R-6): the round record of the task's
-- round number must name this task, the task must carry the activation's frozen contract, and a round still
-- IN_FLIGHT must be the poll's current task; anything else is corrupt ownership and is never applied.
--
-- The round record always gets the outcome, the result and the outcome's own time (P-2: the result
-- time is when Pulse recorded it, not when it was consumed). What follows is judged by that time
-- against the poll deadline: an outcome from before the deadline counts even when consumed after it
-- (P-10); one from at or after the deadline means the round was still in flight, or never started,
-- when the deadline came (P-11). A failed, unknown, invalid or review round never leads to a new round
-- (P-3): the step goes to review with the facts.
CREATE PROCEDURE _weave_poll_outcome(
        IN  in_namespace_id    BIGINT UNSIGNED,
        IN  in_instance_id     BIGINT UNSIGNED,
        IN  in_task_id         BIGINT UNSIGNED,
        IN  in_inbox_id        BIGINT UNSIGNED,
        IN  in_kind            VARCHAR(16),
        IN  in_result          LONGTEXT,
        IN  in_occurred_at     DATETIME(6),
        IN  in_now             DATETIME(6),
        IN  in_step_key        VARCHAR(64),
        IN  in_activation_id   BIGINT UNSIGNED,
        IN  in_round_no        INT UNSIGNED,
        IN  in_handler         VARCHAR(128),
        IN  in_handler_version VARCHAR(32),
        IN  in_queue_name      VARCHAR(64),
        IN  in_attempts_used   INT UNSIGNED,
        IN  in_max_attempts    INT UNSIGNED,
        IN  in_error           VARCHAR(2048),
        IN  in_task_created    DATETIME(6),
        IN  in_task_deadline   DATETIME(6),
        IN  in_inst_status     VARCHAR(16),
        IN  in_step_id         BIGINT UNSIGNED,
        IN  in_step_status     VARCHAR(16),
        IN  in_seq             INT UNSIGNED,
        IN  in_frozen          LONGTEXT,
        IN  in_state           VARCHAR(16),
        IN  in_rounds_used     INT UNSIGNED,
        IN  in_max_rounds      INT UNSIGNED,
        IN  in_interval_ms     BIGINT UNSIGNED,
        IN  in_poll_deadline   DATETIME(6),
        IN  in_current_task_id BIGINT UNSIGNED,
        IN  in_round_id        BIGINT UNSIGNED,
        IN  in_round_task_id   BIGINT UNSIGNED,
        IN  in_round_outcome   VARCHAR(24),
        OUT out_outcome        VARCHAR(16))
    COMMENT 'Internal. Description: applies the outcome of a POLL round task (in_kind: SUCCEEDED, FAILED, UNKNOWN,
CANCELLED or EXPIRED; in_occurred_at: the outcome''s own time) to its round and step. A SUCCEEDED result object is
classified by its status: pending -> round POLL_PENDING, poll WAITING, next_poll_at = min(result time + interval,
poll deadline), checkpoint moved there (or review POLL_ROUNDS_EXHAUSTED on the last round); success -> round DONE,
step SUCCEEDED with the result object as output, successors follow; review -> REVIEW_VALUE, review
POLL_REVIEW_VALUE; anything else -> INVALID, review POLL_INVALID_RESULT. FAILED/EXPIRED -> FAILED, review
POLL_FAILED; UNKNOWN -> review POLL_UNKNOWN; CANCELLED -> recorded (review POLL_FAILED when no cancel flow owns the
step). An outcome at or after the poll deadline -> review POLL_DEADLINE_IN_FLIGHT (POLL_DEADLINE when it expired
unstarted); after a deadline review the round is settled and the step goes to NEEDS_REVIEW.
When a PENDING answer is consumed after its interval is over, the next round starts in the same transaction.
out_outcome: SUCCEEDED, PENDING, NEXT_ROUND (PENDING, and round n+1 started), DEFERRED (PENDING, and round n+1
deferred), REVIEW, RECORDED, MISMATCH, or the final-signal hook''s outcome.
The task''s, instance''s, step''s, activation''s, poll state''s and round''s facts (in_step_key .. in_round_outcome)
are the caller''s, read and locked in its transaction: the task (its step key, activation, round number, handler,
queue name, attempts, last error, creation and deadline), the instance''s status, the step (id, status, activation
sequence) with the activation''s frozen inputs, the poll state (NULL state: none) and the task''s round record.
Rules: P-2, P-3, P-7, P-8, P-9, P-10, P-11, K-7, R-6, R-7.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_problem VARCHAR(128) DEFAULT NULL;
    DECLARE v_status LONGTEXT DEFAULT NULL;
    DECLARE v_outcome VARCHAR(24);
    DECLARE v_next DATETIME(6) DEFAULT NULL;
    DECLARE v_code VARCHAR(32) DEFAULT NULL;
    DECLARE v_hook VARCHAR(16);
    DECLARE v_root VARCHAR(16);
    DECLARE v_last_worker VARCHAR(128);
    DECLARE v_facts LONGTEXT;
    DECLARE v_take_number BOOLEAN;  -- the round's update takes the number of POLL_ROUND_PENDING (below)
    DECLARE v_event_no INT UNSIGNED DEFAULT NULL;
    DECLARE v_final BOOLEAN;  -- the step declares a final signal (F-rules): its hook runs after the round's outcome

    verify: BEGIN
        IF in_step_id IS NULL OR in_frozen IS NULL OR in_state IS NULL THEN
            SET v_problem = 'the POLL activation has no step, frozen inputs or poll state';
        ELSEIF in_round_id IS NULL OR in_round_task_id <> in_task_id OR in_round_no > in_rounds_used THEN
            SET v_problem = 'no round of the activation owns this task';
        ELSEIF in_handler <> JSON_VALUE(in_frozen, '$.handler')
               OR in_handler_version <> JSON_VALUE(in_frozen, '$.handler_version')
               OR NOT (in_queue_name <=> JSON_VALUE(in_frozen, '$.queue')) THEN
            SET v_problem = 'the task does not carry the frozen contract of its activation';
        ELSEIF in_round_outcome = 'IN_FLIGHT' AND NOT (in_current_task_id <=> in_task_id) THEN
            SET v_problem = 'the poll does not name this task as its round in flight';
        END IF;
    END verify;

    SET v_facts = JSON_OBJECT('round', in_round_no + 0, 'task_id', CONCAT('tsk_', in_task_id), 'kind', in_kind,
                              'attempts_used', in_attempts_used + 0, 'max_attempts', in_max_attempts + 0,
                              'last_error', in_error,
                              -- One level down here: a result a report takes (31 levels at most) can be one level
                              -- too deep for the server in the facts; they say so, the round keeps the result.
                              'result', JSON_EXTRACT(IF(JSON_DEPTH(in_result) > 30,
                                                        '"nested too deep to be shown here: see the round''s result"',
                                                        COALESCE(in_result, 'null')), '$'),
                              'result_at', DATE_FORMAT(in_occurred_at, '%Y-%m-%dT%H:%i:%s.%fZ'),
                              'consumed_at', DATE_FORMAT(in_now, '%Y-%m-%dT%H:%i:%s.%fZ'),
                              'task_created_at', DATE_FORMAT(in_task_created, '%Y-%m-%dT%H:%i:%s.%fZ'),
                              'task_deadline_at', DATE_FORMAT(in_task_deadline, '%Y-%m-%dT%H:%i:%s.%fZ'),
                              'rounds_used', in_rounds_used + 0, 'max_rounds', in_max_rounds + 0,
                              'poll_deadline', DATE_FORMAT(in_poll_deadline, '%Y-%m-%dT%H:%i:%s.%fZ'));

    settle: BEGIN
        IF v_problem IS NOT NULL THEN
            -- R-6: corrupt ownership is never applied; the instance waits for a person.
            SET v_facts = JSON_SET(v_facts, '$.problem', v_problem, '$.inbox_id', in_inbox_id + 0,
                                   '$.claimed_step_key', in_step_key, '$.claimed_activation_id', in_activation_id + 0);
            UPDATE pulse_inbox SET state = 'MISMATCH', consumed_at = in_now, version = version + 1
             WHERE id = in_inbox_id;
            CALL _weave_review_open(in_namespace_id, in_instance_id, 'OWNERSHIP_MISMATCH', '', 0, v_facts, in_now);
            CALL _weave_audit(in_namespace_id, in_instance_id, 0, 'weave.orchestrator', 'task.ownership_mismatch',
                              NULL, NULL, in_now, NULL, NULL, v_facts, NULL);
            SET out_outcome = 'MISMATCH';
            LEAVE settle;
        END IF;
        IF in_round_outcome <> 'IN_FLIGHT' THEN
            -- The round already has its outcome (a second report of one task): kept in the history only.
            CALL _weave_event(in_namespace_id, in_instance_id, 'POLL_OUTCOME_RECORDED', in_step_key, in_seq, in_now,
                              v_facts, 'poll.record', NULL, NULL);
            SET out_outcome = 'RECORDED';
            LEAVE settle;
        END IF;

        -- The round's outcome, from the task's outcome and (for a result object) its status class.
        IF in_kind = 'SUCCEEDED' THEN
            SET v_outcome = 'INVALID';
            IF in_result IS NOT NULL AND JSON_VALID(in_result) THEN
                IF JSON_TYPE(in_result) = 'OBJECT' THEN
                    IF JSON_TYPE(JSON_EXTRACT(in_result, '$.status')) = 'STRING' THEN
                        SET v_status = JSON_VALUE(in_result, '$.status');
                    END IF;
                END IF;
            END IF;
            IF v_status IS NOT NULL THEN
                IF COALESCE(JSON_CONTAINS(JSON_EXTRACT(in_frozen, '$.result.pending'), JSON_QUOTE(v_status)), 0) = 1
                THEN
                    SET v_outcome = 'POLL_PENDING';
                ELSEIF COALESCE(JSON_CONTAINS(JSON_EXTRACT(in_frozen, '$.result.success'), JSON_QUOTE(v_status)), 0) = 1
                THEN
                    SET v_outcome = 'DONE';
                ELSEIF COALESCE(JSON_CONTAINS(JSON_EXTRACT(in_frozen, '$.result.review'), JSON_QUOTE(v_status)), 0) = 1
                THEN
                    SET v_outcome = 'REVIEW_VALUE';
                END IF;
            END IF;
        ELSEIF in_kind IN ('FAILED', 'EXPIRED') THEN
            SET v_outcome = 'FAILED';
        ELSEIF in_kind IN ('UNKNOWN', 'CANCELLED') THEN
            SET v_outcome = in_kind;
        ELSE
            CALL _weave_raise(50007, 'INVALID_STATE: unknown task outcome kind');
        END IF;
        IF v_outcome = 'POLL_PENDING' THEN
            SET v_next = LEAST(in_occurred_at + INTERVAL in_interval_ms * 1000 MICROSECOND, in_poll_deadline);
        END IF;
        SET v_facts = JSON_SET(v_facts, '$.outcome', v_outcome, '$.status', v_status,
                               '$.next_poll_at', DATE_FORMAT(v_next, '%Y-%m-%dT%H:%i:%s.%fZ'));
        IF v_outcome = 'INVALID' THEN
            -- What the person in review needs to tell the handler's owner: which part of the result object is wrong.
            SET v_facts = JSON_SET(v_facts, '$.invalid_because', CASE
                WHEN in_result IS NULL OR NOT JSON_VALID(in_result) THEN 'the result is not JSON'
                WHEN JSON_TYPE(in_result) <> 'OBJECT' THEN
                    CONCAT('the result is ', LOWER(JSON_TYPE(in_result)), ', not an object {"status": ...}')
                WHEN JSON_TYPE(JSON_EXTRACT(in_result, '$.status')) IS NULL THEN 'the result object has no status'
                WHEN v_status IS NULL THEN
                    CONCAT('its status is ', LOWER(JSON_TYPE(JSON_EXTRACT(in_result, '$.status'))), ', not a string')
                ELSE CONCAT('its status ', JSON_QUOTE(LEFT(v_status, 200)),
                            ' is none of the step''s pending, success and review statuses (case and spaces count)')
            END);
        END IF;

        -- The round's outcome and the poll's state in one statement (both rows are locked already). A PENDING
        -- answer leaves the poll WAITING (P-2) in this same update, unless the step declares a final signal: its
        -- hook tells a stored-just-now outcome from a look between rounds by the state still IN_FLIGHT, so there
        -- the state moves only after the hook (below). Every other end sets its own state. The round always
        -- changes (from IN_FLIGHT), so no changed row means it was no longer in flight.
        SET v_final = COALESCE(JSON_TYPE(JSON_EXTRACT(in_frozen, '$.final_signal')) = 'OBJECT', FALSE);
        -- A PENDING answer that leads to the next wait (the branch below that writes POLL_ROUND_PENDING: the step
        -- still waits for it, no final-signal hook runs first, the poll is not stopped, the answer came before the
        -- poll deadline and rounds are left) takes its event's number in this same statement, from the instance
        -- row the caller holds locked; every other end leaves the instance row out.
        SET v_take_number = v_outcome = 'POLL_PENDING' AND in_inst_status NOT IN ('CANCELLING', 'CANCELLED')
                            AND in_step_status = 'ACTIVE' AND NOT v_final AND in_state <> 'STOPPED'
                            AND in_occurred_at < in_poll_deadline AND in_rounds_used < in_max_rounds;
        UPDATE weave_poll_rounds r STRAIGHT_JOIN weave_poll_states p ON p.activation_id = in_activation_id
          LEFT JOIN weave_instances i ON i.id = in_instance_id AND v_take_number
           SET r.outcome = v_outcome, r.result = in_result, r.result_bytes = OCTET_LENGTH(in_result),
               r.result_at = in_occurred_at, r.decided_at = in_now,
               p.current_task_id = NULL, p.last_outcome = v_outcome, p.next_poll_at = COALESCE(v_next, p.next_poll_at),
               p.state = IF(v_outcome = 'POLL_PENDING' AND p.state = 'IN_FLIGHT' AND NOT v_final, 'WAITING', p.state),
               p.updated_at = in_now,
               i.event_seq = LAST_INSERT_ID(i.event_seq + 1), i.updated_at = in_now, i.version = i.version + 1
         WHERE r.id = in_round_id AND r.outcome = 'IN_FLIGHT';
        IF ROW_COUNT() = 0 THEN
            CALL _weave_raise(50007, 'INVALID_STATE: the round changed under its lock');
        END IF;
        IF v_take_number THEN
            SET v_event_no = LAST_INSERT_ID();
        END IF;

        IF in_inst_status IN ('CANCELLING', 'CANCELLED') OR in_step_status <> 'ACTIVE' THEN
            -- The step no longer waits for this round (cancelled, or settled by an operator): keep the fact.
            UPDATE weave_poll_states SET state = IF(state IN ('IN_FLIGHT', 'WAITING'), 'STOPPED', state)
             WHERE activation_id = in_activation_id;
            CALL _weave_event(in_namespace_id, in_instance_id, 'POLL_ROUND_SETTLED', in_step_key, in_seq, in_now,
                              v_facts, 'poll.record', NULL, NULL);
            SET out_outcome = 'RECORDED';
            LEAVE settle;
        END IF;

        -- Only a step that declares a final signal has a POLL_FINAL wait (_weave_poll_activate) to look at.
        IF v_final THEN
            CALL _weave_poll_final_check(in_namespace_id, in_instance_id, in_step_key, in_activation_id, in_now,
                                         v_hook);
        END IF;
        IF v_hook IS NOT NULL THEN
            SET out_outcome = v_hook;
            LEAVE settle;
        END IF;

        IF in_state = 'STOPPED' THEN
            -- P-11: the deadline review is open already and stays open; the round is settled now and the step
            -- goes to NEEDS_REVIEW, so that recovery can act on it. A late result never clears the review.
            UPDATE weave_steps SET status = 'NEEDS_REVIEW', updated_at = in_now WHERE id = in_step_id;
            CALL _weave_event(in_namespace_id, in_instance_id, 'POLL_ROUND_SETTLED', in_step_key, in_seq, in_now,
                              v_facts, 'poll.record', NULL, NULL);
            SET out_outcome = 'REVIEW';
            LEAVE settle;
        END IF;

        IF in_occurred_at >= in_poll_deadline THEN
            -- Judged by its own time: the deadline came first (P-10, P-11).
            SET v_code = IF(in_kind = 'EXPIRED', 'POLL_DEADLINE', 'POLL_DEADLINE_IN_FLIGHT');
        ELSEIF v_outcome = 'DONE' THEN
            -- P-7: the result object is the step output; successors follow in this transaction (R-7).
            UPDATE weave_poll_states SET state = 'SETTLED', updated_at = in_now WHERE activation_id = in_activation_id;
            CALL _weave_step_close(in_namespace_id, in_instance_id, in_step_key, in_seq, in_activation_id, NULL,
                                   in_result, 'POLL_SUCCEEDED', 'poll.settle', NULL, v_facts, in_now, v_root);
            SET out_outcome = 'SUCCEEDED';
            LEAVE settle;
        ELSEIF v_outcome = 'POLL_PENDING' THEN
            IF in_rounds_used >= in_max_rounds THEN
                SET v_code = 'POLL_ROUNDS_EXHAUSTED';  -- P-9
            ELSE
                -- P-2: wait for the interval; the POLL checkpoint creates the next round (P-4). When the interval
                -- is already over, the next round starts now, as its checkpoint would (a deferral there moves the
                -- checkpoint to next_poll_at itself).
                IF v_final THEN
                    UPDATE weave_poll_states SET state = 'WAITING' WHERE activation_id = in_activation_id;
                END IF;
                CALL _weave_event(in_namespace_id, in_instance_id, 'POLL_ROUND_PENDING', in_step_key, in_seq, in_now,
                                  v_facts, 'poll.pending', in_poll_deadline, v_event_no);
                SET v_event_no = NULL;  -- used (see the check below)
                IF in_now >= v_next AND in_now < in_poll_deadline THEN
                    CALL _weave_poll_round_start(in_namespace_id, in_instance_id, in_step_key, in_seq, in_activation_id,
                                                 in_frozen, 'WAITING', in_rounds_used, in_max_rounds, in_poll_deadline,
                                                 NULL, v_next, in_now, v_hook);
                    SET out_outcome = IF(v_hook = 'ROUND', 'NEXT_ROUND', v_hook);
                ELSE
                    CALL _weave_checkpoint_set(in_namespace_id, in_instance_id, in_step_key, 'POLL', in_activation_id,
                                               v_next, in_now);
                    SET out_outcome = 'PENDING';
                END IF;
                LEAVE settle;
            END IF;
        ELSE
            -- P-8. A cancelled round that no cancel flow owns answered nothing: it is a failed round.
            SET v_code = CASE v_outcome WHEN 'REVIEW_VALUE' THEN 'POLL_REVIEW_VALUE'
                                        WHEN 'INVALID' THEN 'POLL_INVALID_RESULT'
                                        WHEN 'UNKNOWN' THEN 'POLL_UNKNOWN'
                                        ELSE 'POLL_FAILED' END;
        END IF;
        SELECT worker_id INTO v_last_worker
          FROM pulse_attempts WHERE task_id = in_task_id AND attempt_no = in_attempts_used;
        CALL _weave_poll_review(in_namespace_id, in_instance_id, in_step_key, in_seq, in_activation_id, v_code,
                                'NEEDS_REVIEW', JSON_SET(v_facts, '$.last_worker', v_last_worker), in_now);
        SET out_outcome = 'REVIEW';
    END settle;
    -- A number the round's update took and no event used would be a gap in the history (M-4.9): the condition
    -- above mirrors the branch that writes POLL_ROUND_PENDING, and should they ever part, the decision fails
    -- and is undone rather than leave the gap.
    IF v_event_no IS NOT NULL THEN
        CALL _weave_raise(50007, 'INVALID_STATE: an event number was taken for POLL_ROUND_PENDING and not used');
    END IF;
END
