-- The SIGNAL step's decisions (S-10..S-13), made under the instance row lock held by the caller
-- (weave_checkpoint_advance for the step's checkpoint, weave_signal_process for a fresh signal): both
-- paths run this one routine, so a signal and a deadline can never be decided two ways. The winner,
-- the wait, the step, every other signal of the activation, the successors (bounded by R-7), the
-- events and the audit row are one transaction (S-11): the caller's.
CREATE PROCEDURE _weave_signal_advance(
        IN  in_namespace_id  BIGINT UNSIGNED,
        IN  in_instance_id   BIGINT UNSIGNED,
        IN  in_step_key      VARCHAR(64),
        IN  in_activation_id BIGINT UNSIGNED,
        IN  in_now           DATETIME(6),
        IN  in_fresh_signal  BIGINT UNSIGNED,
        IN  in_fresh_only    BOOLEAN,
        OUT out_outcome      VARCHAR(16))
    COMMENT 'Internal. Description: consumes the first on-time matching signal of a SIGNAL wait (S-11), or at its
deadline with none expires it into review (S-13), or rejects early mismatches and keeps the checkpoint due at the
deadline. in_fresh_signal: a signal accepted in this transaction (Settle at Send), whose acceptance proof is that
write itself (NULL: none); in_fresh_only: that signal is the instance''s first, so it is the only candidate and no
other can be PENDING.
out_outcome: CONSUMED, EXPIRED, PROOF_MISMATCH, WAITING or STALE.
Rules: S-10, S-11, S-12, S-13, S-15, R-5, R-6, R-7.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_step BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_seq INT UNSIGNED;
    DECLARE v_wait BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_started DATETIME(6);
    DECLARE v_deadline DATETIME(6);
    DECLARE v_act_deadline DATETIME(6);
    DECLARE v_winner BIGINT UNSIGNED;
    DECLARE v_proof VARCHAR(16);
    DECLARE v_accepted DATETIME(6);
    DECLARE v_output LONGTEXT;
    DECLARE v_root VARCHAR(16);
    DECLARE v_facts LONGTEXT;
    DECLARE v_came INT UNSIGNED;  -- signals that named this wait, for a review's facts (C-3)
    DECLARE v_came_list LONGTEXT;
    -- The opening's outputs this handler does not use: it verified them (R-6) and found the wait open.
    DECLARE v_no_step_status VARCHAR(16);
    DECLARE v_no_wait_status VARCHAR(16);
    DECLARE v_no_planned DATETIME(6);
    DECLARE v_no_frozen LONGTEXT;

    CALL _weave_step_open(in_instance_id, in_step_key, in_activation_id, 'SIGNAL', v_step, v_no_step_status, v_seq,
                          v_wait, v_no_wait_status, v_started, v_deadline, v_no_planned, v_act_deadline, v_no_frozen);

    sig: BEGIN
        IF v_step IS NULL THEN  -- stale (R-5), or the wait or the step has ended
            SET out_outcome = 'STALE';
            LEAVE sig;
        END IF;

        IF in_fresh_only THEN
            -- The instance's first signal, accepted in this transaction: the one signal the instance holds, so the
            -- first match is that signal if it matches at all (S-11), tested by _weave_signal_pick's own conditions,
            -- and its proof is its own write (S-12). Both rows are this transaction's: the wait locked by the step's
            -- opening (_weave_step_open), the signal by its insert. Two key reads, where the search reads the wait's
            -- signals. A change to the search's conditions is made here too.
            SELECT s.id, s.accepted_at, CONVERT(s.payload USING utf8mb4) INTO v_winner, v_accepted, v_output
              FROM weave_waits w STRAIGHT_JOIN weave_signals s ON s.id = in_fresh_signal
             WHERE w.id = v_wait AND s.instance_id = w.instance_id AND s.target_step_key = w.step_key
               AND s.target_activation_seq = w.activation_seq AND s.status = 'PENDING'
               AND TIMESTAMPDIFF(MICROSECOND, s.accepted_at, w.deadline_at) > 0
               AND TIMESTAMPDIFF(MICROSECOND, w.started_at, s.expires_at) > 0
               AND s.correlation_key = w.correlation_key
               AND BINARY s.name = BINARY w.signal_name AND BINARY s.payload_version = BINARY w.payload_version;
            SET v_proof = 'OK';
        ELSE
            CALL _weave_signal_pick(in_namespace_id, in_instance_id, v_wait, in_now, in_fresh_signal, v_winner,
                                    v_proof, v_accepted, v_output);
        END IF;

        IF v_proof = 'MISMATCH' THEN
            -- S-12: the step stops here; the wait stays open but consumes nothing more until recovery.
            SET v_facts = JSON_OBJECT('signal_id', CONCAT('sig_', v_winner),
                                      'deadline_at', DATE_FORMAT(v_deadline, '%Y-%m-%dT%H:%i:%s.%fZ'),
                                      'checked_at', DATE_FORMAT(in_now, '%Y-%m-%dT%H:%i:%s.%fZ'));
            UPDATE weave_steps SET status = 'NEEDS_REVIEW', updated_at = in_now WHERE id = v_step;
            CALL _weave_review_open(in_namespace_id, in_instance_id, 'ACCEPTANCE_PROOF_MISMATCH', in_step_key, v_seq,
                                    v_facts, in_now);
            CALL _weave_audit(in_namespace_id, in_instance_id, 0, 'weave.orchestrator', 'signal.proof_mismatch',
                              NULL, NULL, in_now, v_deadline, NULL, v_facts, NULL);
            SET out_outcome = 'PROOF_MISMATCH';
            LEAVE sig;
        END IF;

        IF v_winner IS NOT NULL THEN
            -- S-11 (and S-13: an on-time signal found after the deadline still wins; S-15: a paused
            -- instance or a disabled app still consumes, only the successors wait).
            -- The wait and its winner in one statement, in R-3 order (the join reads the wait first).
            UPDATE weave_waits w STRAIGHT_JOIN weave_signals g ON g.id = v_winner
               SET w.status = 'SATISFIED', w.winner_signal_id = v_winner, w.settled_at = in_now,
                   g.status = 'CONSUMED', g.disposition = NULL, g.consumed_at = in_now, g.version = g.version + 1
             WHERE w.id = v_wait;
            IF NOT in_fresh_only THEN  -- the instance's only signal has won: no other is left to settle
                CALL _weave_wait_signals_settle(in_namespace_id, in_instance_id, v_wait, 'WAIT_SETTLED', in_now);
            END IF;
            SET v_facts = JSON_OBJECT(
                'signal_id', CONCAT('sig_', v_winner),
                'accepted_at', DATE_FORMAT(v_accepted, '%Y-%m-%dT%H:%i:%s.%fZ'),
                'deadline_at', DATE_FORMAT(v_deadline, '%Y-%m-%dT%H:%i:%s.%fZ'),
                'settled_at', DATE_FORMAT(in_now, '%Y-%m-%dT%H:%i:%s.%fZ'),
                'latency_ms', TIMESTAMPDIFF(MICROSECOND, GREATEST(v_accepted, v_started), in_now) / 1000);
            CALL _weave_step_close(in_namespace_id, in_instance_id, in_step_key, v_seq, in_activation_id, NULL,
                                   v_output, 'SIGNAL_CONSUMED', 'signal.consume', v_deadline, v_facts, in_now, v_root);
            SET out_outcome = 'CONSUMED';
            LEAVE sig;
        END IF;

        IF in_now >= v_deadline THEN
            -- S-13: no on-time match; a timed-out wait is never reported as success.
            CALL _weave_wait_expire(v_step, in_activation_id, v_wait, in_now);
            CALL _weave_wait_signals_settle(in_namespace_id, in_instance_id, v_wait, 'WAIT_SETTLED', in_now);
            -- The review's facts name the signals that came for this wait and lost (a correlation key that did not
            -- match, a contract not kept, one too late), the latest 10 and how many: why none won is the first
            -- question, and its answer is there. One range of the wait's own prefix of the signal index.
            /*M!100301 SET STATEMENT group_concat_max_len = 1048576 FOR */
            SELECT COUNT(*), JSON_ARRAYAGG(JSON_OBJECT(
                       'signal_id', CONCAT('sig_', g.id), 'status', g.status, 'disposition', g.disposition,
                       'accepted_at', DATE_FORMAT(g.accepted_at, '%Y-%m-%dT%H:%i:%s.%fZ'))
                       ORDER BY g.accepted_at DESC, g.id DESC LIMIT 10)
              INTO v_came, v_came_list
              FROM weave_signals g FORCE INDEX (ix_signal_target)
             WHERE g.instance_id = in_instance_id AND g.target_step_key = in_step_key
               AND g.target_activation_seq = v_seq;
            SET v_facts = JSON_OBJECT(
                'started_at', DATE_FORMAT(v_started, '%Y-%m-%dT%H:%i:%s.%fZ'),
                'deadline_at', DATE_FORMAT(v_deadline, '%Y-%m-%dT%H:%i:%s.%fZ'),
                'settled_at', DATE_FORMAT(in_now, '%Y-%m-%dT%H:%i:%s.%fZ'),
                'lateness_ms', TIMESTAMPDIFF(MICROSECOND, v_deadline, in_now) / 1000,
                'signals_total', v_came + 0, 'signals', JSON_EXTRACT(COALESCE(v_came_list, '[]'), '$'));
            CALL _weave_event(in_namespace_id, in_instance_id, 'SIGNAL_TIMEOUT', in_step_key, v_seq, in_now, v_facts,
                              'signal.timeout', v_deadline, NULL);
            CALL _weave_review_open(in_namespace_id, in_instance_id, 'SIGNAL_TIMEOUT', in_step_key, v_seq,
                                    v_facts, in_now);
            SET out_outcome = 'EXPIRED';
            LEAVE sig;
        END IF;

        -- S-11: early signals that do not match are rejected now; the wait looks again at its deadline.
        CALL _weave_wait_signals_settle(in_namespace_id, in_instance_id, v_wait, NULL, in_now);
        CALL _weave_checkpoint_set(in_namespace_id, in_instance_id, in_step_key, 'SIGNAL', in_activation_id,
                                   v_deadline, in_now);
        SET out_outcome = 'WAITING';
    END sig;
    -- Every end of the wait removes its checkpoint: a consumed step's goes with its close (in the ROOT walk's
    -- closing delete), WAITING has set it anew, a stale wait's went in the opening, and the others' goes here.
    IF out_outcome IN ('PROOF_MISMATCH', 'EXPIRED') THEN
        DELETE FROM weave_pending_advances WHERE instance_id = in_instance_id AND step_key = in_step_key;
    END IF;
END
