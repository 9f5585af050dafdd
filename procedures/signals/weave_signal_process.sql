-- The SIGNAL candidate class (R-10 c). A PENDING signal is due at once when a wait can take it, so an
-- accepted signal settles its wait within one scan; otherwise it is due when it expires (S-14). Its
-- available_at is only the next check time: nothing here moves accepted_at, expires_at or a deadline.
-- Consumption runs the step's own handler under the instance lock, dispatched by the step's type in
-- the one routine the step's checkpoint also runs (_weave_step_advance), so the two candidates for one
-- wait can never decide differently (POLL_FINAL: the POLL handler, which re-derives all of its step's work).
CREATE PROCEDURE weave_signal_process(IN in_signal_id BIGINT UNSIGNED)
    COMMENT 'Description: advances one PENDING signal in its own transaction: runs its wait''s consumption when the
wait is WAITING (S-11..S-13), expires an unmatched signal at expires_at (S-14), rejects a signal of an activation
that recovery has superseded (S-8), keeps one accepted on time for an open wait whose step is in review for that
step''s recovery (no next check), otherwise sets its next check time to expires_at (a second from now for a signal
that its wait left to a round outcome stored in the inbox, which is never expired by a late look: F-9).
Parameters: in_signal_id - from weave_scan.
Result set: outcome - GONE (no longer PENDING), BUSY (another node holds the instance), NOT_DUE, the step handler''s
outcome (CONSUMED, EXPIRED, PROOF_MISMATCH, WAITING ...), EXPIRED_UNMATCHED, REJECTED, or LATER (next check set);
made_due - 1 when the decision made a candidate due at its own time (as weave_checkpoint_advance).
Errors: 50007 INVALID_STATE when stored facts do not verify (the candidate backs off; nothing is changed).
Rules: S-8, S-10, S-11, S-12, S-13, S-14, S-15, F-9, R-6, R-10, R-12, R-13.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_now DATETIME(6);
    DECLARE v_last DATETIME(6);  -- the instance's last decision, as locked (R-2)
    DECLARE v_no_open INT UNSIGNED;  -- the opening's counts of open and PENDING steps: this candidate does not use them
    DECLARE v_no_pending INT UNSIGNED;
    DECLARE v_ns BIGINT UNSIGNED;
    DECLARE v_inst BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_status VARCHAR(16) DEFAULT NULL;
    DECLARE v_step_key VARCHAR(64);
    DECLARE v_seq INT UNSIGNED;
    DECLARE v_expires DATETIME(6);
    DECLARE v_available DATETIME(6);
    DECLARE v_step BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_step_type VARCHAR(16);
    DECLARE v_step_status VARCHAR(16);
    DECLARE v_k INT UNSIGNED;
    DECLARE v_activation BIGINT UNSIGNED;
    DECLARE v_wait BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_wait_kind VARCHAR(16);
    DECLARE v_wait_status VARCHAR(16);
    DECLARE v_held BOOLEAN DEFAULT FALSE;  -- on time for its open wait, whose step is in review: kept for its recovery
    DECLARE v_accepted DATETIME(6);
    DECLARE v_wait_deadline DATETIME(6);
    DECLARE v_disposition VARCHAR(32) DEFAULT NULL;
    DECLARE v_outcome VARCHAR(32) DEFAULT 'GONE';
    DECLARE v_due_before BIGINT DEFAULT @weave_made_due;  -- the session's count of candidates made due so far
    DECLARE v_inst_status VARCHAR(16);
    DECLARE v_tx BOOLEAN DEFAULT FALSE;  -- TRUE once this routine has started its own transaction
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN IF v_tx THEN ROLLBACK; END IF; RESIGNAL; END;
    CALL _weave_transaction_begin('weave_signal_process', v_tx);  -- refused inside a caller's transaction (R-1)
    proc: BEGIN
        CALL _weave_candidate_open('SIGNAL', in_signal_id, v_ns, v_inst, v_inst_status, v_last, v_no_open, v_no_pending,
                                   v_outcome);
        IF v_outcome IS NOT NULL THEN
            LEAVE proc;
        END IF;
        SET v_outcome = 'GONE';
        -- The clock in the re-read of the candidate (see _weave_candidate_open), never before the instance's last
        -- decision (R-2: see _weave_signal_accept).
        SELECT status, target_step_key, target_activation_seq, expires_at, available_at, accepted_at,
               GREATEST(UTC_TIMESTAMP(6) + INTERVAL (SELECT clock_offset_us FROM weave_install WHERE id = 1) MICROSECOND,
                        v_last)
          INTO v_status, v_step_key, v_seq, v_expires, v_available, v_accepted, v_now
          FROM weave_signals WHERE id = in_signal_id AND instance_id = v_inst FOR UPDATE;
        IF v_status IS NULL OR v_status <> 'PENDING' THEN
            LEAVE proc;
        END IF;
        IF v_now IS NULL THEN  -- the clock always answers: cut short (see _weave_root_advance)
            CALL _weave_raise(50016, 'INTERRUPTED: the clock came back empty; nothing is changed');
        END IF;
        IF v_available > v_now THEN
            SET v_outcome = 'NOT_DUE';
            LEAVE proc;
        END IF;
        SELECT id, type, status, activation_seq, activation_id INTO v_step, v_step_type, v_step_status, v_k, v_activation
          FROM weave_steps WHERE instance_id = v_inst AND step_key = v_step_key FOR UPDATE;
        IF v_step IS NULL THEN
            CALL _weave_raise(50007, 'INVALID_STATE: the signal targets a step the instance does not have');
        END IF;

        IF v_k > v_seq THEN
            -- S-8: recovery moved the step on; an old signal never follows it into a new activation.
            SET v_disposition = 'STALE_ACTIVATION';
        ELSEIF v_k = v_seq AND (v_activation IS NOT NULL OR v_step_status <> 'PENDING') THEN
            -- A step reactivated as k is PENDING without an activation until the ROOT advance opens its wait: a
            -- signal for k is early there (S-10), as its acceptance judged it, and is handled below.
            SELECT id, kind, status, deadline_at INTO v_wait, v_wait_kind, v_wait_status, v_wait_deadline
              FROM weave_waits WHERE activation_id = v_activation AND kind IN ('SIGNAL', 'POLL_FINAL') FOR UPDATE;
            SET v_held = v_step_status = 'NEEDS_REVIEW' AND v_wait_status = 'WAITING' AND v_accepted < v_wait_deadline;
            IF v_wait IS NULL OR v_wait_status <> 'WAITING' THEN
                -- A wait that left WAITING settled its signals in that transaction (S-11); this one was not
                -- among them (its wait was closed by a path that predates it), so it gets the S-9 answer.
                SET v_disposition = 'STEP_SETTLED';
            ELSEIF v_step_status = 'ACTIVE' THEN
                -- The handler the step's own checkpoint runs.
                CALL _weave_step_advance(v_ns, v_inst, v_step_key, v_step_type, v_activation, v_now, v_outcome);
            END IF;
        END IF;

        IF v_disposition IS NOT NULL THEN
            UPDATE weave_signals SET status = 'REJECTED', disposition = v_disposition, consumed_at = v_now,
                                     version = version + 1
             WHERE id = in_signal_id;
            CALL _weave_event(v_ns, v_inst, 'SIGNAL_REJECTED', v_step_key, v_seq, v_now,
                              JSON_OBJECT('signal_id', CONCAT('sig_', in_signal_id), 'disposition', v_disposition),
                              'signal.reject', v_expires, NULL);
            SET v_outcome = 'REJECTED';
            LEAVE proc;
        END IF;

        IF v_outcome IN ('CONSUMED', 'EXPIRED') THEN
            -- The wait left WAITING, and with it every PENDING signal of its activation, this one included (S-11).
            LEAVE proc;
        END IF;
        -- Still PENDING: an early signal, or one whose step is in review. S-14: at expires_at it expires. Not so a
        -- signal that its wait's handler left to the round outcome stored in the inbox (INBOX_FIRST): it was
        -- accepted before the wait's deadline, and the outcome's consumer compares the two stored times (F-9), so
        -- it is looked at again shortly, however late the look, and never expired by the time of the scan. Nor one
        -- accepted on time for an open wait whose step is in review (S-13): the step's recovery answers it (reactivate
        -- STALE_ACTIVATION, resolve STEP_SETTLED, a cancel INSTANCE_SETTLED), or its wait takes it once a retry or a
        -- continue sends the step on, which makes it due again; until then nothing looks at it again (M-4.25).
        SELECT status INTO v_status FROM weave_signals WHERE id = in_signal_id FOR UPDATE;
        IF v_status = 'PENDING' AND v_held THEN
            UPDATE weave_signals SET available_at = TIMESTAMP'9999-12-31 00:00:00', version = version + 1
             WHERE id = in_signal_id;
            SET v_outcome = 'LATER';
        ELSEIF v_status = 'PENDING' THEN
            IF v_now >= v_expires AND v_outcome <> 'INBOX_FIRST' THEN
                UPDATE weave_signals SET status = 'EXPIRED', disposition = 'EXPIRED_UNMATCHED', consumed_at = v_now,
                                         version = version + 1
                 WHERE id = in_signal_id;
                CALL _weave_event(v_ns, v_inst, 'SIGNAL_EXPIRED', v_step_key, v_seq, v_now,
                     JSON_OBJECT('signal_id', CONCAT('sig_', in_signal_id), 'disposition', 'EXPIRED_UNMATCHED',
                                 'expires_at', DATE_FORMAT(v_expires, '%Y-%m-%dT%H:%i:%s.%fZ')), NULL, NULL, NULL);
                CALL _weave_audit(v_ns, v_inst, 0, 'weave.orchestrator', 'signal.expire', NULL, NULL, v_now,
                                  v_expires, NULL, JSON_OBJECT('signal_id', CONCAT('sig_', in_signal_id)), NULL);
                SET v_outcome = 'EXPIRED_UNMATCHED';
            ELSE
                UPDATE weave_signals SET available_at = IF(v_now >= v_expires, v_now + INTERVAL 1 SECOND, v_expires),
                                         version = version + 1
                 WHERE id = in_signal_id;
                IF v_outcome = 'GONE' THEN
                    SET v_outcome = 'LATER';
                END IF;
            END IF;
        END IF;
    END proc;
    COMMIT;
    SELECT v_outcome AS outcome, NOT (@weave_made_due <=> v_due_before) AS made_due;
END
