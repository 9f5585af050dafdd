-- The three workflows:control actions on an instance (C-1, C-2) are one decision that differs only in what it
-- does to the instance: pause and resume set the control state, and resume makes ROOT and every overdue
-- checkpoint due at once; cancel starts the cancellation (weave_instance_cancel says what it settles). Each is
-- authorised, locked and answered on replay alike, and audited with actor and reason under its key; pause and
-- resume are allowed while RUNNING or NEEDS_REVIEW, and a repeat that changes nothing is a no-op success, still
-- audited (C-6).
CREATE PROCEDURE _weave_instance_control(
        IN  in_token           VARCHAR(512),
        IN  in_namespace       VARCHAR(200),
        IN  in_workflow_id     VARCHAR(64),
        IN  in_reason          VARCHAR(4096),
        IN  in_idempotency_key VARCHAR(512),
        IN  in_action          VARCHAR(16),
        IN  in_facts_first     BOOLEAN,
        OUT out_status         VARCHAR(16),
        OUT out_changed        TINYINT,
        OUT out_replayed       TINYINT,
        OUT out_behind         BOOLEAN)
    COMMENT 'Internal. Description: the body of weave_instance_pause (in_action pause), weave_instance_resume (resume) and
weave_instance_cancel (cancel); out_status is the instance status (after the action, for cancel). in_facts_first
(cancel): when the instance has facts due that are still to be decided, change nothing and answer out_behind = TRUE
(the caller decides them first: weave_instance_cancel). Errors: those of the three routines.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_ns BIGINT UNSIGNED;
    DECLARE v_cred BIGINT UNSIGNED;
    DECLARE v_actor VARCHAR(128);
    DECLARE v_id BIGINT UNSIGNED;
    DECLARE v_now DATETIME(6);
    DECLARE v_audit_action VARCHAR(48) DEFAULT CONCAT('instance.', in_action);
    DECLARE v_digest CHAR(64) DEFAULT SHA2(CONCAT(in_action, '|', COALESCE(in_reason, '')), 256);
    DECLARE v_audit_details LONGTEXT;
    -- pause, resume
    DECLARE v_control VARCHAR(16);
    DECLARE v_target VARCHAR(16) DEFAULT IF(in_action = 'pause', 'PAUSED', 'ACTIVE');
    -- cancel
    DECLARE v_task BIGINT UNSIGNED;
    DECLARE v_last BIGINT UNSIGNED DEFAULT 0;
    DECLARE v_task_outcome VARCHAR(16);
    DECLARE v_cancelled INT DEFAULT 0;
    DECLARE v_requested INT DEFAULT 0;
    DECLARE v_finished TINYINT DEFAULT 0;
    SET out_changed = 0, out_behind = FALSE;
    CALL _weave_control_begin(in_token, in_namespace, in_workflow_id, 'workflows:control', v_audit_action,
                              in_reason, in_idempotency_key, v_digest, FALSE, v_ns, v_cred, v_actor, v_id, out_replayed,
                              v_now);
    -- C-2 after R-13: a cancel settles what the instance's facts have not settled yet, so the facts that fell due
    -- before it are decided first, as a running orchestrator would have decided them (a timer that fell due, an
    -- outcome stored in the inbox): with every runner down, a cancel would otherwise end an instance whose facts
    -- had ended it, and drop the outcome of a task that ran. Those whose last try failed wait for their own
    -- back-off (a person is asked about them, R-18), and are not waited for here; nor is a ROOT walk, which
    -- starts only new work, and the cancel none.
    -- Counts, not EXISTS: a count cut short by a KILL QUERY has no value, which is seen (see _weave_root_advance).
    SELECT i.status, i.control,
           in_facts_first AND out_replayed = 0 AND i.status IN ('RUNNING', 'NEEDS_REVIEW')
           AND (SELECT COUNT(*) FROM weave_pending_advances c FORCE INDEX (uq_checkpoint)
                 WHERE c.instance_id = i.id AND c.kind <> 'ROOT' AND c.deferred_reason IS NULL AND c.attempts = 0
                   AND c.due_at <= v_now AND c.available_at <= v_now)
             + (SELECT COUNT(*) FROM pulse_inbox x FORCE INDEX (ix_inbox_instance)
                 WHERE x.instance_id = i.id AND x.state = 'PENDING' AND x.attempts = 0 AND x.available_at <= v_now) > 0
      INTO out_status, v_control, out_behind
      FROM weave_instances i WHERE i.id = v_id;
    IF out_status IS NULL OR out_behind IS NULL THEN
        CALL _weave_raise(50016, 'INTERRUPTED: the instance''s read came back empty; nothing is changed');
    END IF;
    IF out_behind THEN
        SET out_status = NULL;
    ELSEIF out_replayed = 0 THEN
        IF in_action = 'cancel' THEN
            IF out_status = 'SUCCEEDED' THEN
                CALL _weave_raise(50007, 'INVALID_STATE: a SUCCEEDED instance cannot be cancelled');
            END IF;
            IF out_status IN ('RUNNING', 'NEEDS_REVIEW') THEN
                SET out_changed = 1;
                -- Its PENDING steps are CANCELLED below, with the others not settled.
                UPDATE weave_instances SET status = 'CANCELLING', gate = 'CLOSED', pending_steps = 0 WHERE id = v_id;
                CALL _weave_event(v_ns, v_id, 'INSTANCE_CANCELLING', '', 0, v_now,
                                  JSON_OBJECT('actor', v_actor, 'reason', in_reason), NULL, NULL, NULL);
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
                -- R-3: through the instance's own index range. The scan index of PENDING signals would lock, on
                -- its way, the PENDING signals of every other instance, and wait (or deadlock) for their decisions.
                UPDATE weave_signals FORCE INDEX (uq_signal_idempotency)
                   SET status = 'REJECTED', disposition = 'INSTANCE_SETTLED', consumed_at = v_now, version = version + 1
                 WHERE namespace_id = v_ns AND instance_id = v_id AND status = 'PENDING';
                UPDATE weave_poll_states FORCE INDEX (ix_poll_instance) SET state = 'STOPPED', updated_at = v_now
                 WHERE instance_id = v_id AND state IN ('IN_FLIGHT', 'WAITING');
                UPDATE weave_steps SET status = 'CANCELLED', updated_at = v_now
                 WHERE instance_id = v_id AND status IN ('PENDING', 'ACTIVE', 'NEEDS_REVIEW');
                UPDATE weave_activations SET ended_at = v_now WHERE instance_id = v_id AND ended_at IS NULL;
                UPDATE weave_review_reasons FORCE INDEX (ix_review_instance)
                   SET closed_at = v_now, closed_by = 'cancel'
                 WHERE instance_id = v_id AND closed_at IS NULL;
                DELETE FROM weave_pending_advances WHERE instance_id = v_id;
                CALL _weave_instance_cancel_finish(v_ns, v_id, v_now, v_finished);
            END IF;
            SELECT status INTO out_status FROM weave_instances WHERE id = v_id;
            SET v_audit_details = JSON_OBJECT('changed', out_changed = 1, 'tasks_cancelled', v_cancelled + 0,
                                              'tasks_asked_to_stop', v_requested + 0);
        ELSE
            IF out_status NOT IN ('RUNNING', 'NEEDS_REVIEW') THEN
                CALL _weave_raise(50007, CONCAT('INVALID_STATE: cannot ', in_action, ' an instance that is ', out_status));
            END IF;
            IF v_control <> v_target THEN
                SET out_changed = 1;
                UPDATE weave_instances SET control = v_target WHERE id = v_id;
                IF in_action = 'resume' THEN
                    CALL _weave_checkpoint_set(v_ns, v_id, '', 'ROOT', 0, v_now, v_now);
                    -- Through the instance's own range (R-3): planned on available_at, it would lock the
                    -- checkpoints of other instances on its way, and wait or deadlock with their decisions.
                    UPDATE weave_pending_advances FORCE INDEX (uq_checkpoint)
                       SET available_at = v_now, version = version + 1
                     WHERE instance_id = v_id AND due_at <= v_now AND available_at > v_now;
                END IF;
                CALL _weave_event(v_ns, v_id, IF(in_action = 'pause', 'INSTANCE_PAUSED', 'INSTANCE_RESUMED'), '', 0,
                                  v_now, JSON_OBJECT('actor', v_actor, 'reason', in_reason), NULL, NULL, NULL);
            END IF;
            SET v_audit_details = JSON_OBJECT('changed', out_changed = 1);
        END IF;
        CALL _weave_audit(v_ns, v_id, v_cred, v_actor, v_audit_action, in_idempotency_key, v_digest, v_now, NULL,
                          in_reason, v_audit_details, NULL);
    END IF;
END
