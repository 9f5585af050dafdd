-- "Why is this wait still open?" (S-17). It answers from the stored facts only, the same ones the
-- consumption decides from: what the wait pins, and for every signal that targeted the step the rule
-- that kept it from winning. A correlation mismatch shows the differing bytes, because the usual
-- culprit is invisible in text (a trailing space, a look-alike character, another normalisation).
-- Every step type answers "why is it waiting?": a timer's due time and its cap, a poll's rounds and its
-- current task, a task's attempts and lease, and for all of them what holds the whole instance back.
-- The step key is wider than a key can be: a lax caller's session would cut a longer one down to a key that exists.
CREATE PROCEDURE weave_step_explain(
        IN in_token       VARCHAR(512),
        IN in_namespace   VARCHAR(200),
        IN in_workflow_id VARCHAR(64),
        IN in_step_key    VARCHAR(200))
    COMMENT 'Description: why a step is waiting: what its current wait pins, its timer, poll or task facts, what
holds the instance back, and why each signal that targeted the step did not win. Read in one snapshot: a read
transaction of its own (REPEATABLE READ), or, called inside an open transaction of the caller, that transaction,
which it neither commits nor rolls back (R-1).
Parameters: in_token (workflows:read and every queue of the pinned definition), in_namespace, in_workflow_id,
in_step_key.
Result set 1 (the step): step_key, step_type, step_status, activation_sequence, wait_kind, wait_status (of its
SIGNAL or POLL_FINAL wait; a timer''s facts are in result set 3), signal_name,
payload_version, payload_type (the wait''s pins; from the definition while the step was never activated),
correlation_key (UTF-8 text), correlation_key_hex, started_at, deadline_at, winner_signal_id, instance_status,
control, instance_deadline_at, open_review_codes (JSON array, empty when none), now_at, signals_total (every signal
that targeted the step; result set 2 holds the latest 100).
Result set 2 (the latest 100 signals that targeted the step, in acceptance order): signal_id, idempotency_key,
target_activation_sequence, status, disposition, accepted_at, expires_at, consumed_at, correlation_key, correlation_key_hex, why (WON, NOT_YET_CONSUMED,
WAITING_FOR_ACTIVATION, STEP_IN_REVIEW, STALE_ACTIVATION, CORRELATION_MISMATCH, LATE, STEP_SETTLED, or the stored
disposition), detail (JSON: for a mismatch expected_hex, got_hex, first_difference_offset, expected_byte_hex,
got_byte_hex; for LATE the deadline; for a stale signal the current activation).
Result set 3 (the step''s own wait, one row; columns of other types are NULL): timer_due_at, timer_delay_ms,
timer_planned_due_at, timer_truncated (1 when the instance deadline capped it), timer_lateness_ms (so far, or at
settlement); poll_state, rounds_used, max_rounds, next_poll_at, poll_deadline, poll_last_outcome, poll_stop_reason;
task_id (the current task of a TASK or POLL step), task_status, attempts_used, max_attempts, lease_holder,
lease_expires_at, next_retry_at, attempt_started_at (of the RUNNING attempt), task_deadline_at, task_cancel_requested
(1 when a cancel asked the running handler to stop), task_last_error.
Result set 4 (what holds the instance or step back, R-18): blocker (PAUSED, GATE_CLOSED, DEFERRED, MUTEX_HELD: the
step''s current task is QUEUED behind a RUNNING attempt that holds its mutex key, TASK_OVERDUE: its attempt runs at
or past the task''s deadline, which stops no handler, REVIEW), reason (deferral reason or review code), since (for
MUTEX_HELD: when the key was taken; for TASK_OVERDUE: the task''s deadline), next_check_at (for TASK_OVERDUE: when
the lease runs out unless renewed), detail (for DEFERRED: the deferral''s text, and for room how many wait before it
in its line, of which app or queue; for MUTEX_HELD: {mutex_key}; for TASK_OVERDUE: {task_id, worker_id,
attempt_started_at, cancel_requested}).
Result set 5 (reports of the current task that came after their attempt had ended, as when its lease ran out first:
stored without effect, K-3; the newest five): task_id, attempt_id, attempt_no, worker_id, kind (SUCCEEDED or FAILED),
body (the result or the error, as reported), reported_at.
Errors: 50001 UNAUTHENTICATED, 50002 FORBIDDEN, 50003 NOT_FOUND.
Rules: S-17, S-8, S-9, S-11, R-1.'
    READS SQL DATA
