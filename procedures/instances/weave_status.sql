-- Operator view across namespaces (for `weave status` and /metrics): what is due now per candidate
-- class and how late the oldest is, work in flight, instances waiting for a person. Every count is an
-- index range over live rows, never over settled history (R-11).
CREATE PROCEDURE weave_status()
    COMMENT 'Description: backlog per candidate class, oldest due lag, tasks in flight and open review reasons.
Result set 1: class, due (rows due now), oldest_due_at, lag_ms.
Result set 2: status, tasks (QUEUED and RUNNING tasks).
Result set 3 (of instances in NEEDS_REVIEW): code, open_review_reasons, instances_in_review, now_at - a row per review
code, then the row of them all (code NULL); no row when none is open.
Result set 4 (timers settled in the last 5 minutes, T-8): le_seconds (bucket upper bound, NULL = +Inf), timers.
Result set 5: polls_in_flight, polls_waiting (POLL activations by state), signals_pending, now_at, tasks_overdue
(RUNNING tasks past their deadline: attempts that started in time and still run).
Result set 6 (R-18): reason, instances (deferred checks by reason: pause, quota, capacity, disabled identity or app),
oldest_since (when the longest-standing of those deferrals began; for room, when it began to wait for room, under
either reason), oldest_ms (how long ago that was).
Result set 7 (R-18): class, failing (candidates whose last advance failed), repeated (failed 2 or more times in a row).
Result set 8 (live instances): status (RUNNING, NEEDS_REVIEW, CANCELLING), instances, paused (of them, control PAUSED).
Result set 9 (S-2): namespace, credential_id, actor, expires_at - the active credentials made to expire: those yet to
expire, the soonest first, at most 1,000; then those past their time (they authenticate no more, and stay listed until
disabled), the latest first, at most 100.
Result set 10 (R-18): namespace, queue, next_ready_at, wait_ms - for every queue with a task ready to start, the
task its next claim would take (highest priority, then the longest ready) and how long it has been ready: a queue no
worker serves, or whose workers are all busy, shows here long before its tasks expire.
Rules: R-10, R-11, R-18, C-3.'
    READS SQL DATA
