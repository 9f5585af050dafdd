-- C-4 `retry`: the action for a decision that failed for a cause now fixed, and for the reasons of the instance itself
-- that no step's action closes. CANDIDATE_FAILING (R-18): a decision failed a third time in a row with the same error.
-- When no active step owned it (a ROOT checkpoint, an early signal, an outcome or checkpoint whose step is no longer
-- ACTIVE) the reason is the instance's own; otherwise its step's, and that step goes on where it stopped, in its own
-- activation: its wait keeps its due time or deadline and its signals accepted meanwhile, its poll its rounds and
-- budget, its task its outcome (one recorded while the step was in review is applied now). Reactivate would start
-- the step again from now and answer those signals STALE_ACTIVATION; resolve would need their payload copied by hand.
-- A step goes on only while what it waits for is still there and CANDIDATE_FAILING is all it is in review for; else
-- its reason stays for its own reactivate or resolve. A poll whose round was answered while it was in review stopped
-- there: after a PENDING answer, before its deadline and with rounds left, it goes on between rounds; after another,
-- it stays. OWNERSHIP_MISMATCH (R-6): a task's outcome whose ownership did not verify was set aside, applied to
-- nothing; the person who repaired the rows retries it. Retry closes those reasons and makes the decisions due again
-- at once, their failures counted from zero, the outcomes set aside PENDING again: each is verified and decided by
-- its own decision, with that decision's checks, so one that still fails, or still does not verify, opens its reason
-- again. Nothing is repaired by guessing. Nothing races a request in flight, so no task of the instance needs to be
-- settled first (unlike reactivate and resolve): a step's task still running reports to the step that waits for it.
CREATE PROCEDURE weave_instance_retry(
        IN in_token           VARCHAR(512),
        IN in_namespace       VARCHAR(200),
        IN in_workflow_id     VARCHAR(64),
        IN in_reason          VARCHAR(4096),
        IN in_idempotency_key VARCHAR(512))
    COMMENT 'Description: closes the instance''s own CANDIDATE_FAILING and OWNERSHIP_MISMATCH reasons, and the
