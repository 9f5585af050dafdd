-- History retention: removes settled instances with every row that is theirs, a window of the namespace's
-- instances at a time, each window one transaction with its audit row (R-1, R-4). Only an instance that is
-- settled for good is removed: SUCCEEDED or CANCELLED, finished before the cutoff, with nothing left open
-- (no task queued or running, no outcome waiting in the inbox, no signal pending, no checkpoint). One that is
-- settled but still holds work is kept and named (held): the engine never leaves one so, and a person should
-- look before its facts go. A review reason still open is not work: one recorded while the instance was
-- cancelling stays open once it is CANCELLED (the fact is kept, _weave_review_open), and goes with it.
--
-- Locks (R-3): the admin credential (shared), then the instances to remove (exclusive, SKIP LOCKED: an
-- instance another transaction is deciding about is left for the next run, and the purge never makes a
-- decision wait), then their child records in R-3's order, the histories (review reasons, events, audit
-- rows) last. Every writer of an instance's rows takes the instance's lock first, except a worker's late
-- report, which locks the task before it stores itself: a task goes in one statement with its late reports,
-- so a report either lands before the purge takes the task (and goes with it) or finds no task and changes
-- nothing.
--
-- The counters of /metrics keep what a purge removes (weave_metrics_fold adds each final wait, signal and round to
-- its sums once): an instance with a row that became final at or after the fold's horizon is left for a later run
-- (uncounted), so that no counter ever goes down. `weave workflows purge` folds first.
--
-- The window is the next in_limit instances of the namespace after the cursor, in id order, read without
-- locks: a run reads each remaining instance once, and stops at the first window whose instances were all
-- created at or after the cutoff (none after them can have finished before it).
CREATE PROCEDURE weave_instances_purge(
        IN in_token           VARCHAR(512),
        IN in_namespace       VARCHAR(200),
        IN in_finished_before DATETIME(6),
        IN in_after           VARCHAR(64),
        IN in_limit           INT,
        IN in_reason          VARCHAR(1024),
        IN in_only            LONGTEXT,
        IN in_dry_run         BOOLEAN)
    COMMENT 'Description: removes settled instances (SUCCEEDED or CANCELLED, finished before in_finished_before, no
