-- K-2: a heartbeat keeps the attempt's lease alive and is how a running worker learns that
-- cancellation was requested (K-5). It touches the attempt row only: a worker never waits on the
-- engine. A lease that ran out is still the holder's until the orchestrator records it as lost (K-4). A heartbeat
-- never moves the lease earlier: on a writer whose clock is behind the one that granted it (a failover, a cluster's
-- nodes apart), now + in_lease_ms was before the lease it meant to extend, and a live worker's task was recovered
-- as lost (UNKNOWN, a review) while it kept beating.
CREATE PROCEDURE pulse_attempt_heartbeat(
        IN in_attempt_id BIGINT UNSIGNED,
        IN in_worker_id  VARCHAR(512),
        IN in_lease_ms   BIGINT)
    COMMENT 'Description: extends the lease of a RUNNING attempt to now + in_lease_ms, never earlier than it was (K-2).
Parameters: in_attempt_id (from pulse_task_claim), in_worker_id (the claimant), in_lease_ms (1..86400000).
Result set: attempt_id, lease_expires_at, cancel_requested (1 when the task''s cancellation was requested).
Errors: 50003 NOT_FOUND, 50012 ATTEMPT_NOT_CURRENT (the attempt ended, e.g. its lease was recovered, or belongs to
another worker), 50200 LEASE_INVALID, 50201 WORKER_ID_INVALID.
Rules: K-2, K-4, K-5.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_now DATETIME(6);
    DECLARE v_task BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_status VARCHAR(16);
    DECLARE v_worker VARCHAR(128);
    DECLARE v_lease DATETIME(6);
    DECLARE v_cancel TINYINT DEFAULT 0;
    DECLARE v_tx BOOLEAN DEFAULT FALSE;  -- TRUE once this routine has started its own transaction
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN IF v_tx THEN ROLLBACK; END IF; RESIGNAL; END;
    CALL _weave_transaction_begin('pulse_attempt_heartbeat', v_tx);  -- refused inside a caller's transaction (R-1)
    IF in_worker_id IS NULL OR CHAR_LENGTH(in_worker_id) NOT BETWEEN 1 AND 128 THEN
        CALL _weave_raise(50201, 'WORKER_ID_INVALID: worker id must be 1-128 characters');
    END IF;
    IF in_lease_ms IS NULL OR in_lease_ms NOT BETWEEN 1 AND 86400000 THEN
        CALL _weave_raise(50200, 'LEASE_INVALID: lease_ms must be 1..86400000');
    END IF;
    SELECT task_id, status, worker_id, lease_expires_at INTO v_task, v_status, v_worker, v_lease
      FROM pulse_attempts WHERE id = in_attempt_id FOR UPDATE;
    IF v_task IS NULL THEN
        CALL _weave_raise(50003, 'NOT_FOUND: no such attempt');
    END IF;
    IF v_status <> 'RUNNING' OR v_worker <> in_worker_id THEN
        CALL _weave_raise(50012, 'ATTEMPT_NOT_CURRENT: the attempt is no longer running for this worker');
    END IF;
    -- The task's cancel flag, and the clock after the attempt lock (R-2), in one read.
    SELECT cancel_requested,
           UTC_TIMESTAMP(6) + INTERVAL (SELECT clock_offset_us FROM weave_install WHERE id = 1) MICROSECOND
      INTO v_cancel, v_now FROM pulse_tasks WHERE id = v_task;
    IF v_now IS NULL THEN  -- the clock always answers: cut short (see _weave_root_advance)
        CALL _weave_raise(50016, 'INTERRUPTED: the clock came back empty; nothing is changed');
    END IF;
    SET v_lease = GREATEST(COALESCE(v_lease, v_now), v_now + INTERVAL in_lease_ms * 1000 MICROSECOND);
    UPDATE pulse_attempts SET lease_expires_at = v_lease WHERE id = in_attempt_id;
    COMMIT;
    SELECT in_attempt_id AS attempt_id, v_lease AS lease_expires_at, v_cancel AS cancel_requested;
END
