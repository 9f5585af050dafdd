-- The body of the three step recoveries of C-4, which differ only in what they do to the step: continue (a
-- POLL goes on in the same activation), reactivate (a new activation k+1) and resolve (the operator supplies
-- the output). Each opens as an operator action in review (authorise, lock, answer replays), checks that the
-- step may be recovered, and closes alike: its review reasons closed, its event, the instance reopened when
-- no reason is left, and the audit row under the action's key.
CREATE PROCEDURE _weave_step_recover(
        IN  in_action           VARCHAR(16),
        IN  in_token            VARCHAR(512),
        IN  in_namespace        VARCHAR(200),
        IN  in_workflow_id      VARCHAR(64),
        IN  in_step_key         VARCHAR(200),
        IN  in_extra_rounds     BIGINT,
        IN  in_poll_deadline_ms BIGINT,
        IN  in_timeout_ms       BIGINT,
        IN  in_output           LONGTEXT,
        IN  in_evidence_ref     VARCHAR(2048),
        IN  in_reason           VARCHAR(4096),
        IN  in_idempotency_key  VARCHAR(512),
        IN  in_digest           CHAR(64),
        IN  in_activation_seq   INT UNSIGNED,
        OUT out_instance_id     BIGINT UNSIGNED,
        OUT out_replayed        TINYINT)
    COMMENT 'Internal. Description: the body of weave_step_continue (in_action continue: in_extra_rounds,
