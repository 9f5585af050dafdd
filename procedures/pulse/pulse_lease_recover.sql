-- K-4, run by the orchestrator (candidate class LEASE), so it happens with no worker alive. An attempt
-- whose lease ran out without a report has an unknown effect: the attempt and the task become UNKNOWN
-- and are never retried automatically; the permit is released and the outcome goes to the inbox,
-- stamped with the moment the lease ran out (the outcome's own time, not the scan's). Only task,
-- attempt and permit rows are touched, task first (Pulse's lock order), SKIP LOCKED so that a worker's
-- report in progress wins and the scan proposes the attempt again only if it is still lost.
CREATE PROCEDURE pulse_lease_recover(IN in_attempt_id BIGINT UNSIGNED)
    COMMENT 'Description: records a lost lease (K-4): attempt and task UNKNOWN, permit released, inbox event UNKNOWN
at lease expiry, audit task.lease_lost.
Parameters: in_attempt_id - from weave_scan (class LEASE).
Result set: outcome - UNKNOWN, NOT_DUE (the lease was extended), GONE (the attempt already ended) or BUSY.
Errors: 50007 INVALID_STATE when the attempt is RUNNING but its task does not say so, or does not exist (left for an
operator).
Rules: K-4, M-4.6, R-13.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_now DATETIME(6);
    DECLARE v_task BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_locked BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_task_status VARCHAR(16);
    DECLARE v_used INT UNSIGNED;
    DECLARE v_max INT UNSIGNED;
    DECLARE v_ns BIGINT UNSIGNED;
    DECLARE v_inst BIGINT UNSIGNED;
    DECLARE v_deadline DATETIME(6);
    DECLARE v_status VARCHAR(16);
    DECLARE v_no INT UNSIGNED;
    DECLARE v_worker VARCHAR(128);
    DECLARE v_lease DATETIME(6);
    DECLARE v_started DATETIME(6);
    DECLARE v_facts LONGTEXT;
    DECLARE v_outcome VARCHAR(16) DEFAULT 'GONE';
    DECLARE v_tx BOOLEAN DEFAULT FALSE;  -- TRUE once this routine has started its own transaction
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN IF v_tx THEN ROLLBACK; END IF; RESIGNAL; END;
    CALL _weave_transaction_begin('pulse_lease_recover', v_tx);  -- refused inside a caller's transaction (R-1)
    SELECT task_id INTO v_task FROM pulse_attempts WHERE id = in_attempt_id;
    recover: BEGIN
        IF v_task IS NULL THEN
            LEAVE recover;
        END IF;
        SELECT id, status, attempts_used, max_attempts, namespace_id, instance_id, deadline_at
          INTO v_locked, v_task_status, v_used, v_max, v_ns, v_inst, v_deadline
          FROM pulse_tasks WHERE id = v_task FOR UPDATE SKIP LOCKED;
        IF v_locked IS NULL THEN
            -- Held by another transaction, or not there at all: a task row deleted under its running attempt would
            -- otherwise be BUSY at every scan, which the loop scans again at once for ever.
            SELECT id INTO v_locked FROM pulse_tasks WHERE id = v_task;
            IF v_locked IS NULL THEN
                CALL _weave_raise(50007, 'INVALID_STATE: the running attempt''s task does not exist');
            END IF;
            SET v_outcome = 'BUSY';
            LEAVE recover;
        END IF;
        SELECT status, attempt_no, worker_id, lease_expires_at, started_at
          INTO v_status, v_no, v_worker, v_lease, v_started
          FROM pulse_attempts WHERE id = in_attempt_id FOR UPDATE;
        CALL _weave_now(v_now);  -- R-2: after the lock that orders the decision
        IF v_status <> 'RUNNING' THEN
            LEAVE recover;
        END IF;
        IF v_lease > v_now THEN
            SET v_outcome = 'NOT_DUE';
            LEAVE recover;
        END IF;
        IF v_task_status <> 'RUNNING' OR v_used <> v_no THEN
            CALL _weave_raise(50007, 'INVALID_STATE: running attempt of a task that is not running it');
        END IF;
        SET v_facts = JSON_OBJECT('task_id', CONCAT('tsk_', v_task), 'attempt_id', in_attempt_id + 0,
                                  'attempt', v_no + 0, 'max_attempts', v_max + 0, 'worker_id', v_worker,
                                  'started_at', DATE_FORMAT(v_started, '%Y-%m-%dT%H:%i:%s.%fZ'),
                                  'lease_expired_at', DATE_FORMAT(v_lease, '%Y-%m-%dT%H:%i:%s.%fZ'),
                                  'recovered_at', DATE_FORMAT(v_now, '%Y-%m-%dT%H:%i:%s.%fZ'),
                                  'error', 'LEASE_LOST');
        CALL _pulse_attempt_end(in_attempt_id, 'UNKNOWN', 'LEASE_LOST', v_now, v_task, 'UNKNOWN', NULL,
                                'LEASE_LOST: no report before the lease ran out', NULL);
        CALL _pulse_inbox_add(v_task, 'UNKNOWN', v_facts, v_lease, v_now, NULL, NULL, NULL, NULL);
        CALL _weave_audit(v_ns, v_inst, 0, 'weave.orchestrator', 'task.lease_lost', NULL, NULL, v_now, v_deadline, NULL,
                          v_facts, NULL);
        SET v_outcome = 'UNKNOWN';
    END recover;
    COMMIT;
    SELECT v_outcome AS outcome;
END