BEGIN
    DECLARE v_now DATETIME(6);
    DECLARE v_ns BIGINT UNSIGNED;
    DECLARE v_inst BIGINT UNSIGNED;
    DECLARE v_step BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_k INT UNSIGNED;
    DECLARE v_activation BIGINT UNSIGNED;
    DECLARE v_step_status VARCHAR(16);
    DECLARE v_wait_status VARCHAR(16);
    DECLARE v_wait_corr VARBINARY(512);
    DECLARE v_wait_deadline DATETIME(6);
    DECLARE v_task BIGINT UNSIGNED;  -- the step's current task: its POLL round's, else its activation's latest
    DECLARE v_tx BOOLEAN DEFAULT FALSE;  -- TRUE once this routine has started its own transaction
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN IF v_tx THEN ROLLBACK; END IF; RESIGNAL; END;
    -- One snapshot for every answer: the step's wait, the signals' reasons worked out from it and the blockers are
    -- of one moment, as the instance read's are (a signal winning meanwhile shows as won everywhere or nowhere).
    CALL _weave_snapshot_open(v_tx);
    CALL _weave_instance_find(in_token, in_namespace, in_workflow_id, v_ns, v_inst);
    CALL _weave_now(v_now);
    SELECT s.id, s.activation_seq, s.activation_id, s.status, w.status, w.correlation_key, w.deadline_at
      INTO v_step, v_k, v_activation, v_step_status, v_wait_status, v_wait_corr, v_wait_deadline
      FROM weave_steps s
      LEFT JOIN weave_waits w ON w.activation_id = s.activation_id AND w.kind IN ('SIGNAL', 'POLL_FINAL')
     WHERE s.instance_id = v_inst AND s.step_key = in_step_key;
    IF v_step IS NULL THEN
        CALL _weave_raise(50003, 'NOT_FOUND: the instance has no step with this key');
    END IF;
    SELECT COALESCE((SELECT current_task_id FROM weave_poll_states WHERE activation_id = v_activation),
                    (SELECT MAX(id) FROM pulse_tasks WHERE activation_id = v_activation))
      INTO v_task;

    -- Its open review codes are a JSON list, which MariaDB cuts at the session's group_concat_max_len: the statement
    -- raises the cap for itself alone.
    /*M!100301 SET STATEMENT group_concat_max_len = 1048576 FOR */
    SELECT s.step_key, s.type AS step_type, s.status AS step_status, s.activation_seq AS activation_sequence,
           w.kind AS wait_kind, w.status AS wait_status,
           COALESCE(w.signal_name, JSON_VALUE(ds.spec, '$.signal.name'), JSON_VALUE(ds.spec, '$.final_signal.name'))
               AS signal_name,
           COALESCE(w.payload_version, JSON_VALUE(ds.spec, '$.signal.payload_version'),
                    JSON_VALUE(ds.spec, '$.final_signal.payload_version')) AS payload_version,
           COALESCE(w.payload_type, JSON_VALUE(ds.spec, '$.signal.payload_type'),
                    IF(ds.type = 'POLL', 'result', NULL)) AS payload_type,
           CONVERT(w.correlation_key USING utf8mb4) AS correlation_key,
           LOWER(HEX(w.correlation_key)) AS correlation_key_hex, w.started_at, w.deadline_at,
           IF(w.winner_signal_id IS NULL, NULL, CONCAT('sig_', w.winner_signal_id)) AS winner_signal_id,
           i.status AS instance_status, i.control, i.deadline_at AS instance_deadline_at,
           COALESCE((SELECT JSON_ARRAYAGG(r.code) FROM weave_review_reasons r
                      WHERE r.instance_id = i.id AND r.closed_at IS NULL AND r.step_key = s.step_key), JSON_ARRAY())
               AS open_review_codes,
           v_now AS now_at,
           (SELECT COUNT(*) FROM weave_signals g FORCE INDEX (ix_signal_target)
             WHERE g.instance_id = i.id AND g.target_step_key = s.step_key) AS signals_total
      FROM weave_steps s
      JOIN weave_instances i ON i.id = s.instance_id
      JOIN weave_definition_steps ds ON ds.definition_id = i.definition_id AND ds.step_key = s.step_key
      LEFT JOIN weave_waits w ON w.activation_id = s.activation_id AND w.kind IN ('SIGNAL', 'POLL_FINAL')
     WHERE s.id = v_step;

    WITH facts AS (
        SELECT g.id, g.idempotency_key, g.target_activation_seq, g.status, g.disposition, g.accepted_at,
               g.expires_at, g.consumed_at, g.correlation_key AS got, tw.correlation_key AS expected,
               tw.deadline_at AS target_deadline,
               CASE
                   WHEN g.status = 'CONSUMED' THEN 'WON'
                   WHEN g.status <> 'PENDING' THEN g.disposition
                   WHEN g.target_activation_seq < v_k THEN 'STALE_ACTIVATION'
                   WHEN g.target_activation_seq > v_k THEN 'WAITING_FOR_ACTIVATION'
                   -- reactivated as k, its wait not opened yet by the ROOT advance: early, as Send took it
                   WHEN v_activation IS NULL AND v_step_status = 'PENDING' THEN 'WAITING_FOR_ACTIVATION'
                   WHEN v_wait_status IS NULL OR v_wait_status <> 'WAITING' THEN 'STEP_SETTLED'
                   WHEN g.accepted_at >= v_wait_deadline THEN 'LATE'
                   WHEN g.correlation_key <> v_wait_corr THEN 'CORRELATION_MISMATCH'
                   WHEN v_step_status <> 'ACTIVE' THEN 'STEP_IN_REVIEW'
                   ELSE 'NOT_YET_CONSUMED'
               END AS why
          FROM weave_signals g
          LEFT JOIN weave_activations ta ON ta.instance_id = g.instance_id AND ta.step_key = g.target_step_key
                                        AND ta.seq = g.target_activation_seq
          LEFT JOIN weave_waits tw ON tw.activation_id = ta.id AND tw.kind IN ('SIGNAL', 'POLL_FINAL')
         WHERE g.instance_id = v_inst AND g.namespace_id = v_ns AND g.target_step_key = in_step_key
         ORDER BY g.accepted_at DESC, g.id DESC LIMIT 100),
    shown AS (
        SELECT f.*, IF(f.why = 'CORRELATION_MISMATCH', _weave_bytes_differ_at(f.got, f.expected), NULL) AS differ_at
          FROM facts f)
    SELECT CONCAT('sig_', f.id) AS signal_id, f.idempotency_key, f.target_activation_seq AS target_activation_sequence,
           f.status, f.disposition, f.accepted_at, f.expires_at, f.consumed_at,
           CONVERT(f.got USING utf8mb4) AS correlation_key, LOWER(HEX(f.got)) AS correlation_key_hex, f.why,
           CASE
               -- The facts of the answer given (a late signal may not match either: its lateness is the answer).
               WHEN f.why = 'LATE' THEN
                   -- its target wait's deadline when it came after it, else the one in force at its acceptance
                   JSON_OBJECT('deadline_at', DATE_FORMAT(IF(f.target_deadline <= f.accepted_at, f.target_deadline,
                                                             f.expires_at), '%Y-%m-%dT%H:%i:%s.%fZ'),
                               'accepted_at', DATE_FORMAT(f.accepted_at, '%Y-%m-%dT%H:%i:%s.%fZ'))
               WHEN f.why = 'CORRELATION_MISMATCH' AND f.expected IS NOT NULL AND f.got <> f.expected THEN
                   JSON_OBJECT('expected_hex', LOWER(HEX(f.expected)), 'got_hex', LOWER(HEX(f.got)),
                               'first_difference_offset', f.differ_at + 0,
                               'expected_byte_hex', LOWER(HEX(SUBSTRING(f.expected, f.differ_at + 1, 1))),
                               'got_byte_hex', LOWER(HEX(SUBSTRING(f.got, f.differ_at + 1, 1))))
               WHEN f.why = 'STALE_ACTIVATION' THEN JSON_OBJECT('current_activation_sequence', v_k + 0)
               ELSE NULL
           END AS detail
      FROM shown f
     ORDER BY f.accepted_at, f.id;

    SELECT w.due_at AS timer_due_at, CAST(JSON_VALUE(a.frozen, '$.delay_ms') AS UNSIGNED) AS timer_delay_ms,
           w.planned_due_at AS timer_planned_due_at, w.due_at < w.planned_due_at AS timer_truncated,
           GREATEST(TIMESTAMPDIFF(MICROSECOND, w.due_at, COALESCE(w.settled_at, v_now)), 0) / 1000 AS timer_lateness_ms,
           p.state AS poll_state, p.rounds_used, p.max_rounds, p.next_poll_at, p.poll_deadline,
           p.last_outcome AS poll_last_outcome, p.stop_reason AS poll_stop_reason,
           IF(t.id IS NULL, NULL, CONCAT('tsk_', t.id)) AS task_id, t.status AS task_status, t.attempts_used,
           t.max_attempts, r.worker_id AS lease_holder, r.lease_expires_at,
           IF(t.status = 'QUEUED' AND t.attempts_used > 0, t.available_at, NULL) AS next_retry_at,
           r.started_at AS attempt_started_at, t.deadline_at AS task_deadline_at,
           t.cancel_requested = 1 AS task_cancel_requested, t.error AS task_last_error
      FROM weave_steps s
      LEFT JOIN weave_activations a ON a.id = s.activation_id
      LEFT JOIN weave_waits w ON w.activation_id = s.activation_id AND w.kind = 'TIMER'
      LEFT JOIN weave_poll_states p ON p.activation_id = s.activation_id
      LEFT JOIN pulse_tasks t ON t.id = v_task
      LEFT JOIN pulse_attempts r ON r.task_id = t.id AND r.status = 'RUNNING'
     WHERE s.id = v_step;

    SELECT 'PAUSED' AS blocker, NULL AS reason, NULL AS since, NULL AS next_check_at, NULL AS detail
      FROM weave_instances WHERE id = v_inst AND control = 'PAUSED'
    UNION ALL
    SELECT 'GATE_CLOSED', status, NULL, NULL, NULL FROM weave_instances WHERE id = v_inst AND gate = 'CLOSED'
    UNION ALL
    -- A deferral for room says where it stands in its line: how many wait before it, and for which app or queue.
    SELECT 'DEFERRED', c.deferred_reason, c.deferred_since, c.available_at,
           IF(c.deferred_for IS NULL OR c.deferred_reason NOT IN ('QUOTA_FULL', 'QUEUE_FULL'), c.last_error,
              CONCAT(COALESCE(c.last_error, c.deferred_reason), '; ',
                     (SELECT COUNT(*) FROM weave_pending_advances w FORCE INDEX (ix_checkpoint_room_line)
                       WHERE w.deferred_reason = c.deferred_reason AND w.deferred_for = c.deferred_for
                         AND (w.deferred_since < c.deferred_since
                              OR (w.deferred_since = c.deferred_since AND w.id < c.id))),
                     ' waiting before it for the room of ',
                     IF(c.deferred_reason = 'QUOTA_FULL',
                        CONCAT('app ', COALESCE((SELECT a.name FROM weave_apps a WHERE a.id = c.deferred_for),
                                                CONCAT('#', c.deferred_for))),
                        CONCAT('queue ', COALESCE((SELECT q.name FROM weave_queues q WHERE q.id = c.deferred_for),
                                                  CONCAT('#', c.deferred_for))))))
      FROM weave_pending_advances c
     WHERE c.instance_id = v_inst AND c.step_key IN ('', in_step_key) AND c.deferred_reason IS NOT NULL
    UNION ALL
    -- The step's current task, QUEUED, whose mutex key a RUNNING attempt holds: no worker can start it until that
    -- attempt ends, however many are idle. Only the key and since when it is held are told: the holder may be a task
    -- the caller may not read.
    SELECT 'MUTEX_HELD', NULL, p.taken_at, NULL, JSON_OBJECT('mutex_key', t.mutex_key)
      FROM pulse_tasks t
      STRAIGHT_JOIN pulse_permits p FORCE INDEX (uq_permit_mutex_held)
        ON p.namespace_id = t.namespace_id AND p.mutex_held = t.mutex_key
     WHERE t.id = v_task AND t.status = 'QUEUED' AND t.mutex_key IS NOT NULL
    UNION ALL
    -- The step's current task, RUNNING at or past its deadline. The engine never stops a running handler (the
    -- deadline only keeps new attempts from starting, K-6): the attempt ends when its handler reports, or when its
    -- lease runs out unrenewed. A worker that heartbeats renews it, so a handler that never returns holds the step
    -- for as long as its worker lives; this says so, where nothing else would.
    SELECT 'TASK_OVERDUE', NULL, t.deadline_at, r.lease_expires_at,
           JSON_OBJECT('task_id', CONCAT('tsk_', t.id), 'worker_id', r.worker_id,
                       'attempt_started_at', DATE_FORMAT(r.started_at, '%Y-%m-%dT%H:%i:%s.%fZ'),
                       'cancel_requested', t.cancel_requested = 1)
      FROM pulse_tasks t
      STRAIGHT_JOIN pulse_attempts r ON r.task_id = t.id AND r.attempt_no = t.attempts_used AND r.status = 'RUNNING'
     WHERE t.id = v_task AND t.status = 'RUNNING' AND t.deadline_at <= v_now
    UNION ALL
    SELECT 'REVIEW', code, opened_at, NULL, detail FROM weave_review_reasons
     WHERE instance_id = v_inst AND closed_at IS NULL;

    -- What the current task's handler reported after its attempt had ended (a lease run out, a worker frozen or cut
    -- off): it changed nothing, but a person deciding the review that the lost lease opened (TASK_UNKNOWN) wants it
    -- first, since the handler may have finished after all.
    SELECT CONCAT('tsk_', l.task_id) AS task_id, l.attempt_id, a.attempt_no, l.worker_id, l.kind, l.body,
           l.reported_at
      FROM pulse_late_reports l FORCE INDEX (ix_late_task)
      LEFT JOIN pulse_attempts a FORCE INDEX (PRIMARY) ON a.id = l.attempt_id
     WHERE l.task_id = v_task
     ORDER BY l.id DESC LIMIT 5;
    IF v_tx THEN
        COMMIT;
    END IF;
END