in_poll_deadline_ms), weave_step_reactivate (reactivate: in_timeout_ms) and weave_step_resolve (resolve: in_output,
in_evidence_ref); the parameters of the other actions are NULL. in_activation_seq: the activation the operator
decided about (NULL: the current one). Errors: those of the three routines.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_now DATETIME(6);
    DECLARE v_ns BIGINT UNSIGNED;
    DECLARE v_cred BIGINT UNSIGNED;
    DECLARE v_actor VARCHAR(128);
    DECLARE v_id BIGINT UNSIGNED;
    DECLARE v_step BIGINT UNSIGNED;
    DECLARE v_type VARCHAR(16);
    DECLARE v_seq INT UNSIGNED;
    DECLARE v_activation BIGINT UNSIGNED;
    DECLARE v_event VARCHAR(32);
    DECLARE v_event_seq INT UNSIGNED;
    DECLARE v_event_data LONGTEXT;
    DECLARE v_audit_deadline DATETIME(6) DEFAULT NULL;
    DECLARE v_audit_details LONGTEXT;
    DECLARE v_reopened TINYINT DEFAULT 0;
    DECLARE v_left SMALLINT UNSIGNED;  -- the instance's steps not SUCCEEDED, once resolve has settled one
    DECLARE v_walked VARCHAR(16);
    DECLARE v_first_output LONGTEXT;  -- a resolve replayed under its key with another digest: the first output
    DECLARE v_first_digest CHAR(64);
    DECLARE v_same TINYINT DEFAULT 0;
    -- continue
    DECLARE v_state VARCHAR(16);
    DECLARE v_stop VARCHAR(32);
    DECLARE v_used INT UNSIGNED;
    DECLARE v_max INT UNSIGNED;
    DECLARE v_deadline DATETIME(6);
    DECLARE v_next DATETIME(6);
    DECLARE v_last VARCHAR(24) DEFAULT NULL;
    DECLARE v_instance_deadline DATETIME(6);
    DECLARE v_due DATETIME(6);
    DECLARE v_look DATETIME(6);
    -- reactivate
    DECLARE v_wait BIGINT UNSIGNED;
    CALL _weave_control_begin(in_token, in_namespace, in_workflow_id, 'workflows:review', CONCAT('step.', in_action),
                              in_reason, in_idempotency_key, in_digest, in_action = 'resolve', v_ns, v_cred, v_actor,
                              v_id, out_replayed, v_now);
    SET out_instance_id = v_id;
    IF out_replayed = 2 THEN
        -- The key resolved this step with a request of another digest. The output is a JSON value: the same resolve
        -- again may spell it otherwise (another client, the CLI as typed; an earlier API wrote it compactly). The
        -- first output is on the step, as the first request sent it: when this output is the same value (and one a
        -- first request would take), the request is taken with that text in its place, and its digest decides, as a
        -- start's replay does.
        SELECT output INTO v_first_output FROM weave_steps WHERE instance_id = v_id AND step_key = in_step_key;
        SELECT request_digest INTO v_first_digest FROM weave_audit
         WHERE instance_id = v_id AND action = 'step.resolve' AND idempotency_key = in_idempotency_key LIMIT 1;
        IF LENGTH(in_output) <= 262144 AND _weave_json_strict(in_output) THEN  -- the size first: it costs nothing
            CALL _weave_json_equal(v_first_output, in_output, v_same);
        END IF;
        IF v_same = 0 OR v_first_digest <> _weave_resolve_digest(in_step_key, in_activation_seq, v_first_output,
                                                                  in_evidence_ref, in_reason) THEN
            CALL _weave_raise(50005, 'IDEMPOTENCY_CONFLICT: this key did a different request');
        END IF;
        SET out_replayed = 1;
    END IF;
    IF out_replayed = 0 THEN
        IF in_action = 'resolve' THEN
            -- The size before the text, which takes a while to read when large (the instance is locked meanwhile).
            IF in_output IS NULL OR LENGTH(in_output) > 262144 OR NOT _weave_json_strict(in_output) THEN
                CALL _weave_raise(50117, 'INPUT_INVALID: output must be one JSON value of at most 256 KiB, nested at most 31 '
                                                'levels, no key twice, no number past a double');
            END IF;
            IF in_evidence_ref IS NOT NULL AND (CHAR_LENGTH(in_evidence_ref) NOT BETWEEN 1 AND 512
                                                OR in_evidence_ref REGEXP '[\\s\\p{Z}\\p{Cc}]') THEN  -- as a signal's
                CALL _weave_raise(50112, 'EVIDENCE_REF_INVALID: evidence_ref must be 1-512 chars without whitespace or controls');
            END IF;
        END IF;
        CALL _weave_recovery_begin(v_id, in_step_key, v_step, v_type, v_seq, v_activation);
        -- The operator decided about what one activation showed; the step may have been reactivated since and be
        -- in review again, for other reasons: an action meant for activation k is never applied to k+1.
        IF in_activation_seq IS NOT NULL AND in_activation_seq <> v_seq THEN
            CALL _weave_raise(50007, CONCAT('INVALID_STATE: step ', LEFT(in_step_key, 64), ' is at activation ', v_seq,
                                            ', not ', in_activation_seq, '; look at it again'));
        END IF;
        IF in_action = 'continue' THEN
            -- Stopped on its rounds or its deadline, its last round answered PENDING: also a round that was still
            -- in flight at the deadline (P-11), once it answered PENDING (until then, TASK_IN_FLIGHT above).
            SELECT state, stop_reason, rounds_used, max_rounds, poll_deadline, next_poll_at
              INTO v_state, v_stop, v_used, v_max, v_deadline, v_next
              FROM weave_poll_states WHERE activation_id = v_activation FOR UPDATE;
            SELECT outcome INTO v_last FROM weave_poll_rounds WHERE activation_id = v_activation AND round_no = v_used;
            -- Each test NULL-safe: a poll stopped by another review (a failing decision's) has no stop reason, and
            -- NOT IN over NULL is NULL, which let the continue through.
            IF v_type <> 'POLL' OR v_state IS NULL OR v_state <> 'STOPPED'
               OR v_stop IS NULL OR v_stop NOT IN ('POLL_ROUNDS_EXHAUSTED', 'POLL_DEADLINE', 'POLL_DEADLINE_IN_FLIGHT')
               OR v_last IS NULL OR v_last <> 'POLL_PENDING' THEN
                CALL _weave_raise(50007, 'INVALID_STATE: continue needs a POLL stopped on rounds or deadline after PENDING');
            END IF;
            IF in_extra_rounds IS NULL AND in_poll_deadline_ms IS NULL THEN
                CALL _weave_raise(50100, 'INVALID_ARGUMENT: give extra_rounds and/or poll_deadline_ms');
            END IF;
            IF in_extra_rounds IS NOT NULL AND (in_extra_rounds < 1 OR in_extra_rounds > 10000) THEN
                CALL _weave_raise(50100, 'INVALID_ARGUMENT: extra_rounds must be 1..10000');
            END IF;
            SELECT deadline_at INTO v_instance_deadline FROM weave_instances WHERE id = v_id;
            IF in_poll_deadline_ms IS NOT NULL THEN
                -- Compared as a span, not as a sum: a huge in_poll_deadline_ms would overflow the sum (1690, 1441).
                IF in_poll_deadline_ms < 1
                   OR in_poll_deadline_ms > TIMESTAMPDIFF(MICROSECOND, v_now, v_instance_deadline) DIV 1000 THEN
                    CALL _weave_raise(50118, 'DEADLINE_INVALID: the poll deadline must be later than now and within the instance deadline');
                END IF;
                -- A later poll deadline, never an earlier one: an action meant to give a poll more time must not take
                -- some away (a POLL stopped on its rounds may have time left).
                IF v_now + INTERVAL in_poll_deadline_ms * 1000 MICROSECOND <= v_deadline THEN
                    CALL _weave_raise(50118, CONCAT('DEADLINE_INVALID: poll_deadline_ms must give a later poll deadline ',
                                                    'than the current one (',
                                                    DATE_FORMAT(v_deadline, '%Y-%m-%dT%H:%i:%s.%fZ'), ')'));
                END IF;
                SET v_deadline = v_now + INTERVAL in_poll_deadline_ms * 1000 MICROSECOND;
            END IF;
            SET v_max = v_max + COALESCE(in_extra_rounds, 0);
            -- Each cause named with its fix: one message for both sent an operator who had added rounds to add
            -- rounds again, when the poll deadline had passed.
            IF v_now >= v_deadline THEN
                CALL _weave_raise(50100, CONCAT('INVALID_ARGUMENT: the poll deadline (',
                                                DATE_FORMAT(v_deadline, '%Y-%m-%dT%H:%i:%s.%fZ'),
                                                ') has passed: give poll_deadline_ms for a later one'));
            END IF;
            IF v_used >= v_max THEN
                CALL _weave_raise(50100, CONCAT('INVALID_ARGUMENT: all ', v_max, ' rounds are used: give extra_rounds'));
            END IF;
            SET v_due = GREATEST(v_now, COALESCE(v_next, v_now));
            UPDATE weave_poll_states
               SET max_rounds = v_max, poll_deadline = v_deadline, state = 'WAITING', stop_reason = NULL,
                   next_poll_at = v_due, updated_at = v_now
             WHERE activation_id = v_activation;
            UPDATE weave_waits SET deadline_at = v_deadline
             WHERE activation_id = v_activation AND kind = 'POLL_FINAL' AND status = 'WAITING';
            UPDATE weave_steps SET status = 'ACTIVE', updated_at = v_now WHERE id = v_step;
            -- A final signal accepted during the review came while no query was out (F-2): the checkpoint looks
            -- at once, not at the next round's time, which may be an interval away; with none it waits for that.
            -- Each is a candidate again, due at once: one kept for the step's recovery was looked at no more.
            UPDATE weave_signals FORCE INDEX (ix_signal_target)
               SET available_at = LEAST(available_at, v_now), version = version + 1
             WHERE instance_id = v_id AND target_step_key = in_step_key AND target_activation_seq = v_seq
               AND status = 'PENDING';
            SET v_look = IF(ROW_COUNT() > 0, v_now, v_due);
            CALL _weave_checkpoint_set(v_ns, v_id, in_step_key, 'POLL', v_activation, v_look, v_now);
            SET v_event = 'POLL_CONTINUED', v_event_seq = v_seq, v_audit_deadline = v_deadline;
            SET v_event_data = JSON_OBJECT('max_rounds', v_max + 0,
                                           'poll_deadline', DATE_FORMAT(v_deadline, '%Y-%m-%dT%H:%i:%s.%fZ'),
                                           'next_poll_at', DATE_FORMAT(v_due, '%Y-%m-%dT%H:%i:%s.%fZ'),
                                           'stopped_on', v_stop, 'actor', v_actor, 'reason', in_reason);
            SET v_audit_details = JSON_OBJECT('step_key', in_step_key, 'extra_rounds', in_extra_rounds + 0,
                                              'max_rounds', v_max + 0);
        ELSEIF in_action = 'reactivate' THEN
            IF in_timeout_ms IS NOT NULL AND (in_timeout_ms <= 0 OR in_timeout_ms > 31536000000 OR v_type NOT IN ('SIGNAL', 'POLL')) THEN
                CALL _weave_raise(50100, 'INVALID_ARGUMENT: timeout_ms applies to SIGNAL and POLL steps, 1..31536000000');
            END IF;
            -- A new activation is new work, which the instance deadline stops (R-8): past it, the reactivation would
            -- answer RUNNING and send the instance back to review at once, its activation used up. Move it first.
            SELECT deadline_at INTO v_instance_deadline FROM weave_instances WHERE id = v_id;
            IF v_now >= v_instance_deadline THEN
                CALL _weave_raise(50007, CONCAT('INVALID_STATE: the instance deadline (',
                                                DATE_FORMAT(v_instance_deadline, '%Y-%m-%dT%H:%i:%s.%fZ'),
                                                ') has passed: move it later (deadline) before reactivating'));
            END IF;
            UPDATE weave_activations SET ended_at = COALESCE(ended_at, v_now) WHERE id = v_activation;
            -- PENDING again, one PENDING step more on the instance, in one statement (both rows are locked).
            UPDATE weave_steps s STRAIGHT_JOIN weave_instances i ON i.id = s.instance_id
               SET s.status = 'PENDING', s.activation_seq = v_seq + 1, s.activation_id = NULL,
                   s.activation_override = IF(in_timeout_ms IS NULL, NULL,
                                              JSON_OBJECT('timeout_ms', in_timeout_ms + 0)),
                   s.updated_at = v_now, i.pending_steps = i.pending_steps + 1
             WHERE s.id = v_step;
            DELETE FROM weave_pending_advances WHERE instance_id = v_id AND step_key = in_step_key;
            SET v_event = 'STEP_REACTIVATED', v_event_seq = v_seq + 1;
            SET v_event_data = JSON_OBJECT('previous_activation', v_seq + 0, 'actor', v_actor, 'reason', in_reason,
                                           'timeout_ms', in_timeout_ms + 0);
            SET v_audit_details = JSON_OBJECT('step_key', in_step_key, 'activation_sequence', v_seq + 1);
        ELSE
            -- The step (NEEDS_REVIEW, locked by _weave_recovery_begin) succeeds, with one open step fewer on the
            -- instance and its activation ended, in one statement (the step first, as _weave_step_close writes
            -- them: its output stays out of the in-memory table of the others' new values). A step sent to review
            -- by its activation itself (R-18: ACTIVATION_FAILED, QUEUE_NOT_FOUND) has no activation row: the
            -- outer join still settles the step and the instance.
            UPDATE weave_steps s STRAIGHT_JOIN weave_instances i ON i.id = s.instance_id
              LEFT JOIN weave_activations a ON a.id = v_activation
               SET s.status = 'SUCCEEDED', s.output = in_output, s.updated_at = v_now, i.open_steps = i.open_steps - 1,
                   a.ended_at = COALESCE(a.ended_at, v_now)
             WHERE s.id = v_step;
            DELETE FROM weave_pending_advances WHERE instance_id = v_id AND step_key = in_step_key;
            SET v_event = 'STEP_RESOLVED', v_event_seq = v_seq;
            SET v_event_data = JSON_OBJECT('output', JSON_EXTRACT(in_output, '$'), 'evidence_ref', in_evidence_ref,
                                           'actor', v_actor, 'reason', in_reason);
            SET v_audit_details = JSON_OBJECT('step_key', in_step_key, 'evidence_ref', in_evidence_ref);
        END IF;
        IF in_action IN ('reactivate', 'resolve') THEN
            -- A wait of activation k still open (a final-signal wait, or one stopped by a tampered signal) is
            -- closed now, and its pending signals answered (S-11): STALE_ACTIVATION when k+1 follows, as they can
            -- never follow into it; STEP_SETTLED when the operator settled the step, so that no signal waits on
            -- a step that has ended, and a later one is answered STEP_SETTLED at once (S-9).
            close_waits: LOOP
                SET v_wait = NULL;
                SELECT id INTO v_wait FROM weave_waits
                 WHERE activation_id = v_activation AND status = 'WAITING' LIMIT 1 FOR UPDATE;
                IF v_wait IS NULL THEN
                    LEAVE close_waits;
                END IF;
                UPDATE weave_waits SET status = 'CANCELLED', settled_at = v_now WHERE id = v_wait;
                CALL _weave_wait_signals_settle(v_ns, v_id, v_wait,
                                                IF(in_action = 'reactivate', 'STALE_ACTIVATION', 'STEP_SETTLED'), v_now);
            END LOOP;
        END IF;
        UPDATE weave_review_reasons FORCE INDEX (ix_review_instance) SET closed_at = v_now, closed_by = in_action
         WHERE instance_id = v_id AND step_key = in_step_key AND closed_at IS NULL;
        CALL _weave_event(v_ns, v_id, v_event, in_step_key, v_event_seq, v_now, v_event_data, NULL, NULL, NULL);
        CALL _weave_review_reopen(v_ns, v_id, v_now, v_reopened);
        CALL _weave_audit(v_ns, v_id, v_cred, v_actor, CONCAT('step.', in_action), in_idempotency_key, in_digest, v_now,
                          v_audit_deadline, in_reason, JSON_INSERT(v_audit_details, '$.reopened', v_reopened = 1), NULL);
        -- R-9: a resolve that settled the instance's last step, with no reason left open, ends the instance in its
        -- own transaction, as any settlement of a last step does; the walk finds every step SUCCEEDED, writes the
        -- instance's end and removes its checkpoints (the ROOT one the reopening set included). Successors of a step
        -- that was not the last follow by the ROOT checkpoint (C-4).
        IF in_action = 'resolve' AND v_reopened = 1 THEN
            SELECT open_steps INTO v_left FROM weave_instances WHERE id = v_id;
            IF v_left = 0 THEN
                CALL _weave_root_advance(v_ns, v_id, v_now, 32, TRUE, NULL, NULL, NULL, NULL, v_walked);
            END IF;
        END IF;
    END IF;
END