CANDIDATE_FAILING reasons of its steps that can go on in their own activation (ACTIVE again, their checkpoint due at
once, a task outcome recorded while in review PENDING again); makes its failing checkpoints, task outcomes and signals
due at once with no failures counted, and its task outcomes set aside for their ownership PENDING again, to be
verified again; the instance reopens when no review reason is left.
Parameters: in_token (workflows:review and every queue of the definition), in_namespace, in_workflow_id,
in_reason (1-1024 chars), in_idempotency_key.
Result set: workflow_id, closed (reasons closed), retried (decisions made due), steps (JSON array of the steps that
went on), status, replayed.
Result sets 2-6: the instance as it is now, as weave_instance_get answers it (the action''s scope is enough).
Errors: 50001 UNAUTHENTICATED, 50002 FORBIDDEN, 50003 NOT_FOUND, 50005 IDEMPOTENCY_CONFLICT, 50007 INVALID_STATE
(the instance is not NEEDS_REVIEW, or has nothing to retry: the message names a step in review and why),
50111 REASON_INVALID, 50113 IDEMPOTENCY_KEY_INVALID.
Rules: C-4, C-5, C-6, R-6, R-12, R-18.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_now DATETIME(6);
    DECLARE v_ns BIGINT UNSIGNED;
    DECLARE v_cred BIGINT UNSIGNED;
    DECLARE v_actor VARCHAR(128);
    DECLARE v_id BIGINT UNSIGNED;
    DECLARE v_replayed TINYINT;
    DECLARE v_status VARCHAR(16);
    DECLARE v_closed INT DEFAULT 0;
    DECLARE v_retried INT DEFAULT 0;
    DECLARE v_step VARCHAR(64) DEFAULT NULL;  -- a step in review, named when there is nothing to retry
    DECLARE v_why VARCHAR(128) DEFAULT NULL;  -- why the step named cannot go on where it stopped
    DECLARE v_steps LONGTEXT DEFAULT '[]';  -- the steps that go on, in key order
    DECLARE v_after VARCHAR(64) DEFAULT '';  -- the last step looked at (steps are taken in key order)
    DECLARE v_step_id BIGINT UNSIGNED;
    DECLARE v_key VARCHAR(64);
    DECLARE v_type VARCHAR(16);
    DECLARE v_seq INT UNSIGNED;
    DECLARE v_activation BIGINT UNSIGNED;
    DECLARE v_opened DATETIME(6);  -- when its review opened
    DECLARE v_stays VARCHAR(128);  -- NULL: the step goes on; else why it stays in review
    DECLARE v_due DATETIME(6);  -- when its checkpoint is due
    DECLARE v_reopened TINYINT DEFAULT 0;
    DECLARE v_response LONGTEXT;
    DECLARE v_digest CHAR(64) DEFAULT SHA2(CONCAT_WS('|', 'retry', COALESCE(in_reason, '')), 256);
    DECLARE v_tx BOOLEAN DEFAULT FALSE;  -- TRUE once this routine has started its own transaction
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN IF v_tx THEN ROLLBACK; END IF; RESIGNAL; END;
    CALL _weave_transaction_begin('weave_instance_retry', v_tx);  -- refused inside a caller's transaction (R-1)
    CALL _weave_control_begin(in_token, in_namespace, in_workflow_id, 'workflows:review', 'instance.retry',
                              in_reason, in_idempotency_key, v_digest, FALSE, v_ns, v_cred, v_actor, v_id, v_replayed,
                              v_now);
    IF v_replayed = 1 THEN
        -- The counts the action answered, from its audit row: they are not in the instance any more.
        SELECT response INTO v_response FROM weave_audit FORCE INDEX (ix_audit_instance)
         WHERE instance_id = v_id AND action = 'instance.retry' AND idempotency_key = in_idempotency_key LIMIT 1;
        SET v_closed = JSON_VALUE(v_response, '$.closed'), v_retried = JSON_VALUE(v_response, '$.retried'),
            v_steps = COALESCE(JSON_QUERY(v_response, '$.steps'), '[]');  -- an answer from before steps went on
        SELECT status INTO v_status FROM weave_instances WHERE id = v_id;
    ELSE
        SELECT status INTO v_status FROM weave_instances WHERE id = v_id;
        IF v_status <> 'NEEDS_REVIEW' THEN
            CALL _weave_raise(50007, CONCAT('INVALID_STATE: the instance is ', v_status, ', not NEEDS_REVIEW'));
        END IF;
        -- The steps in review for a failing decision, in key order, each locked (R-3: steps before the child records
        -- below), each going on in its own activation when what it waits for is still there.
        steps: LOOP
            SET v_step_id = NULL;
            SELECT s.id, s.step_key, s.type, s.activation_seq, s.activation_id,
                   (SELECT MIN(r.opened_at) FROM weave_review_reasons r FORCE INDEX (ix_review_instance)
                     WHERE r.instance_id = v_id AND r.closed_at IS NULL AND r.step_key = s.step_key)
              INTO v_step_id, v_key, v_type, v_seq, v_activation, v_opened
              FROM weave_steps s
             WHERE s.instance_id = v_id AND s.step_key > v_after AND s.status = 'NEEDS_REVIEW'
               AND EXISTS (SELECT 1 FROM weave_review_reasons r FORCE INDEX (ix_review_instance)
                            WHERE r.instance_id = v_id AND r.closed_at IS NULL AND r.step_key = s.step_key
                              AND r.code = 'CANDIDATE_FAILING')
             ORDER BY s.step_key LIMIT 1 FOR UPDATE;
            IF v_step_id IS NULL THEN
                LEAVE steps;
            END IF;
            SET v_after = v_key;
            -- What it waits for, read under the instance lock that every writer of these rows holds.
            SELECT CASE
                       WHEN a.id IS NULL OR a.ended_at IS NOT NULL THEN 'its activation ended'
                       WHEN EXISTS (SELECT 1 FROM weave_review_reasons r FORCE INDEX (ix_review_instance)
                                     WHERE r.instance_id = v_id AND r.closed_at IS NULL AND r.step_key = v_key
                                       AND r.code <> 'CANDIDATE_FAILING') THEN 'in review for more'
                       WHEN v_type = 'TASK' THEN
                           IF(EXISTS (SELECT 1 FROM pulse_tasks t WHERE t.activation_id = a.id), NULL, 'it has no task')
                       -- A poll whose round was answered while it was in review stopped there, the answer recorded;
                       -- one that answered PENDING, before the poll deadline and with rounds left, goes on between
                       -- rounds, as that answer would have had it. Another answer is for resolve or reactivate.
                       WHEN v_type = 'POLL' THEN
                           IF(EXISTS (SELECT 1 FROM weave_poll_states p
                                       WHERE p.activation_id = a.id
                                         AND (p.state IN ('WAITING', 'IN_FLIGHT')
                                              OR (p.state = 'STOPPED' AND p.stop_reason IS NULL
                                                  AND p.rounds_used < p.max_rounds
                                                  AND EXISTS (SELECT 1 FROM weave_poll_rounds r
                                                               WHERE r.activation_id = a.id
                                                                 AND r.round_no = p.rounds_used
                                                                 AND r.outcome = 'POLL_PENDING'
                                                                 AND r.result_at < p.poll_deadline)))),
                              NULL, 'its poll stopped in review')
                       ELSE IF(EXISTS (SELECT 1 FROM weave_waits w
                                        WHERE w.activation_id = a.id AND w.kind = v_type AND w.status = 'WAITING'),
                               NULL, 'its wait has ended') END,
                   -- The time of the step's own earliest fact, as its checkpoint had it: a timer's due time; a wait's
                   -- deadline, or the acceptance of a signal PENDING for it; a poll's next round (between rounds) or
                   -- its deadline. Due at once when past; decided in the order of the instance's facts (F-9).
                   CASE v_type
                       WHEN 'TIMER' THEN (SELECT w.due_at FROM weave_waits w
                                           WHERE w.activation_id = v_activation AND w.kind = 'TIMER')
                       ELSE LEAST(
                           COALESCE((SELECT MIN(g.accepted_at) FROM weave_signals g FORCE INDEX (ix_signal_target)
                                      WHERE g.instance_id = v_id AND g.target_step_key = v_key
                                        AND g.target_activation_seq = v_seq AND g.status = 'PENDING'),
                                    TIMESTAMP'9999-12-31 00:00:00'),
                           IF(v_type = 'SIGNAL',
                              (SELECT w.deadline_at FROM weave_waits w
                                WHERE w.activation_id = v_activation AND w.kind = 'SIGNAL'),
                              (SELECT IF(p.state = 'IN_FLIGHT', p.poll_deadline,
                                         LEAST(COALESCE(p.next_poll_at, p.poll_deadline), p.poll_deadline))
                                 FROM weave_poll_states p WHERE p.activation_id = v_activation))) END
              INTO v_stays, v_due
              FROM (SELECT 1) one LEFT JOIN weave_activations a ON a.id = v_activation;
            IF v_stays IS NOT NULL THEN
                SET v_step = COALESCE(v_step, v_key), v_why = COALESCE(v_why, v_stays);
                ITERATE steps;
            END IF;
            UPDATE weave_steps SET status = 'ACTIVE', updated_at = v_now WHERE id = v_step_id;
            UPDATE weave_review_reasons FORCE INDEX (ix_review_instance) SET closed_at = v_now, closed_by = 'retry'
             WHERE instance_id = v_id AND closed_at IS NULL AND step_key = v_key;
            SET v_closed = v_closed + ROW_COUNT();
            IF v_type = 'TASK' THEN
                -- Its task's outcome, consumed while the step was in review, was only recorded (TASK_OUTCOME_RECORDED):
                -- it is due again, and applied to the step that waits for it again. A task still running reports to
                -- it; an outcome still failing is made due below with the others.
                UPDATE pulse_inbox e STRAIGHT_JOIN pulse_tasks t ON t.id = e.task_id AND t.activation_id = v_activation
                   SET e.state = 'PENDING', e.consumed_at = NULL, e.attempts = 0, e.last_error = NULL,
                       e.version = e.version + 1
                 WHERE e.instance_id = v_id AND e.state = 'CONSUMED' AND e.consumed_at >= v_opened
                   AND e.kind <> 'CANCELLED';
                SET v_retried = v_retried + ROW_COUNT();
            ELSE
                IF v_type = 'POLL' THEN
                    -- Between rounds again, after a PENDING answer recorded while the step was in review (above).
                    UPDATE weave_poll_states SET state = 'WAITING', updated_at = v_now
                     WHERE activation_id = v_activation AND state = 'STOPPED';
                END IF;
                -- Its checkpoint, with its failures counted from zero, due at that time: the step's handler derives
                -- the rest from the stored facts (a wait or poll whose time passed meanwhile ends as its rules say).
                CALL _weave_checkpoint_set(v_ns, v_id, v_key, v_type, v_activation, v_due, v_now);
                IF v_type <> 'TIMER' THEN
                    -- Its signals are candidates again, due at once: one kept for the step's recovery was looked at
                    -- no more (weave_signal_process), and a step that goes on keeps none (M-4.25).
                    UPDATE weave_signals FORCE INDEX (ix_signal_target)
                       SET available_at = LEAST(available_at, v_now), version = version + 1
                     WHERE instance_id = v_id AND target_step_key = v_key AND target_activation_seq = v_seq
                       AND status = 'PENDING';
                END IF;
                SET v_retried = v_retried + 1;
            END IF;
            CALL _weave_event(v_ns, v_id, 'STEP_RETRIED', v_key, v_seq, v_now,
                              JSON_OBJECT('actor', v_actor, 'reason', in_reason), NULL, NULL, NULL);
            SET v_steps = JSON_ARRAY_APPEND(v_steps, '$', v_key);
        END LOOP;
        -- The instance's own range (R-3), as deadline closes its reason.
        UPDATE weave_review_reasons FORCE INDEX (ix_review_instance) SET closed_at = v_now, closed_by = 'retry'
         WHERE instance_id = v_id AND closed_at IS NULL AND code IN ('CANDIDATE_FAILING', 'OWNERSHIP_MISMATCH')
           AND step_key = '';
        SET v_closed = v_closed + ROW_COUNT();
        IF v_closed = 0 THEN
            IF v_step IS NULL THEN
                SELECT step_key INTO v_step FROM weave_review_reasons FORCE INDEX (ix_review_instance)
                 WHERE instance_id = v_id AND closed_at IS NULL AND step_key <> '' ORDER BY opened_at, id LIMIT 1;
            END IF;
            CALL _weave_raise(50007, CONCAT('INVALID_STATE: nothing to retry', COALESCE(
                CONCAT('; reactivate or resolve its step ', LEFT(v_step, 32), COALESCE(CONCAT(' (', v_why, ')'), '')),
                '')));
        END IF;
        -- Its decisions, in R-3's order of child records: outcomes of its tasks, signals, checkpoints. Each is due
        -- again at once, or at its own due time if that is later, never later than it already was; the new version
        -- makes a failure still being reported for the old one record nothing (R-12). An outcome set aside for its
        -- ownership was due when it was (its time is its own, and orders it among the instance's facts as before).
        UPDATE pulse_inbox FORCE INDEX (ix_inbox_instance)
           SET state = 'PENDING', consumed_at = NULL, attempts = 0, last_error = NULL, version = version + 1,
               available_at = LEAST(available_at, v_now)
         WHERE instance_id = v_id AND (state = 'MISMATCH' OR (state = 'PENDING' AND attempts > 0));
        SET v_retried = v_retried + ROW_COUNT();
        UPDATE weave_signals FORCE INDEX (ix_signal_target)
           SET attempts = 0, last_error = NULL, version = version + 1, available_at = LEAST(available_at, v_now)
         WHERE instance_id = v_id AND status = 'PENDING' AND attempts > 0;
        SET v_retried = v_retried + ROW_COUNT();
        -- A checkpoint kept failing while its step waits in review is that step's: its reactivate or resolve
        -- decides about it (M-4.18).
        UPDATE weave_pending_advances c FORCE INDEX (uq_checkpoint)
          LEFT JOIN weave_steps s ON s.instance_id = c.instance_id AND s.step_key = c.step_key
           SET c.attempts = 0, c.last_error = NULL, c.version = c.version + 1,
               c.available_at = LEAST(c.available_at, GREATEST(c.due_at, v_now))
         WHERE c.instance_id = v_id AND c.attempts > 0 AND NOT s.status <=> 'NEEDS_REVIEW';
        SET v_retried = v_retried + ROW_COUNT();
        CALL _weave_event(v_ns, v_id, 'INSTANCE_RETRIED', '', 0, v_now,
             JSON_OBJECT('closed', v_closed + 0, 'retried', v_retried + 0, 'steps', JSON_EXTRACT(v_steps, '$'),
                         'actor', v_actor, 'reason', in_reason),
             NULL, NULL, NULL);
        CALL _weave_review_reopen(v_ns, v_id, v_now, v_reopened);
        CALL _weave_audit(v_ns, v_id, v_cred, v_actor, 'instance.retry', in_idempotency_key, v_digest, v_now, NULL,
                          in_reason, JSON_OBJECT('closed', v_closed + 0, 'retried', v_retried + 0,
                                                 'steps', JSON_EXTRACT(v_steps, '$'), 'reopened', v_reopened = 1),
                          JSON_OBJECT('closed', v_closed + 0, 'retried', v_retried + 0,
                                      'steps', JSON_EXTRACT(v_steps, '$')));
        -- It was in review; it runs again exactly when the last reason closed (not read again).
        SET v_status = IF(v_reopened = 1, 'RUNNING', 'NEEDS_REVIEW');
    END IF;
    COMMIT;
    SELECT in_workflow_id AS workflow_id, v_closed AS closed, v_retried AS retried, v_steps AS steps,
           v_status AS status, v_replayed AS replayed;
    -- The instance as it is now, for the credential that acted (its scope is enough, 07-api), in its own snapshot:
    -- REPEATABLE READ whatever the session's level, under which a snapshot would read uncommitted or later rows.
    SET TRANSACTION ISOLATION LEVEL REPEATABLE READ;
    START TRANSACTION WITH CONSISTENT SNAPSHOT;
    CALL _weave_instance_show(in_namespace, CAST(SUBSTRING(in_workflow_id, 4) AS UNSIGNED), NULL);
    COMMIT;
END
