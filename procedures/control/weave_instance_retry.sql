-- C-4 `retry`: the action for the review reasons of the instance itself that no step's action closes, once their
-- cause is fixed. CANDIDATE_FAILING (R-18): a decision failed a third time in a row with the same error, and no active
-- step owns it (a ROOT checkpoint, an early signal, an outcome or checkpoint whose step is no longer ACTIVE).
-- OWNERSHIP_MISMATCH (R-6): a task's outcome whose ownership did not verify was set aside, applied to nothing; the
-- person who repaired the rows retries it. Retry closes those reasons and makes the decisions due again at once,
-- their failures counted from zero, the outcomes set aside PENDING again: each is verified and decided by its own
-- decision, with that decision's checks, so one that still fails, or still does not verify, opens its reason again.
-- Nothing is repaired by guessing. A checkpoint of a step in review is left to that step's action. Nothing races a
-- request in flight, so no task of the instance needs to be settled first (unlike reactivate and resolve).
CREATE PROCEDURE weave_instance_retry(
        IN in_token           VARCHAR(512),
        IN in_namespace       VARCHAR(200),
        IN in_workflow_id     VARCHAR(64),
        IN in_reason          VARCHAR(4096),
        IN in_idempotency_key VARCHAR(512))
    COMMENT 'Description: closes the instance''s own CANDIDATE_FAILING and OWNERSHIP_MISMATCH reasons, makes its failing
checkpoints, task outcomes and signals due at once with no failures counted, and its task outcomes set aside for their
ownership PENDING again, to be verified again; the instance reopens when no review reason is left.
Parameters: in_token (workflows:review and every queue of the definition), in_namespace, in_workflow_id,
in_reason (1-1024 chars), in_idempotency_key.
Result set: workflow_id, closed (reasons closed), retried (decisions made due), status, replayed.
Result sets 2-6: the instance as it is now, as weave_instance_get answers it (the action''s scope is enough).
Errors: 50001 UNAUTHENTICATED, 50002 FORBIDDEN, 50003 NOT_FOUND, 50005 IDEMPOTENCY_CONFLICT, 50007 INVALID_STATE
(the instance is not NEEDS_REVIEW, or has no such reason of its own open), 50111 REASON_INVALID,
50113 IDEMPOTENCY_KEY_INVALID.
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
        SET v_closed = JSON_VALUE(v_response, '$.closed'), v_retried = JSON_VALUE(v_response, '$.retried');
        SELECT status INTO v_status FROM weave_instances WHERE id = v_id;
    ELSE
        SELECT status INTO v_status FROM weave_instances WHERE id = v_id;
        IF v_status <> 'NEEDS_REVIEW' THEN
            CALL _weave_raise(50007, CONCAT('INVALID_STATE: the instance is ', v_status, ', not NEEDS_REVIEW'));
        END IF;
        -- The instance's own range (R-3), as deadline closes its reason.
        UPDATE weave_review_reasons FORCE INDEX (ix_review_instance) SET closed_at = v_now, closed_by = 'retry'
         WHERE instance_id = v_id AND closed_at IS NULL AND code IN ('CANDIDATE_FAILING', 'OWNERSHIP_MISMATCH')
           AND step_key = '';
        SET v_closed = ROW_COUNT();
        IF v_closed = 0 THEN
            SELECT step_key INTO v_step FROM weave_review_reasons FORCE INDEX (ix_review_instance)
             WHERE instance_id = v_id AND closed_at IS NULL AND step_key <> '' ORDER BY opened_at, id LIMIT 1;
            CALL _weave_raise(50007, CONCAT('INVALID_STATE: nothing of the instance itself to retry', COALESCE(
                                                CONCAT('; reactivate or resolve its step ', LEFT(v_step, 32)), '')));
        END IF;
        -- Its decisions, in R-3's order of child records: outcomes of its tasks, signals, checkpoints. Each is due
        -- again at once, or at its own due time if that is later, never later than it already was; the new version
        -- makes a failure still being reported for the old one record nothing (R-12). An outcome set aside for its
        -- ownership was due when it was (its time is its own, and orders it among the instance's facts as before).
        UPDATE pulse_inbox FORCE INDEX (ix_inbox_instance)
           SET state = 'PENDING', consumed_at = NULL, attempts = 0, last_error = NULL, version = version + 1,
               available_at = LEAST(available_at, v_now)
         WHERE instance_id = v_id AND (state = 'MISMATCH' OR (state = 'PENDING' AND attempts > 0));
        SET v_retried = ROW_COUNT();
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
             JSON_OBJECT('closed', v_closed + 0, 'retried', v_retried + 0, 'actor', v_actor, 'reason', in_reason),
             NULL, NULL, NULL);
        CALL _weave_review_reopen(v_ns, v_id, v_now, v_reopened);
        CALL _weave_audit(v_ns, v_id, v_cred, v_actor, 'instance.retry', in_idempotency_key, v_digest, v_now, NULL,
                          in_reason, JSON_OBJECT('closed', v_closed + 0, 'retried', v_retried + 0,
                                                 'reopened', v_reopened = 1),
                          JSON_OBJECT('closed', v_closed + 0, 'retried', v_retried + 0));
        -- It was in review; it runs again exactly when the last reason closed (not read again).
        SET v_status = IF(v_reopened = 1, 'RUNNING', 'NEEDS_REVIEW');
    END IF;
    COMMIT;
    SELECT in_workflow_id AS workflow_id, v_closed AS closed, v_retried AS retried, v_status AS status,
           v_replayed AS replayed;
    -- The instance as it is now, for the credential that acted (its scope is enough, 07-api), in its own snapshot:
    -- REPEATABLE READ whatever the session's level, under which a snapshot would read uncommitted or later rows.
    SET TRANSACTION ISOLATION LEVEL REPEATABLE READ;
    START TRANSACTION WITH CONSISTENT SNAPSHOT;
    CALL _weave_instance_show(in_namespace, CAST(SUBSTRING(in_workflow_id, 4) AS UNSIGNED), NULL);
    COMMIT;
END
