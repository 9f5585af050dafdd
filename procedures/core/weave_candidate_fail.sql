-- Failure bookkeeping (R-12): only the next check time, the attempt count and the error move, and only
-- when the candidate is still the version that failed; due times, deadlines, results and budgets are
-- never touched by a failure. Nothing stalls silently (R-18): a candidate that fails a third time in a
-- row with the same error that is not a transient driver error (those start with their errno) will not
-- succeed by waiting. For a checkpoint, its step (or, for ROOT, the instance) goes to review
-- CANDIDATE_FAILING with the error. A task outcome or a signal stays due (it is a fact, kept to be
-- applied), and the step it is for goes to review the same way while it is ACTIVE, else the instance:
-- once, while no CANDIDATE_FAILING reason of the instance is open. A checkpoint whose step is no longer ACTIVE
-- asks the instance the same way, once. That takes the instance lock first
-- (R-3), so the bookkeeping is then written under it.
CREATE PROCEDURE weave_candidate_fail(
        IN in_class   VARCHAR(16),
        IN in_id      BIGINT UNSIGNED,
        IN in_version BIGINT UNSIGNED,
        IN in_error   VARCHAR(4096))
    COMMENT 'Description: records a failed advance of a candidate and backs it off (100 ms doubling, at most 60 s).
