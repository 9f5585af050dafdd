-- K-3: only the holder of the current attempt may report its end. The report takes the locks of a
-- decision of its instance first (R-3: credential, then the instance, SKIP LOCKED so that a worker never
-- queues behind an orchestrator or another worker), then Pulse's own (task, then attempt), and decides
-- from those locked rows. When the report holds the instance, the outcome is consumed in its own
-- transaction (_weave_inbox_settle); when another does, the inbox event waits for the candidate path. A
-- report from the holder of an attempt that is no longer current (its lease was recovered, the task
-- moved on) is kept as a late report: the worker's words are not lost, but they change nothing. The
-- report's time is read here, after every lock (R-2), and is after the instance's last decision: the one it
-- locked, or when another transaction holds the instance, the last one committed. A writer whose clock is
-- behind (a failover, a cluster's nodes a little apart) dated a report made after a final signal at the
-- signal's own time, which F-1 gives to the query, or before it, and the later answer won the race. A retryable failure (in_retryable) of a task with
-- attempts left and no cancel asked (as read before any lock) only puts the task back in its queue: it
-- takes no lock of the instance's, and if the task ends after all (its deadline comes before the next
-- start), the outcome waits in the inbox for the candidate path.
CREATE PROCEDURE _pulse_attempt_current(
        IN  in_attempt_id     BIGINT UNSIGNED,
        IN  in_worker_id      VARCHAR(512),
        IN  in_kind           VARCHAR(16),
        IN  in_body           LONGTEXT,
        IN  in_retryable      BOOLEAN,
        OUT out_now           DATETIME(6),
        OUT out_task_id       BIGINT UNSIGNED,
        OUT out_current       TINYINT,
        OUT out_task_status   VARCHAR(16),
        OUT out_namespace_id  BIGINT UNSIGNED,
        OUT out_instance_id   BIGINT UNSIGNED,
        OUT out_inst_status   VARCHAR(16),
        OUT out_lines         BOOLEAN)
    COMMENT 'Internal. Description: locks the task and the attempt of a report, after the credential and the task''s