work left open) with all their rows: steps, activations, waits, polls and rounds, tasks with their attempts,
permits, late reports and inbox events, signals, checkpoints, review reasons, events and audit rows. One window of
the namespace''s instances per call, in id order after the cursor; one transaction per call, with one audit row
(instances.purge, namespace-level: it outlives the instances) naming every instance removed. A settled instance
that still holds work (a task queued or running, an inbox event or a signal pending, a checkpoint) is kept and
named in held_ids. Workflow ids are never reused; a start with the idempotency key of a removed instance starts a
new instance.
Parameters: in_token (admin scope, every queue: *), in_namespace, in_finished_before (UTC; not later than the engine
clock), in_after (the cursor: NULL to begin, then the next_after of the previous call), in_limit (window size 1..1000,
NULL = 100), in_reason (1-1024 characters, kept in the audit row), in_only (NULL; a JSON array of workflow ids:
remove only those of them the window holds, as a dry run named them once their rows were archived; or a JSON object
of workflow id to the number of rows archived for it: the same, and the window is refused, nothing removed, when
the instances it removes hold another number of rows than was archived for them), in_dry_run
(TRUE, or any other non-zero value: count and name what would go, change nothing, write no audit row).
Result set: purged (instances removed, or that would be), workflow_ids (JSON array of them), rows_deleted, held
(settled but still holding work), held_ids (JSON array of workflow ids), uncounted (settled instances left for a
later run because /metrics has not counted their last final rows yet: weave_metrics_fold counts them), next_after
(the cursor for the next call; NULL when the run is done).
Errors: 50001 UNAUTHENTICATED, 50002 FORBIDDEN, 50003 NOT_FOUND (namespace), 50013 IN_TRANSACTION,
50015 HISTORY_CHANGED (rows were added to an archived instance since: archive it again), 50100 INVALID_ARGUMENT
(finished_before, after, only), 50111 REASON_INVALID, 50121 LIMIT_INVALID.
Rules: R-1, R-3, R-4, M-4.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_now DATETIME(6);
    DECLARE v_ns BIGINT UNSIGNED;
    DECLARE v_cred BIGINT UNSIGNED;
    DECLARE v_actor VARCHAR(128);
    DECLARE v_limit INT DEFAULT COALESCE(in_limit, 100);
    DECLARE v_after BIGINT UNSIGNED DEFAULT 0;
    DECLARE v_seen INT;
    DECLARE v_last BIGINT UNSIGNED;
    DECLARE v_first_created DATETIME(6);
    DECLARE v_purged INT DEFAULT 0;
    DECLARE v_rows BIGINT DEFAULT 0;
    DECLARE v_held INT DEFAULT 0;
    DECLARE v_held_ids LONGTEXT;
    DECLARE v_folded DATETIME(6);  -- /metrics has counted every row final before this
    DECLARE v_uncounted INT DEFAULT 0;
    DECLARE v_locked LONGTEXT;  -- JSON array of the window's settled instances this call locked
    DECLARE v_batch LONGTEXT;   -- those of them to remove: the locked ones less the held ones
    DECLARE v_ids LONGTEXT;     -- their workflow ids, for the audit row
    DECLARE v_archived BIGINT DEFAULT NULL;  -- in_only as an object: the rows archived for the instances removed
    DECLARE v_tasks LONGTEXT;        -- the ids of their tasks, inbox events, signals and checkpoints
    DECLARE v_inbox LONGTEXT;
    DECLARE v_signals LONGTEXT;
    DECLARE v_checkpoints LONGTEXT;
    DECLARE v_allowed VARCHAR(2048);  -- the credential's own queues
    -- Any true value is a dry run, as SQL reads one (TRUE, 1, 2, -1 ...): a BOOLEAN is a TINYINT, and a caller's
    -- true must never remove anything.
    DECLARE v_dry BOOLEAN DEFAULT COALESCE(in_dry_run <> 0, FALSE);
    DECLARE v_tx BOOLEAN DEFAULT FALSE;  -- TRUE once this routine has started its own transaction
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN IF v_tx THEN ROLLBACK; END IF; RESIGNAL; END;
    CALL _weave_transaction_begin('weave_instances_purge', v_tx);  -- refused inside a caller's transaction (R-1)
    -- A retention run removes the history of every queue's instances: only an admin of every queue (*) runs it.
    CALL _weave_admin_begin(in_token, in_namespace, 'admin', '*', v_ns, v_cred, v_actor, v_now, v_allowed);
    IF v_limit < 1 OR v_limit > 1000 THEN
        CALL _weave_raise(50121, 'LIMIT_INVALID: limit must be 1..1000');
    END IF;
    IF in_finished_before IS NULL OR in_finished_before > v_now THEN
        CALL _weave_raise(50100, CONCAT('INVALID_ARGUMENT: finished_before must be given and not later than the ',
                                        'engine clock (', DATE_FORMAT(v_now, '%Y-%m-%dT%H:%i:%s.%fZ'), ')'));
    END IF;
    IF in_only IS NOT NULL AND (NOT JSON_VALID(in_only) OR JSON_TYPE(in_only) NOT IN ('ARRAY', 'OBJECT')) THEN
        CALL _weave_raise(50100, CONCAT('INVALID_ARGUMENT: only must be a JSON array of workflow ids, or an object of ',
                                        'workflow id to the number of rows archived'));
    ELSEIF JSON_TYPE(in_only) = 'OBJECT' AND JSON_LENGTH(in_only) > 0
           AND NOT JSON_EXTRACT(in_only, '$.*') REGEXP '^\\[[0-9]{1,18}(, [0-9]{1,18})*\\]\\z' THEN
        CALL _weave_raise(50100, 'INVALID_ARGUMENT: only''s row counts must be whole numbers');
    END IF;
    SET v_after = _weave_cursor_id(in_after, 'wf_',
                                   'INVALID_ARGUMENT: after must be a workflow id (wf_...) from next_after');
    IF NOT v_dry AND (in_reason IS NULL OR NOT in_reason REGEXP '[^[:space:]]') THEN
        CALL _weave_raise(50111, 'REASON_INVALID: reason must be 1-1024 characters');
    END IF;

    -- The window's ids, and its tasks', inbox events', signals' and checkpoints' ids, are JSON lists, which MariaDB
    -- cuts at the session's group_concat_max_len (a caller may keep MySQL's 1024, and a window of long polls holds
    -- millions of task ids): each statement that builds one raises it for itself alone (SET STATEMENT, in a comment
    -- only MariaDB runs; MySQL does not cap JSON_ARRAYAGG).
    -- The window, read without locks.
    SELECT COUNT(*), MAX(id), MIN(created_at) INTO v_seen, v_last, v_first_created
      FROM (SELECT id, created_at FROM weave_instances
             WHERE namespace_id = v_ns AND id > v_after ORDER BY id LIMIT v_limit) w;

    -- The settled instances of the window, found without locks, then locked by their ids (their state read again
    -- under the lock); one another transaction holds is left for the next run. Locked by id, and every row of
    -- theirs below removed by its own key where the engine takes rows SKIP LOCKED (tasks, inbox events, signals,
    -- checkpoints): a locking read over a range would hold, for an instant, each row it reads on its way, live
    -- ones of other instances included, and a claim or a scan passing then would skip them.
    /*M!100301 SET STATEMENT group_concat_max_len = 1073741824 FOR */ SELECT JSON_ARRAYAGG(id) INTO v_locked FROM weave_instances
     WHERE namespace_id = v_ns AND id > v_after AND id <= v_last AND status IN ('SUCCEEDED', 'CANCELLED')
       AND finished_at < in_finished_before
       AND (in_only IS NULL OR IF(JSON_TYPE(in_only) = 'OBJECT',
                                  JSON_CONTAINS_PATH(in_only, 'one', CONCAT('$.wf_', id)),
                                  JSON_CONTAINS(in_only, JSON_QUOTE(CONCAT('wf_', id)))));
    /*M!100301 SET STATEMENT group_concat_max_len = 1073741824 FOR */ SELECT JSON_ARRAYAGG(i.id) INTO v_locked
      FROM JSON_TABLE(COALESCE(v_locked, '[]'), '$[*]' COLUMNS (id BIGINT UNSIGNED PATH '$')) c
      STRAIGHT_JOIN weave_instances i FORCE INDEX (PRIMARY) ON i.id = c.id
     WHERE i.status IN ('SUCCEEDED', 'CANCELLED') AND i.finished_at < in_finished_before
       FOR UPDATE SKIP LOCKED;
    -- Uncounted: a row of theirs became final after the fold's horizon (a late signal rejected a minute ago, or no
    -- fold yet); they wait for a later run, once /metrics has counted it. Each instance's own rows, by its index, in
    -- scalar subqueries: as EXISTS, the server turns them into a semi-join that reads the whole table into a set, and
    -- the final-time indexes would read every row final since the horizon.
    SELECT COALESCE(MAX(folded_until), '1000-01-01') INTO v_folded FROM weave_metric_folds WHERE id = 1;
    /*M!100301 SET STATEMENT group_concat_max_len = 1073741824 FOR */ SELECT COUNT(*), JSON_ARRAYAGG(b.id) INTO v_uncounted, v_batch
      FROM JSON_TABLE(COALESCE(v_locked, '[]'), '$[*]' COLUMNS (id BIGINT UNSIGNED PATH '$')) b
     WHERE (SELECT 1 FROM weave_waits w FORCE INDEX (ix_wait_instance)
             WHERE w.instance_id = b.id AND w.settled_at >= v_folded LIMIT 1) IS NOT NULL
        OR (SELECT 1 FROM weave_signals s FORCE INDEX (ix_signal_target)
             WHERE s.instance_id = b.id AND s.consumed_at >= v_folded LIMIT 1) IS NOT NULL
        OR (SELECT 1 FROM weave_poll_rounds r FORCE INDEX (ix_round_instance)
             WHERE r.instance_id = b.id AND r.decided_at >= v_folded LIMIT 1) IS NOT NULL;
    IF v_uncounted > 0 THEN
        /*M!100301 SET STATEMENT group_concat_max_len = 1073741824 FOR */ SELECT JSON_ARRAYAGG(b.id) INTO v_locked
          FROM JSON_TABLE(v_locked, '$[*]' COLUMNS (id BIGINT UNSIGNED PATH '$')) b
         WHERE NOT JSON_CONTAINS(v_batch, CAST(b.id AS CHAR));
    END IF;
    -- Held: settled, but some work of theirs is still open. Each kind is written under the instance's lock, or
    -- (an inbox event) only at the end of a task that is not open.
    /*M!100301 SET STATEMENT group_concat_max_len = 1073741824 FOR */ SELECT COUNT(*), JSON_ARRAYAGG(CONCAT('wf_', b.id)) INTO v_held, v_held_ids
      FROM JSON_TABLE(COALESCE(v_locked, '[]'), '$[*]' COLUMNS (id BIGINT UNSIGNED PATH '$')) b
     WHERE (SELECT 1 FROM pulse_tasks t FORCE INDEX (ix_task_instance)
             WHERE t.instance_id = b.id AND t.status IN ('QUEUED', 'RUNNING') LIMIT 1) IS NOT NULL
        OR (SELECT 1 FROM pulse_inbox x FORCE INDEX (ix_inbox_instance)
             WHERE x.instance_id = b.id AND x.state = 'PENDING' LIMIT 1) IS NOT NULL
        OR (SELECT 1 FROM weave_signals s FORCE INDEX (ix_signal_target)
             WHERE s.instance_id = b.id AND s.status = 'PENDING' LIMIT 1) IS NOT NULL
        OR (SELECT 1 FROM weave_pending_advances c FORCE INDEX (uq_checkpoint)
             WHERE c.instance_id = b.id LIMIT 1) IS NOT NULL;
    SET v_batch = v_locked;
    IF v_held > 0 THEN
        /*M!100301 SET STATEMENT group_concat_max_len = 1073741824 FOR */ SELECT JSON_ARRAYAGG(b.id) INTO v_batch
          FROM JSON_TABLE(v_locked, '$[*]' COLUMNS (id BIGINT UNSIGNED PATH '$')) b
         WHERE NOT JSON_CONTAINS(v_held_ids, JSON_QUOTE(CONCAT('wf_', b.id)));
    END IF;
    SET v_purged = COALESCE(JSON_LENGTH(v_batch), 0);

    /*M!100301 SET STATEMENT group_concat_max_len = 1073741824 FOR */ SELECT JSON_ARRAYAGG(CONCAT('wf_', b.id)) INTO v_ids
      FROM JSON_TABLE(COALESCE(v_batch, '[]'), '$[*]' COLUMNS (id BIGINT UNSIGNED PATH '$')) b;
    IF v_purged > 0 AND NOT v_dry THEN
        IF JSON_TYPE(in_only) = 'OBJECT' THEN
            SELECT SUM(JSON_EXTRACT(in_only, CONCAT('$.wf_', b.id))) INTO v_archived
              FROM JSON_TABLE(v_batch, '$[*]' COLUMNS (id BIGINT UNSIGNED PATH '$')) b;
        END IF;
        -- The rows of the kinds the engine takes SKIP LOCKED, found without locks: none can be added to a settled
        -- instance this call holds (each is written under its instance's lock, an inbox event only at the end of a
        -- task that is open), and each is then removed by its own key.
        -- Each list is '[]' when empty, so that NULL is only a list a KILL QUERY cut short (it gives a subquery of a
        -- select list no value and no error: see _weave_root_advance); such a batch would remove its instances and
        -- leave their tasks, signals and checkpoints behind.
        /*M!100301 SET STATEMENT group_concat_max_len = 1073741824 FOR */ SELECT (SELECT COALESCE(JSON_ARRAYAGG(t.id), '[]') FROM JSON_TABLE(v_batch, '$[*]' COLUMNS (id BIGINT UNSIGNED PATH '$')) b
                  STRAIGHT_JOIN pulse_tasks t FORCE INDEX (ix_task_instance) ON t.instance_id = b.id),
               (SELECT COALESCE(JSON_ARRAYAGG(x.id), '[]') FROM JSON_TABLE(v_batch, '$[*]' COLUMNS (id BIGINT UNSIGNED PATH '$')) b
                  STRAIGHT_JOIN pulse_inbox x FORCE INDEX (ix_inbox_instance) ON x.instance_id = b.id),
               (SELECT COALESCE(JSON_ARRAYAGG(s.id), '[]') FROM JSON_TABLE(v_batch, '$[*]' COLUMNS (id BIGINT UNSIGNED PATH '$')) b
                  STRAIGHT_JOIN weave_signals s FORCE INDEX (ix_signal_target) ON s.instance_id = b.id),
               (SELECT COALESCE(JSON_ARRAYAGG(c.id), '[]') FROM JSON_TABLE(v_batch, '$[*]' COLUMNS (id BIGINT UNSIGNED PATH '$')) b
                  STRAIGHT_JOIN weave_pending_advances c FORCE INDEX (uq_checkpoint) ON c.instance_id = b.id)
          INTO v_tasks, v_inbox, v_signals, v_checkpoints;
        IF v_tasks IS NULL OR v_inbox IS NULL OR v_signals IS NULL OR v_checkpoints IS NULL THEN
            CALL _weave_raise(50016, 'INTERRUPTED: the purge''s read of the batch''s records came back empty; nothing is changed');
        END IF;
        -- Child records in R-3's order, then the histories, then the instances themselves; each a join from the
        -- batch's ids (or its rows' own) to the rows, so that it reads and locks only the rows it removes. Each
        -- joined table's index is forced: MariaDB plans a multi-table DELETE driven by JSON_TABLE as a full scan of
        -- the joined table when it runs again (a routine's statement after its first call in a session), and a
        -- locking scan holds, for an instant, every row it passes, so a claim passing then would skip a live task.
        DELETE x FROM JSON_TABLE(v_batch, '$[*]' COLUMNS (id BIGINT UNSIGNED PATH '$')) b
                 STRAIGHT_JOIN weave_steps x FORCE INDEX (uq_step_key) ON x.instance_id = b.id;
        SET v_rows = v_rows + ROW_COUNT();
        DELETE x FROM JSON_TABLE(v_batch, '$[*]' COLUMNS (id BIGINT UNSIGNED PATH '$')) b
                 STRAIGHT_JOIN weave_activations x FORCE INDEX (ix_activation_instance) ON x.instance_id = b.id;
        SET v_rows = v_rows + ROW_COUNT();
        DELETE x FROM JSON_TABLE(v_batch, '$[*]' COLUMNS (id BIGINT UNSIGNED PATH '$')) b
                 STRAIGHT_JOIN weave_waits x FORCE INDEX (ix_wait_instance) ON x.instance_id = b.id;
        SET v_rows = v_rows + ROW_COUNT();
        DELETE x FROM JSON_TABLE(v_batch, '$[*]' COLUMNS (id BIGINT UNSIGNED PATH '$')) b
                 STRAIGHT_JOIN weave_poll_states x FORCE INDEX (ix_poll_instance) ON x.instance_id = b.id;
        SET v_rows = v_rows + ROW_COUNT();
        DELETE x FROM JSON_TABLE(v_batch, '$[*]' COLUMNS (id BIGINT UNSIGNED PATH '$')) b
                 STRAIGHT_JOIN weave_poll_rounds x FORCE INDEX (ix_round_instance) ON x.instance_id = b.id;
        SET v_rows = v_rows + ROW_COUNT();
        -- A task with its attempts, their permits and its late reports in one statement: a late report locks its
        -- task before it stores itself, so it lands before this statement takes the task (and goes with it) or
        -- finds no task.
        DELETE t, a, p, l
          FROM JSON_TABLE(COALESCE(v_tasks, '[]'), '$[*]' COLUMNS (id BIGINT UNSIGNED PATH '$')) k
          STRAIGHT_JOIN pulse_tasks t FORCE INDEX (PRIMARY) ON t.id = k.id
          LEFT JOIN pulse_attempts a FORCE INDEX (uq_attempt_no) ON a.task_id = t.id
          LEFT JOIN pulse_permits p FORCE INDEX (PRIMARY) ON p.attempt_id = a.id
          LEFT JOIN pulse_late_reports l FORCE INDEX (ix_late_task) ON l.task_id = t.id;
        SET v_rows = v_rows + ROW_COUNT();
        DELETE x FROM JSON_TABLE(COALESCE(v_inbox, '[]'), '$[*]' COLUMNS (id BIGINT UNSIGNED PATH '$')) k
                 STRAIGHT_JOIN pulse_inbox x FORCE INDEX (PRIMARY) ON x.id = k.id;
        SET v_rows = v_rows + ROW_COUNT();
        DELETE x FROM JSON_TABLE(COALESCE(v_signals, '[]'), '$[*]' COLUMNS (id BIGINT UNSIGNED PATH '$')) k
                 STRAIGHT_JOIN weave_signals x FORCE INDEX (PRIMARY) ON x.id = k.id;
        SET v_rows = v_rows + ROW_COUNT();
        DELETE x FROM JSON_TABLE(COALESCE(v_checkpoints, '[]'), '$[*]' COLUMNS (id BIGINT UNSIGNED PATH '$')) k
                 STRAIGHT_JOIN weave_pending_advances x FORCE INDEX (PRIMARY) ON x.id = k.id;
        SET v_rows = v_rows + ROW_COUNT();
        DELETE x FROM JSON_TABLE(v_batch, '$[*]' COLUMNS (id BIGINT UNSIGNED PATH '$')) b
                 STRAIGHT_JOIN weave_review_reasons x FORCE INDEX (ix_review_instance) ON x.instance_id = b.id;
        SET v_rows = v_rows + ROW_COUNT();
        DELETE x FROM JSON_TABLE(v_batch, '$[*]' COLUMNS (id BIGINT UNSIGNED PATH '$')) b
                 STRAIGHT_JOIN weave_events x FORCE INDEX (PRIMARY) ON x.instance_id = b.id;
        SET v_rows = v_rows + ROW_COUNT();
        DELETE x FROM JSON_TABLE(v_batch, '$[*]' COLUMNS (id BIGINT UNSIGNED PATH '$')) b
                 STRAIGHT_JOIN weave_audit x FORCE INDEX (ix_audit_instance) ON x.instance_id = b.id;
        SET v_rows = v_rows + ROW_COUNT();
        DELETE x FROM JSON_TABLE(v_batch, '$[*]' COLUMNS (id BIGINT UNSIGNED PATH '$')) b
                 STRAIGHT_JOIN weave_instances x FORCE INDEX (PRIMARY) ON x.id = b.id;
        SET v_rows = v_rows + ROW_COUNT();
        -- Rows are only ever added to a settled instance (a late report, a signal refused and recorded), and each
        -- was locked by the statement that removed it: a count other than the archive's means rows the archive
        -- does not hold. The window is undone, for the caller to archive it again.
        IF v_archived IS NOT NULL AND v_rows <> v_archived THEN
            CALL _weave_raise(50015, CONCAT('HISTORY_CHANGED: these instances hold ', v_rows, ' rows, not the ',
                                            v_archived, ' archived; archive them again'));
        END IF;
        CALL _weave_audit(v_ns, 0, v_cred, v_actor, 'instances.purge', NULL, NULL, v_now, NULL, in_reason,
                          JSON_OBJECT('finished_before', DATE_FORMAT(in_finished_before, '%Y-%m-%dT%H:%i:%s.%fZ'),
                                      'instances', v_purged + 0, 'rows_deleted', v_rows + 0,
                                      'workflow_ids', JSON_EXTRACT(v_ids, '$')),
                          NULL);
    END IF;
    COMMIT;
    SELECT v_purged AS purged, COALESCE(v_ids, '[]') AS workflow_ids, v_rows AS rows_deleted, v_held AS held,
           COALESCE(v_held_ids, '[]') AS held_ids, v_uncounted AS uncounted,
           IF(v_seen < v_limit OR v_first_created >= in_finished_before, NULL, CONCAT('wf_', v_last)) AS next_after;
END
