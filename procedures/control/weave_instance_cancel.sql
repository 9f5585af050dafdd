-- C-2 cancel: CANCELLING with the gate CLOSED; queued tasks are cancelled at once and running ones asked
-- to stop (their real outcome is still collected, K-5); waiting waits are cancelled, pending signals
-- rejected INSTANCE_SETTLED, every non-final step CANCELLED and open review reasons closed. The
-- instance becomes CANCELLED (final) when no task of it is in flight any more.
CREATE PROCEDURE weave_instance_cancel(
        IN in_token           VARCHAR(512),
        IN in_namespace       VARCHAR(200),
        IN in_workflow_id     VARCHAR(64),
        IN in_reason          VARCHAR(4096),
        IN in_idempotency_key VARCHAR(512))
    COMMENT 'Description: cancels an instance (C-2); cancelling a CANCELLING or CANCELLED instance is a no-op success.
Parameters: in_token (workflows:control and every queue of the definition), in_namespace, in_workflow_id, in_reason
(1-1024 chars), in_idempotency_key (1-128 printable ASCII).
Result set: workflow_id, status (CANCELLING or CANCELLED), changed, replayed.
Errors: 50001 UNAUTHENTICATED, 50002 FORBIDDEN, 50003 NOT_FOUND, 50005 IDEMPOTENCY_CONFLICT, 50007 INVALID_STATE
(SUCCEEDED), 50111 REASON_INVALID, 50113 IDEMPOTENCY_KEY_INVALID.
Rules: C-2, C-6, K-5, S-9.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_now DATETIME(6);
    DECLARE v_ns BIGINT UNSIGNED;
    DECLARE v_cred BIGINT UNSIGNED;
    DECLARE v_actor VARCHAR(128);
    DECLARE v_id BIGINT UNSIGNED;
    DECLARE v_replayed TINYINT;
    DECLARE v_status VARCHAR(16);
    DECLARE v_changed TINYINT DEFAULT 0;
    DECLARE v_task BIGINT UNSIGNED;
    DECLARE v_last BIGINT UNSIGNED DEFAULT 0;
    DECLARE v_task_outcome VARCHAR(16);
    DECLARE v_cancelled INT DEFAULT 0;
    DECLARE v_requested INT DEFAULT 0;
    DECLARE v_finished TINYINT DEFAULT 0;
    DECLARE v_digest CHAR(64) DEFAULT SHA2(CONCAT('cancel|', COALESCE(in_reason, '')), 256);
    DECLARE v_tx BOOLEAN DEFAULT FALSE;  -- TRUE once this routine has started its own transaction
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN IF v_tx THEN ROLLBACK; END IF; RESIGNAL; END;
    CALL _weave_transaction_claim('weave_instance_cancel', v_tx);
    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
    START TRANSACTION;
    CALL _weave_control_begin(in_token, in_namespace, in_workflow_id, 'workflows:control', 'instance.cancel',
                              in_reason, in_idempotency_key, v_digest, v_ns, v_cred, v_actor, v_id, v_replayed, v_now);
    SELECT status INTO v_status FROM weave_instances WHERE id = v_id;
    IF v_replayed = 0 THEN
        IF v_status = 'SUCCEEDED' THEN
            CALL _weave_raise(50007, 'INVALID_STATE: a SUCCEEDED instance cannot be cancelled');
        END IF;
        IF v_status IN ('RUNNING', 'NEEDS_REVIEW') THEN
            SET v_changed = 1;
            UPDATE weave_instances SET status = 'CANCELLING', gate = 'CLOSED' WHERE id = v_id;
            CALL _weave_event(v_ns, v_id, 'INSTANCE_CANCELLING', '', 0, v_now,
                              JSON_OBJECT('actor', v_actor, 'reason', in_reason));
            cancel_tasks: LOOP
                SET v_task = NULL;
                SELECT MIN(id) INTO v_task FROM pulse_tasks
                 WHERE instance_id = v_id AND status IN ('QUEUED', 'RUNNING') AND id > v_last;
                IF v_task IS NULL THEN
                    LEAVE cancel_tasks;
                END IF;
                CALL _pulse_task_cancel(v_task, v_now, v_task_outcome);
                SET v_cancelled = v_cancelled + (v_task_outcome = 'CANCELLED');
                SET v_requested = v_requested + (v_task_outcome = 'REQUESTED');
                SET v_last = v_task;
            END LOOP;
            UPDATE weave_waits SET status = 'CANCELLED', settled_at = v_now WHERE instance_id = v_id AND status = 'WAITING';
            UPDATE weave_signals SET status = 'REJECTED', disposition = 'INSTANCE_SETTLED', consumed_at = v_now,
                                     version = version + 1
             WHERE namespace_id = v_ns AND instance_id = v_id AND status = 'PENDING';
            UPDATE weave_poll_states SET state = 'STOPPED', updated_at = v_now
             WHERE instance_id = v_id AND state IN ('IN_FLIGHT', 'WAITING');
            UPDATE weave_steps SET status = 'CANCELLED', updated_at = v_now
             WHERE instance_id = v_id AND status IN ('PENDING', 'ACTIVE', 'NEEDS_REVIEW');
            UPDATE weave_activations SET ended_at = v_now WHERE instance_id = v_id AND ended_at IS NULL;
            UPDATE weave_review_reasons SET closed_at = v_now, closed_by = 'cancel'
             WHERE instance_id = v_id AND closed_at IS NULL;
            DELETE FROM weave_pending_advances WHERE instance_id = v_id;
            CALL _weave_instance_cancel_finish(v_ns, v_id, v_now, v_finished);
        END IF;
        CALL _weave_audit(v_ns, v_id, v_cred, v_actor, 'instance.cancel', in_idempotency_key, v_digest, v_now, NULL,
                          in_reason, JSON_OBJECT('changed', v_changed = 1, 'tasks_cancelled', v_cancelled + 0,
                                                 'tasks_asked_to_stop', v_requested + 0), NULL);
        SELECT status INTO v_status FROM weave_instances WHERE id = v_id;
    END IF;
    COMMIT;
    SELECT in_workflow_id AS workflow_id, v_status AS status, v_changed AS changed, v_replayed AS replayed;
END
