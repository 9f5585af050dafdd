-- A claim commits before it answers, so its answer can be lost with its connection after its attempts began:
-- they are RUNNING for a worker that never heard of them, and would run out their leases without having run, and
-- go to review as UNKNOWN (K-4). A worker whose claim lost its connection asks for its running attempts before it
-- claims again, and runs the ones it does not know. Only those started since the worker began: a worker id may be
-- reused by the next process (a service manager's fixed name), and an attempt of a process that died is its lease's
-- to end, as UNKNOWN, never to run again (K-4). A plain read of the running attempts (the lease index: their number
-- is bounded by the tasks in flight, not by history).
CREATE PROCEDURE pulse_worker_attempts(IN in_worker_id VARCHAR(512), IN in_started_since DATETIME(6))
    COMMENT 'Description: the RUNNING attempts of a worker (K-1), for a worker whose claim lost its answer with its
connection: the claim may have committed, and its attempts are that worker''s to run.
Parameters: in_worker_id (1-128 chars), in_started_since (engine time; attempts started earlier are left out, NULL:
none is).
Result set: one row per running attempt of the worker, in claim order, with the columns of pulse_task_claim.
Errors: 50201 WORKER_ID_INVALID.
Rules: K-1, K-4.'
    READS SQL DATA
BEGIN
    IF in_worker_id IS NULL OR CHAR_LENGTH(in_worker_id) NOT BETWEEN 1 AND 128 THEN
        CALL _weave_raise(50201, 'WORKER_ID_INVALID: worker id must be 1-128 characters');
    END IF;
    SELECT CONCAT('tsk_', t.id) AS task_id, a.id AS attempt_id, a.attempt_no, t.max_attempts, n.name AS namespace,
           q.name AS queue, CONCAT('wf_', t.instance_id) AS workflow_id, t.step_key, t.round_no, t.handler,
           t.handler_version, t.input, t.business_key, t.mutex_key, t.priority, t.deadline_at, a.started_at,
           a.lease_expires_at
      FROM pulse_attempts a FORCE INDEX (ix_attempt_lease)
      STRAIGHT_JOIN pulse_tasks t FORCE INDEX (PRIMARY) ON t.id = a.task_id
      STRAIGHT_JOIN weave_queues q FORCE INDEX (PRIMARY) ON q.id = t.queue_id
      STRAIGHT_JOIN weave_namespaces n FORCE INDEX (PRIMARY) ON n.id = t.namespace_id
     WHERE a.status = 'RUNNING' AND a.worker_id = in_worker_id
       AND (in_started_since IS NULL OR a.started_at >= in_started_since)
     ORDER BY a.id;
END