Parameters: in_class (CHECKPOINT, INBOX or SIGNAL), in_id, in_version (as scanned), in_error.
Result set: recorded (1, or 0 when the candidate had changed or gone), review (1 when the failure opened a review
reason CANDIDATE_FAILING: the candidate failed 3 times in a row with the same non-transient error; a task outcome
or a signal stays due, and opens that reason once while none of its instance is open; so does a checkpoint whose
step is no longer ACTIVE).
Errors: 50100 INVALID_ARGUMENT for an unknown class.
Rules: R-12, R-18.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_now DATETIME(6);
    DECLARE v_rows INT DEFAULT 0;
    DECLARE v_review TINYINT DEFAULT 0;
    DECLARE v_inst BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_ns BIGINT UNSIGNED;
    DECLARE v_locked BIGINT UNSIGNED;  -- the instance's event_seq, once locked
    DECLARE v_identity BIGINT UNSIGNED;  -- the instance's starting identity, for its lock
    DECLARE v_step_key VARCHAR(64);
    DECLARE v_what LONGTEXT;  -- the candidate, as an operator finds it: its class, and its signal, task or checkpoint
    DECLARE v_last VARCHAR(1024);
    DECLARE v_attempts INT UNSIGNED;
    DECLARE v_step BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_seq INT UNSIGNED DEFAULT 0;
    DECLARE v_open INT DEFAULT 0;  -- open CANDIDATE_FAILING reasons of the instance
    DECLARE v_tx BOOLEAN DEFAULT FALSE;  -- TRUE once this routine has started its own transaction
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN IF v_tx THEN ROLLBACK; END IF; RESIGNAL; END;
    CALL _weave_transaction_claim('weave_candidate_fail', v_tx);
    IF in_class = 'CHECKPOINT' THEN
        SELECT instance_id, step_key, last_error, attempts,
               JSON_OBJECT('class', in_class, 'kind', kind, 'step_key', NULLIF(step_key, ''))
          INTO v_inst, v_step_key, v_last, v_attempts, v_what
          FROM weave_pending_advances WHERE id = in_id AND version = in_version;
    ELSEIF in_class = 'INBOX' THEN
        SELECT e.instance_id, t.step_key, e.last_error, e.attempts,
               JSON_OBJECT('class', in_class, 'task_id', CONCAT('tsk_', e.task_id), 'step_key', t.step_key)
          INTO v_inst, v_step_key, v_last, v_attempts, v_what
          FROM pulse_inbox e LEFT JOIN pulse_tasks t ON t.id = e.task_id
         WHERE e.id = in_id AND e.version = in_version AND e.state = 'PENDING';
    ELSEIF in_class = 'SIGNAL' THEN
        SELECT instance_id, target_step_key, last_error, attempts,
               JSON_OBJECT('class', in_class, 'signal_id', CONCAT('sig_', id), 'step_key', target_step_key)
          INTO v_inst, v_step_key, v_last, v_attempts, v_what
          FROM weave_signals WHERE id = in_id AND version = in_version AND status = 'PENDING';
    ELSE
        CALL _weave_raise(50100, 'INVALID_ARGUMENT: unknown candidate class');
    END IF;
    IF v_inst IS NOT NULL AND v_attempts >= 2 AND v_last <=> LEFT(in_error, 1024)
       AND NOT (in_error REGEXP '^[0-9]') THEN
        SELECT namespace_id, credential_id INTO v_ns, v_identity FROM weave_instances WHERE id = v_inst;
        CALL _weave_instance_lock(v_inst, v_identity, v_locked);
        SET v_review = (v_locked IS NOT NULL);
    END IF;
    CALL _weave_now(v_now);  -- R-2: after the instance lock, where one was taken
    IF in_class = 'CHECKPOINT' THEN
        UPDATE weave_pending_advances
           SET attempts = attempts + 1, last_error = LEFT(in_error, 1024), version = version + 1,
               available_at = GREATEST(due_at, v_now + INTERVAL LEAST(100 * POW(2, LEAST(attempts, 20)), 60000) * 1000 MICROSECOND),
               deferred_for = NULL  -- a failing look leaves its line (keeping its place) so as not to hold it up
         WHERE id = in_id AND version = in_version;
    ELSEIF in_class = 'INBOX' THEN
        UPDATE pulse_inbox
           SET attempts = attempts + 1, last_error = LEFT(in_error, 1024), version = version + 1,
               available_at = v_now + INTERVAL LEAST(100 * POW(2, LEAST(attempts, 20)), 60000) * 1000 MICROSECOND
         WHERE id = in_id AND version = in_version AND state = 'PENDING';
    ELSE
        UPDATE weave_signals
           SET attempts = attempts + 1, last_error = LEFT(in_error, 1024), version = version + 1,
               available_at = v_now + INTERVAL LEAST(100 * POW(2, LEAST(attempts, 20)), 60000) * 1000 MICROSECOND
         WHERE id = in_id AND version = in_version AND status = 'PENDING';
    END IF;
    SET v_rows = ROW_COUNT();
    IF v_review = 1 AND v_rows = 1 THEN
        IF v_step_key <> '' THEN
            SELECT id, activation_seq INTO v_step, v_seq FROM weave_steps
             WHERE instance_id = v_inst AND step_key = v_step_key AND status = 'ACTIVE' FOR UPDATE;
        END IF;
        IF in_class <> 'CHECKPOINT' OR v_step IS NULL THEN
            -- Once while a CANDIDATE_FAILING reason of the instance is open. A checkpoint on an ACTIVE step asks once:
            -- its review removes it. An outcome or a signal stays, and asks once. So does a checkpoint whose step is
            -- no longer ACTIVE (its review did not remove it): it opened another reason at every failure, one a
            -- minute while the fault lasted.
            SELECT COUNT(*) INTO v_open FROM weave_review_reasons
             WHERE instance_id = v_inst AND code = 'CANDIDATE_FAILING' AND closed_at IS NULL;
            SET v_review = (v_open = 0);
        END IF;
    END IF;
    IF v_review = 1 AND v_rows = 1 THEN
        IF v_step IS NOT NULL THEN
            -- The reason names the decision that failed, as the instance's own does: which signal, task or checkpoint.
            CALL _weave_step_review(v_ns, v_inst, v_step, v_step_key, v_seq, 'CANDIDATE_FAILING',
                                    CONCAT('failed ', v_attempts + 1, ' times: ', LEFT(in_error, 900)), 0, v_what,
                                    v_now);
            IF in_class <> 'CHECKPOINT' THEN
                -- A signal of a SIGNAL step failed: the wait's checkpoint goes with the step's review, as at a
                -- signal's proof mismatch. A checkpoint of a step not ACTIVE is one that keeps failing or none
                -- (M-4.18); its run would only remove it, and the wait waits for the step's recovery.
                DELETE FROM weave_pending_advances
                 WHERE instance_id = v_inst AND step_key = v_step_key AND kind = 'SIGNAL';
            END IF;
        ELSE
            -- On the instance no step names what failed: the reason says which decision it was, for the operator
            -- who fixes its cause and then retries.
            CALL _weave_review_open(v_ns, v_inst, 'CANDIDATE_FAILING', '', 0,
                 JSON_OBJECT('detail', CONCAT('failed ', v_attempts + 1, ' times: ', LEFT(in_error, 900)),
                             'candidate', JSON_EXTRACT(v_what, '$')), v_now);
            CALL _weave_audit(v_ns, v_inst, 0, 'weave.orchestrator', 'instance.review', NULL, NULL, v_now,
                              NULL, NULL, JSON_OBJECT('code', 'CANDIDATE_FAILING', 'error', LEFT(in_error, 900),
                                                      'candidate', JSON_EXTRACT(v_what, '$')),
                              NULL);
        END IF;
    ELSE
        SET v_review = 0;
    END IF;
    COMMIT;
    SELECT v_rows AS recorded, v_review AS review;
END
