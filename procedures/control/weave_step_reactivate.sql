-- C-4 reactivate: a new activation k+1 with fresh budgets and deadlines measured from now (capped by the
-- instance deadline) and inputs resolved again. The step's sequence moves to k+1 at once, so signals for
-- k can no longer win (S-8); the activation row, its task or wait are created by the ROOT advance as soon
-- as R-8 allows. Nothing of activation k is rewritten (C-5).
CREATE PROCEDURE weave_step_reactivate(
        IN in_token           VARCHAR(512),
        IN in_namespace       VARCHAR(200),
        IN in_workflow_id     VARCHAR(64),
        IN in_step_key        VARCHAR(200),
        IN in_timeout_ms      BIGINT,
        IN in_reason          VARCHAR(4096),
        IN in_idempotency_key VARCHAR(512))
    COMMENT 'Description: reactivates a step in NEEDS_REVIEW as activation k+1; closes its review reasons; the instance
reopens when no reason is left.
Parameters: in_token (workflows:review and every queue of the definition), in_namespace, in_workflow_id, in_step_key,
in_timeout_ms (optional new timeout_ms for SIGNAL/POLL steps, > 0), in_reason, in_idempotency_key.
Result set: workflow_id, step_key, activation_sequence, status (of the instance), replayed.
Errors: 50001 UNAUTHENTICATED, 50002 FORBIDDEN, 50003 NOT_FOUND, 50005 IDEMPOTENCY_CONFLICT, 50007 INVALID_STATE,
50008 TASK_IN_FLIGHT, 50100 INVALID_ARGUMENT, 50111 REASON_INVALID, 50113 IDEMPOTENCY_KEY_INVALID.
Rules: C-4, C-5, C-6, S-8.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_now DATETIME(6);
    DECLARE v_ns BIGINT UNSIGNED;
    DECLARE v_cred BIGINT UNSIGNED;
    DECLARE v_actor VARCHAR(128);
    DECLARE v_id BIGINT UNSIGNED;
    DECLARE v_replayed TINYINT;
    DECLARE v_step BIGINT UNSIGNED;
    DECLARE v_type VARCHAR(16);
    DECLARE v_seq INT UNSIGNED;
    DECLARE v_activation BIGINT UNSIGNED;
    DECLARE v_wait BIGINT UNSIGNED;
    DECLARE v_reopened TINYINT DEFAULT 0;
    DECLARE v_status VARCHAR(16);
    DECLARE v_digest CHAR(64) DEFAULT SHA2(CONCAT_WS('|', 'reactivate', COALESCE(in_step_key, ''),
                                                     COALESCE(in_timeout_ms, '-'), COALESCE(in_reason, '')), 256);
    DECLARE v_tx BOOLEAN DEFAULT FALSE;  -- TRUE once this routine has started its own transaction
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN IF v_tx THEN ROLLBACK; END IF; RESIGNAL; END;
    CALL _weave_transaction_claim('weave_step_reactivate', v_tx);
    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
    START TRANSACTION;
    CALL _weave_control_begin(in_token, in_namespace, in_workflow_id, 'workflows:review', 'step.reactivate',
                              in_reason, in_idempotency_key, v_digest, v_ns, v_cred, v_actor, v_id, v_replayed, v_now);
    IF v_replayed = 0 THEN
        CALL _weave_recovery_begin(v_id, in_step_key, v_step, v_type, v_seq, v_activation);
        IF in_timeout_ms IS NOT NULL AND (in_timeout_ms <= 0 OR in_timeout_ms > 31536000000 OR v_type NOT IN ('SIGNAL', 'POLL')) THEN
            CALL _weave_raise(50100, 'INVALID_ARGUMENT: timeout_ms applies to SIGNAL and POLL steps, 1..31536000000');
        END IF;
        UPDATE weave_activations SET ended_at = COALESCE(ended_at, v_now) WHERE id = v_activation;
        -- A wait of activation k still open (a final-signal wait, or one stopped by a tampered signal) is
        -- closed now, and its pending signals answered STALE_ACTIVATION: they can never follow into k+1.
        close_waits: LOOP
            SET v_wait = NULL;
            SELECT id INTO v_wait FROM weave_waits
             WHERE activation_id = v_activation AND status = 'WAITING' LIMIT 1 FOR UPDATE;
            IF v_wait IS NULL THEN
                LEAVE close_waits;
            END IF;
            UPDATE weave_waits SET status = 'CANCELLED', settled_at = v_now WHERE id = v_wait;
            CALL _weave_wait_signals_settle(v_ns, v_id, v_wait, 'STALE_ACTIVATION', v_now);
        END LOOP;
        UPDATE weave_steps SET status = 'PENDING', activation_seq = v_seq + 1, activation_id = NULL,
                               activation_override = IF(in_timeout_ms IS NULL, NULL,
                                                        JSON_OBJECT('timeout_ms', in_timeout_ms + 0)),
                               updated_at = v_now
         WHERE id = v_step;
        DELETE FROM weave_pending_advances WHERE instance_id = v_id AND step_key = in_step_key;
        UPDATE weave_review_reasons SET closed_at = v_now, closed_by = 'reactivate'
         WHERE instance_id = v_id AND step_key = in_step_key AND closed_at IS NULL;
        CALL _weave_event(v_ns, v_id, 'STEP_REACTIVATED', in_step_key, v_seq + 1, v_now,
             JSON_OBJECT('previous_activation', v_seq + 0, 'actor', v_actor, 'reason', in_reason,
                         'timeout_ms', in_timeout_ms + 0));
        CALL _weave_review_reopen(v_ns, v_id, v_now, v_reopened);
        CALL _weave_audit(v_ns, v_id, v_cred, v_actor, 'step.reactivate', in_idempotency_key, v_digest, v_now, NULL,
                          in_reason, JSON_OBJECT('step_key', in_step_key, 'activation_sequence', v_seq + 1,
                                                 'reopened', v_reopened = 1), NULL);
    END IF;
    SELECT status INTO v_status FROM weave_instances WHERE id = v_id;
    SELECT activation_seq INTO v_seq FROM weave_steps WHERE instance_id = v_id AND step_key = in_step_key;
    COMMIT;
    SELECT in_workflow_id AS workflow_id, in_step_key AS step_key, v_seq AS activation_sequence, v_status AS status,
           v_replayed AS replayed;
END
