-- C-4 `deadline`: a later instance deadline, never an earlier one. It closes an open INSTANCE_DEADLINE
-- reason, and affects only later activations and the new-work check of R-8: due times, wait deadlines
-- and expiries already set keep the deadline that was in force when they were set (T-1).
CREATE PROCEDURE weave_instance_deadline(
        IN in_token           VARCHAR(512),
        IN in_namespace       VARCHAR(200),
        IN in_workflow_id     VARCHAR(64),
        IN in_deadline_at     DATETIME(6),
        IN in_extend_ms       BIGINT,
        IN in_reason          VARCHAR(4096),
        IN in_idempotency_key VARCHAR(512))
    COMMENT 'Description: moves the instance deadline later (exactly one of in_deadline_at, in_extend_ms from the
current deadline); closes INSTANCE_DEADLINE; the instance reopens when no review reason is left.
Parameters: in_token (workflows:review and every queue of the definition), in_namespace, in_workflow_id,
in_deadline_at (UTC) or in_extend_ms (> 0; the new deadline at most 9999-12-31), in_reason (1-1024 chars),
in_idempotency_key.
Result set: workflow_id, deadline_at, status, replayed.
Result sets 2-6: the instance as it is now, as weave_instance_get answers it (the action''s scope is enough).
Errors: 50001 UNAUTHENTICATED, 50002 FORBIDDEN, 50003 NOT_FOUND, 50005 IDEMPOTENCY_CONFLICT, 50007 INVALID_STATE,
50111 REASON_INVALID, 50113 IDEMPOTENCY_KEY_INVALID, 50118 DEADLINE_INVALID (not a valid time later than the
current one and than now, or after 9999-12-31).
Rules: C-4, C-6, T-1, R-8.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_now DATETIME(6);
    DECLARE v_ns BIGINT UNSIGNED;
    DECLARE v_cred BIGINT UNSIGNED;
    DECLARE v_actor VARCHAR(128);
    DECLARE v_id BIGINT UNSIGNED;
    DECLARE v_replayed TINYINT;
    DECLARE v_status VARCHAR(16);
    DECLARE v_old DATETIME(6);
    DECLARE v_new DATETIME(6);
    DECLARE v_reopened TINYINT DEFAULT 0;
    DECLARE v_digest CHAR(64) DEFAULT SHA2(CONCAT_WS('|', 'deadline', COALESCE(in_reason, ''),
        COALESCE(DATE_FORMAT(in_deadline_at, '%Y-%m-%dT%H:%i:%s.%f'), '-'), COALESCE(in_extend_ms, '-')), 256);
    DECLARE v_tx BOOLEAN DEFAULT FALSE;  -- TRUE once this routine has started its own transaction
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN IF v_tx THEN ROLLBACK; END IF; RESIGNAL; END;
    CALL _weave_transaction_begin('weave_instance_deadline', v_tx);  -- refused inside a caller's transaction (R-1)
    CALL _weave_control_begin(in_token, in_namespace, in_workflow_id, 'workflows:review', 'instance.deadline',
                              in_reason, in_idempotency_key, v_digest, FALSE, v_ns, v_cred, v_actor, v_id, v_replayed,
                              v_now);
    SELECT status, deadline_at INTO v_status, v_old FROM weave_instances WHERE id = v_id;
    IF v_replayed = 0 THEN
        IF v_status NOT IN ('RUNNING', 'NEEDS_REVIEW') THEN
            CALL _weave_raise(50007, CONCAT('INVALID_STATE: cannot move the deadline of an instance that is ', v_status));
        END IF;
        IF (in_deadline_at IS NULL) = (in_extend_ms IS NULL) OR in_extend_ms <= 0 THEN
            CALL _weave_raise(50118, 'DEADLINE_INVALID: give exactly one of deadline_at and a positive extend_ms');
        END IF;
        -- Checked before it is computed: past the last representable time the sum is an overflow error (1441, or
        -- 1690 for the product), not a value.
        IF in_extend_ms > TIMESTAMPDIFF(MICROSECOND, v_old, TIMESTAMP'9999-12-31 23:59:59.999999') DIV 1000 THEN
            CALL _weave_raise(50118, 'DEADLINE_INVALID: the new deadline would be after 9999-12-31');
        END IF;
        SET v_new = COALESCE(in_deadline_at, v_old + INTERVAL in_extend_ms * 1000 MICROSECOND);
        -- A date that is no time (0000-00-00, a zero month or day: a session without NO_ZERO_DATE passes it) is NULL
        -- to COALESCE, so v_new is NULL then.
        IF v_new IS NULL OR v_new <= v_old THEN
            CALL _weave_raise(50118, 'DEADLINE_INVALID: the new deadline must be a valid time after the current one');
        END IF;
        -- A deadline that has passed already would send the instance back to review at once: an action that answers
        -- RUNNING and undoes itself a moment later. Said with the time it gives and the clock's.
        IF v_new <= v_now THEN
            CALL _weave_raise(50118, CONCAT('DEADLINE_INVALID: ', IF(in_deadline_at IS NULL, 'extend_ms', 'deadline_at'),
                                            ' gives ', DATE_FORMAT(v_new, '%Y-%m-%dT%H:%i:%s.%fZ'),
                                            ', which has passed: the engine clock is ',
                                            DATE_FORMAT(v_now, '%Y-%m-%dT%H:%i:%s.%fZ')));
        END IF;
        UPDATE weave_instances SET deadline_at = v_new WHERE id = v_id;
        -- The instance's own range (R-3), never the index of every open reason by code, which would lock other
        -- instances' reasons on its way.
        UPDATE weave_review_reasons FORCE INDEX (ix_review_instance) SET closed_at = v_now, closed_by = 'deadline'
         WHERE instance_id = v_id AND code = 'INSTANCE_DEADLINE' AND closed_at IS NULL;
        CALL _weave_event(v_ns, v_id, 'DEADLINE_CHANGED', '', 0, v_now,
             JSON_OBJECT('from', DATE_FORMAT(v_old, '%Y-%m-%dT%H:%i:%s.%fZ'),
                         'to', DATE_FORMAT(v_new, '%Y-%m-%dT%H:%i:%s.%fZ'), 'actor', v_actor, 'reason', in_reason),
             NULL, NULL, NULL);
        CALL _weave_review_reopen(v_ns, v_id, v_now, v_reopened);
        CALL _weave_audit(v_ns, v_id, v_cred, v_actor, 'instance.deadline', in_idempotency_key, v_digest, v_now, v_new,
                          in_reason, JSON_OBJECT('from', DATE_FORMAT(v_old, '%Y-%m-%dT%H:%i:%s.%fZ'),
                                                 'reopened', v_reopened = 1), NULL);
        SELECT status, deadline_at INTO v_status, v_old FROM weave_instances WHERE id = v_id;
    END IF;
    COMMIT;
    SELECT in_workflow_id AS workflow_id, v_old AS deadline_at, v_status AS status, v_replayed AS replayed;
    -- The instance as it is now, for the credential that acted (its scope is enough, 07-api), in its own snapshot:
    -- REPEATABLE READ whatever the session's level, under which a snapshot would read uncommitted or later rows.
    SET TRANSACTION ISOLATION LEVEL REPEATABLE READ;
    START TRANSACTION WITH CONSISTENT SNAPSHOT;
    CALL _weave_instance_show(in_namespace, CAST(SUBSTRING(in_workflow_id, 4) AS UNSIGNED), NULL);
    COMMIT;
END