BEGIN
    DECLARE v_now DATETIME(6);
    CALL _weave_now(v_now);
    SELECT 'INBOX' AS class, COUNT(*) AS due, MIN(available_at) AS oldest_due_at,
           TIMESTAMPDIFF(MICROSECOND, MIN(available_at), v_now) / 1000 AS lag_ms
      FROM pulse_inbox WHERE state = 'PENDING' AND available_at <= v_now
    UNION ALL
    SELECT 'CHECKPOINT', COUNT(*), MIN(available_at), TIMESTAMPDIFF(MICROSECOND, MIN(available_at), v_now) / 1000
      FROM weave_pending_advances WHERE available_at <= v_now
    UNION ALL
    SELECT 'SIGNAL', COUNT(*), MIN(available_at), TIMESTAMPDIFF(MICROSECOND, MIN(available_at), v_now) / 1000
      FROM weave_signals WHERE status = 'PENDING' AND available_at <= v_now
    UNION ALL
    SELECT 'LEASE', COUNT(*), MIN(lease_expires_at), TIMESTAMPDIFF(MICROSECOND, MIN(lease_expires_at), v_now) / 1000
      FROM pulse_attempts WHERE status = 'RUNNING' AND lease_expires_at <= v_now
    UNION ALL
    SELECT 'TASK_EXPIRY', COUNT(*), MIN(deadline_at), TIMESTAMPDIFF(MICROSECOND, MIN(deadline_at), v_now) / 1000
      FROM pulse_tasks WHERE status = 'QUEUED' AND deadline_at <= v_now;
    SELECT status, COUNT(*) AS tasks FROM pulse_tasks FORCE INDEX (ix_task_deadline)
     WHERE status IN ('QUEUED', 'RUNNING') GROUP BY status;
    -- Reasons of instances in NEEDS_REVIEW only: a reason opened while the instance was CANCELLING stays open after
    -- it ends (the fact is kept), but no person can act on it and no review list shows it. So they are read from the
    -- instances in review (one index range per namespace) to their open reasons, never from every open reason: those
    -- kept open on CANCELLED instances are history, which a count of live work must not read (R-11).
    -- By code, and in all (the row whose code is NULL): a crashing worker's TASK_UNKNOWNs are not a business
    -- value's POLL_REVIEW_VALUEs, and a count alone does not tell them apart.
    SELECT r.code, COUNT(r.id) AS open_review_reasons, COUNT(DISTINCT r.instance_id) AS instances_in_review,
           v_now AS now_at
      FROM weave_namespaces n
      STRAIGHT_JOIN weave_instances i FORCE INDEX (ix_instance_status)
        ON i.namespace_id = n.id AND i.status = 'NEEDS_REVIEW'
      STRAIGHT_JOIN weave_review_reasons r FORCE INDEX (ix_review_instance)
        ON r.instance_id = i.id AND r.closed_at IS NULL
     GROUP BY r.code WITH ROLLUP;
    SELECT b.le_seconds, COUNT(w.id) AS timers
      FROM (SELECT 0.1 AS le_seconds UNION ALL SELECT 0.5 UNION ALL SELECT 1 UNION ALL SELECT 5 UNION ALL SELECT 30
            UNION ALL SELECT 300 UNION ALL SELECT NULL) AS b
      LEFT JOIN weave_waits w FORCE INDEX (ix_wait_settled)
        ON w.kind = 'TIMER' AND w.settled_at >= v_now - INTERVAL 5 MINUTE AND w.status = 'SATISFIED'
       AND (b.le_seconds IS NULL OR TIMESTAMPDIFF(MICROSECOND, w.due_at, w.settled_at) <= b.le_seconds * 1000000)
     GROUP BY b.le_seconds ORDER BY b.le_seconds IS NULL, b.le_seconds;
    SELECT (SELECT COUNT(*) FROM weave_poll_states WHERE state = 'IN_FLIGHT') AS polls_in_flight,
           (SELECT COUNT(*) FROM weave_poll_states WHERE state = 'WAITING') AS polls_waiting,
           (SELECT COUNT(*) FROM weave_signals WHERE status = 'PENDING') AS signals_pending, v_now AS now_at,
           (SELECT COUNT(*) FROM pulse_tasks FORCE INDEX (ix_task_deadline)
             WHERE status = 'RUNNING' AND deadline_at <= v_now) AS tasks_overdue;
    -- How long the longest deferral of each reason has lasted: a count alone does not tell an instance that waits
    -- for ever (others keep taking the room it waits for) from many that each wait a moment.
    SELECT deferred_reason AS reason, COUNT(DISTINCT instance_id) AS instances, MIN(deferred_since) AS oldest_since,
           TIMESTAMPDIFF(MICROSECOND, MIN(deferred_since), v_now) / 1000 AS oldest_ms
      FROM weave_pending_advances FORCE INDEX (ix_checkpoint_room_line)
     WHERE deferred_reason IS NOT NULL GROUP BY deferred_reason ORDER BY deferred_reason;
    SELECT 'CHECKPOINT' AS class, COUNT(*) AS failing, COALESCE(SUM(attempts >= 2), 0) AS repeated
      FROM weave_pending_advances WHERE attempts > 0
    UNION ALL
    SELECT 'INBOX', COUNT(*), COALESCE(SUM(attempts >= 2), 0) FROM pulse_inbox WHERE state = 'PENDING' AND attempts > 0
    UNION ALL
    SELECT 'SIGNAL', COUNT(*), COALESCE(SUM(attempts >= 2), 0) FROM weave_signals
     WHERE status = 'PENDING' AND attempts > 0;
    -- Live statuses only, one index range per namespace: settled instances are history (R-11).
    SELECT st.status, COUNT(i.id) AS instances, COALESCE(SUM(i.control = 'PAUSED'), 0) AS paused
      FROM (SELECT 'RUNNING' AS status UNION ALL SELECT 'NEEDS_REVIEW' UNION ALL SELECT 'CANCELLING') AS st
      LEFT JOIN weave_namespaces n ON TRUE
      LEFT JOIN weave_instances i FORCE INDEX (ix_instance_status) ON i.namespace_id = n.id AND i.status = st.status
     GROUP BY st.status ORDER BY FIELD(st.status, 'RUNNING', 'NEEDS_REVIEW', 'CANCELLING');
    -- A credential that expires takes down whatever uses it: its time, watched like a certificate's. Those yet to
    -- expire come first, and apart: short-lived tokens that were never disabled, past their time, would otherwise
    -- fill the list and push out the one about to break. Both parts are ranges of the expiry index.
    SELECT x.namespace, x.credential_id, x.actor, x.expires_at
      FROM ((SELECT 0 AS part, n.name AS namespace, c.id, CONCAT('cred_', c.id) AS credential_id, c.actor, c.expires_at
               FROM weave_credentials c JOIN weave_namespaces n ON n.id = c.namespace_id
              WHERE c.status = 'ACTIVE' AND c.expires_at > v_now
              ORDER BY c.expires_at, c.id LIMIT 1000)
            UNION ALL
            (SELECT 1, n.name, c.id, CONCAT('cred_', c.id), c.actor, c.expires_at
               FROM weave_credentials c JOIN weave_namespaces n ON n.id = c.namespace_id
              WHERE c.status = 'ACTIVE' AND c.expires_at <= v_now
              ORDER BY c.expires_at DESC, c.id DESC LIMIT 100)) x
     ORDER BY x.part, IF(x.part = 0, x.expires_at, NULL), IF(x.part = 0, x.id, NULL), x.expires_at DESC, x.id DESC;
    -- The head of each queue's line, as a claim reads it (one index entry a queue, past the few not ready yet): a
    -- task ready for long and not taken says that nothing claims from its queue. A count of queued tasks does not:
    -- it stays flat while another queue's work runs.
    SELECT h.namespace, h.queue, h.next_ready_at, TIMESTAMPDIFF(MICROSECOND, h.next_ready_at, v_now) / 1000 AS wait_ms
      FROM (SELECT n.name AS namespace, q.name AS queue,
                   (SELECT t.available_at FROM pulse_tasks t FORCE INDEX (ix_task_claim)
                     WHERE t.queue_id = q.id AND t.status = 'QUEUED' AND t.available_at <= v_now
                     ORDER BY t.priority DESC, t.available_at, t.id LIMIT 1) AS next_ready_at
              FROM weave_queues q JOIN weave_namespaces n ON n.id = q.namespace_id) AS h
     WHERE h.next_ready_at IS NOT NULL
     ORDER BY h.next_ready_at, h.namespace, h.queue;
END