instance when the instance is free (out_instance_id: the instance, locked; NULL when another transaction holds
it, when a fact of another of its steps fell due before the report and is still to be decided, or not locked for a
retryable failure (in_retryable) of a task with attempts left and no cancel asked);
out_current = 1 when the attempt is the task''s RUNNING attempt, 2 when this report is the one that ended it, sent
again (out_task_status: the task''s status as that report left it), else 0 after storing the report in
pulse_late_reports (in_kind SUCCEEDED or FAILED); out_task_status: the task''s status as locked here;
out_namespace_id: the attempt''s namespace; out_inst_status: the locked instance''s; out_lines: whether work waited
in line for the room of the task''s app or queue as the first, plain read saw it (see _pulse_inbox_add); out_now:
the engine clock, read after every lock, and after the instance''s last decision (locked, or as committed).
Errors: 50003 NOT_FOUND (no such attempt), 50007 INVALID_STATE (the attempt''s task is missing), 50012
ATTEMPT_NOT_CURRENT (the attempt is not this worker''s),
50201 WORKER_ID_INVALID.
Rules: K-3, R-2, R-3, R-13, F-9.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_step VARCHAR(64);  -- the task's step
    DECLARE v_earlier DATETIME(6);  -- the earliest fact of the instance's other steps still to be decided
    DECLARE v_open INT UNSIGNED;  -- the locked instance's steps not SUCCEEDED
    DECLARE v_pending INT UNSIGNED;  -- of those, PENDING
    DECLARE v_task BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_locked BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_task_status VARCHAR(16);
    DECLARE v_used INT UNSIGNED;
    DECLARE v_ns BIGINT UNSIGNED;
    DECLARE v_status VARCHAR(16);
    DECLARE v_no INT UNSIGNED;
    DECLARE v_worker VARCHAR(128);
    DECLARE v_inst BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_cred BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_dummy BIGINT UNSIGNED;
    DECLARE v_may_end BOOLEAN;
    DECLARE v_last DATETIME(6) DEFAULT NULL;  -- the locked instance's last decision (R-2)
    DECLARE v_seen DATETIME(6) DEFAULT NULL;  -- the instance's last decision as committed, read without a lock
    DECLARE v_same BOOLEAN DEFAULT FALSE;  -- a report of an ended attempt is the very report that ended it
    DECLARE v_ended_it BOOLEAN DEFAULT FALSE;  -- and that report gave the task its end

    IF in_worker_id IS NULL OR CHAR_LENGTH(in_worker_id) NOT BETWEEN 1 AND 128 THEN
        CALL _weave_raise(50201, 'WORKER_ID_INVALID: worker id must be 1-128 characters');
    END IF;
    SET out_current = 0, out_instance_id = NULL, out_inst_status = NULL;
    SELECT a.task_id, t.instance_id, t.step_key, i.credential_id, i.updated_at,
           NOT in_retryable OR t.attempts_used >= t.max_attempts OR t.cancel_requested <> 0,
           -- only where the task may end here: a retry gives no slot back
           (NOT in_retryable OR t.attempts_used >= t.max_attempts OR t.cancel_requested <> 0)
           AND (EXISTS (SELECT 1 FROM weave_pending_advances w WHERE w.deferred_reason = 'QUOTA_FULL'
                           AND w.deferred_for = t.app_id)
                OR EXISTS (SELECT 1 FROM weave_pending_advances w WHERE w.deferred_reason = 'QUEUE_FULL'
                              AND w.deferred_for = t.queue_id))
      INTO v_task, v_inst, v_step, v_cred, v_seen, v_may_end, out_lines
      FROM pulse_attempts a
      LEFT JOIN pulse_tasks t ON t.id = a.task_id
      LEFT JOIN weave_instances i ON i.id = t.instance_id
     WHERE a.id = in_attempt_id;
    IF v_task IS NULL THEN
        CALL _weave_raise(50003, 'NOT_FOUND: no such attempt');
    END IF;
    IF v_cred IS NOT NULL AND v_may_end THEN  -- as _weave_candidate_open takes them
        SELECT id INTO v_dummy FROM weave_credentials WHERE id = v_cred LOCK IN SHARE MODE;
        SELECT id, status, updated_at, open_steps, pending_steps
          INTO out_instance_id, out_inst_status, v_last, v_open, v_pending
          FROM weave_instances WHERE id = v_inst FOR UPDATE SKIP LOCKED;
    END IF;
    -- Pulse's two locks in one statement, in its order: the join reads (and locks) the task first, then the attempt.
    SELECT t.id, t.status, t.attempts_used, a.namespace_id, a.status, a.attempt_no, a.worker_id
      INTO v_locked, v_task_status, v_used, v_ns, v_status, v_no, v_worker
      FROM pulse_tasks t STRAIGHT_JOIN pulse_attempts a ON a.id = in_attempt_id WHERE t.id = v_task FOR UPDATE;
    IF v_locked IS NULL THEN
        CALL _weave_raise(50007, 'INVALID_STATE: the attempt''s task does not exist');
    END IF;
    -- After the instance's last decision, never at it: a fact stored before the report stays before it (R-2, F-9).
    -- With it, when the instance is locked, the earliest stored time among the facts of its other steps still to be
    -- decided that came before the report (_weave_facts_before): a report made after one of them fell due leaves its
    -- outcome to the candidate path, which decides them in their order (R-13, F-9), as when another transaction
    -- holds the instance. With every orchestrator down, a report at 7:00 would otherwise start the successor of a
    -- task in an instance whose approval ran out at 2:00, and whose gate that expiry closes. Not read when the task's
    -- step is the instance's only open one: there are no other facts.
    SELECT r.now,
           CASE out_instance_id IS NOT NULL AND v_open > 1
               WHEN TRUE THEN _weave_facts_before(v_inst, v_step, r.now, v_open, v_pending)
               WHEN FALSE THEN TIMESTAMP'9999-12-31 00:00:00' END
      INTO out_now, v_earlier
      FROM (SELECT GREATEST(UTC_TIMESTAMP(6) + INTERVAL clock_offset_us MICROSECOND,
                            COALESCE(v_last, v_seen, CAST('1000-01-01' AS DATETIME(6))) + INTERVAL 1 MICROSECOND) AS now
              FROM weave_install WHERE id = 1) r;
    IF out_instance_id IS NOT NULL AND (v_earlier < out_now OR v_earlier IS NULL) THEN
        -- An earlier fact first (above), or its read cut short: the outcome waits for the candidate path.
        SET out_instance_id = NULL, out_inst_status = NULL;
    END IF;
    IF v_worker <> in_worker_id THEN
        CALL _weave_raise(50012, 'ATTEMPT_NOT_CURRENT: the attempt was claimed by another worker');
    END IF;
    SET out_task_id = v_task, out_task_status = v_task_status, out_namespace_id = v_ns;
    IF v_status = 'RUNNING' AND v_task_status = 'RUNNING' AND v_used = v_no THEN
        SET out_current = 1;
    ELSE
        -- This very report again: its answer was lost after the commit (a connection cut, a node failed over) and
        -- the worker sent it once more. It was kept as a late report and answered LATE, which reads "the lease was
        -- lost", and sent people looking for a result that had been recorded. The same end from the same worker,
        -- with the same result or error, answers as the first did and stores nothing.
        IF v_status = in_kind THEN
            SELECT CASE in_kind WHEN 'SUCCEEDED' THEN t.result <=> in_body
                                ELSE a.error <=> LEFT(JSON_VALUE(in_body, '$.error'), 2048) END,
                   t.finished_at <=> a.ended_at
              INTO v_same, v_ended_it
              FROM pulse_tasks t JOIN pulse_attempts a ON a.id = in_attempt_id WHERE t.id = v_task;
        END IF;
        IF v_same THEN
            -- The task's status as that report left it: the end it gave the task (written at the attempt's own end:
            -- the task changes no more once it has), else a retry it scheduled, whatever became of that retry since
            -- (another attempt, a cancel, an expiry).
            SET out_current = 2,
                out_task_status = IF(in_kind = 'FAILED' AND NOT v_ended_it, 'QUEUED', v_task_status);
        ELSE
            INSERT INTO pulse_late_reports (namespace_id, task_id, attempt_id, worker_id, kind, body, reported_at)
            VALUES (v_ns, v_task, in_attempt_id, in_worker_id, in_kind, in_body, out_now);
        END IF;
    END IF;
END
