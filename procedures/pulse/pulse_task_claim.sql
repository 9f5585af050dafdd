-- Workers never wait on each other or on the engine: due tasks are picked with SKIP LOCKED and only
-- task, attempt and permit rows are touched (never the instance, never app or queue locks). Shape of
-- a claim on MySQL/MariaDB: SELECT ... FOR UPDATE SKIP LOCKED, then the updates, then a read-back.
-- The mutex is kept by the unique index on the held permits: a task whose key another attempt holds
-- is filtered out up front, and two claims racing for one key meet on the index, where the second
-- one skips its task instead of starting it.
CREATE PROCEDURE pulse_task_claim(
        IN in_worker_id VARCHAR(512),
        IN in_queues    VARCHAR(4096),
        IN in_namespace VARCHAR(200),
        IN in_limit     INT,
        IN in_lease_ms  BIGINT)
    COMMENT 'Description: claims up to in_limit due tasks for a worker (K-1): highest priority first, then earliest
available, then id; tasks whose mutex key is held by a RUNNING attempt of the namespace are skipped; tasks at or
past their deadline never start (K-6). Each claim starts attempt k+1 (RUNNING, lease until now + in_lease_ms) and
takes an execution permit.
Parameters: in_worker_id (1-128 chars), in_queues (comma list of queue names, each 1-64 letters, digits and _.:-;
unknown names find nothing), in_namespace (NULL or empty = every namespace), in_limit (1..1000), in_lease_ms (1..86400000).
Result set: one row per claimed task: task_id (tsk_<id>), attempt_id, attempt_no, max_attempts, namespace, queue,
workflow_id, step_key, round_no, handler, handler_version, input (JSON), business_key, mutex_key, priority,
deadline_at, started_at, lease_expires_at.
Errors: 50121 LIMIT_INVALID, 50200 LEASE_INVALID, 50201 WORKER_ID_INVALID, 50202 QUEUES_INVALID.
Rules: K-1, K-6, K-8, M-4.5, M-4.6.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_now DATETIME(6);
    DECLARE v_lease DATETIME(6);
    DECLARE v_limit INT DEFAULT 0;
    DECLARE v_queues VARCHAR(4096) DEFAULT REPLACE(COALESCE(in_queues, ''), ' ', '');
    DECLARE v_names LONGTEXT;  -- the queue names as a JSON array
    DECLARE v_queue_ids LONGTEXT DEFAULT NULL;
    DECLARE v_picked LONGTEXT DEFAULT '[]';
    DECLARE v_claimed LONGTEXT DEFAULT '[]';
    DECLARE v_skipped INT UNSIGNED DEFAULT 0;  -- tasks of a pick skipped because their mutex key was taken
    DECLARE v_started INT UNSIGNED DEFAULT 0;  -- attempts started before the current pick
    DECLARE v_tx BOOLEAN DEFAULT FALSE;  -- TRUE once this routine has started its own transaction
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN IF v_tx THEN ROLLBACK; END IF; RESIGNAL; END;
    -- Refused inside a caller's transaction (R-1): on MariaDB the probe is a variable read, with no call unless
    -- it finds one open (as _weave_transaction_begin probes); elsewhere _weave_transaction_own probes.
    IF VERSION() LIKE '%MariaDB%' THEN
        IF @@in_transaction = 1 THEN CALL _weave_transaction_own('pulse_task_claim'); END IF;
    ELSE
        CALL _weave_transaction_own('pulse_task_claim');
    END IF;
    CALL _weave_clock_own();  -- its transactions decide by the server's clock (R-2)

    IF in_worker_id IS NULL OR CHAR_LENGTH(in_worker_id) NOT BETWEEN 1 AND 128 THEN
        CALL _weave_raise(50201, 'WORKER_ID_INVALID: worker id must be 1-128 characters');
    END IF;
    -- A list of queue names by the rule every queue list has (a credential's, a definition's).
    IF CHAR_LENGTH(v_queues) > 2048 OR NOT (v_queues REGEXP '^[A-Za-z0-9_.:-]{1,64}(,[A-Za-z0-9_.:-]{1,64})*\\z') THEN
        CALL _weave_raise(50202, 'QUEUES_INVALID: give 1-2048 characters of comma-separated queue names '
                                 '(each 1-64 letters, digits and _.:-)');
    END IF;
    IF in_limit IS NULL OR in_limit NOT BETWEEN 1 AND 1000 THEN
        CALL _weave_raise(50121, 'LIMIT_INVALID: claim limit must be 1..1000');
    END IF;
    IF in_lease_ms IS NULL OR in_lease_ms NOT BETWEEN 1 AND 86400000 THEN
        CALL _weave_raise(50200, 'LEASE_INVALID: lease_ms must be 1..86400000');
    END IF;
    SET v_limit = in_limit;

    -- An idle worker asks often: when no task of these queues is QUEUED at all, the answer is no rows after
    -- one read of the claim index, without a transaction (a task that is QUEUED but not yet available takes the
    -- full path, which looks at available_at). The same read names the queues worth looking at, and brings the
    -- clock: a claim takes no lock before it picks (its tasks are skipped, never waited for), so nothing orders
    -- it but the pick itself. A plain read: queue rows are locked by task creation (capacity), and a worker
    -- must not wait on it. The queues are looked up by name, from the list (a JSON array of the names, which
    -- the check above keeps free of quotes), through the index on (name, namespace): the namespace's id is a
    -- constant of the statement, so a claim reads the queues it names and no others, however many namespaces
    -- and queues there are. The queue test is a scalar subquery, one look at the claim index per queue, for the
    -- reason the mutex test below is one.
    -- A session with autocommit off would open a transaction with the plain read below, and this routine's own
    -- could then not be started (1568): in such a session the routine's transaction starts before the read, by
    -- the shared opener; the usual path below starts its own after the read, the refusal's probe made above.
    IF @@autocommit = 0 THEN
        CALL _weave_transaction_begin('pulse_task_claim', v_tx);
    END IF;
    SET v_names = CONCAT('["', REPLACE(v_queues, ',', '","'), '"]');
    -- The queues' ids are a JSON list, which MariaDB cuts at the session's group_concat_max_len: raised for this
    -- statement alone.
    /*M!100301 SET STATEMENT group_concat_max_len = 1048576 FOR */
    SELECT JSON_ARRAYAGG(DISTINCT q.id),
           UTC_TIMESTAMP(6) + INTERVAL (SELECT clock_offset_us FROM weave_install WHERE id = 1) MICROSECOND
      INTO v_queue_ids, v_now
      FROM JSON_TABLE(v_names, '$[*]' COLUMNS (name VARCHAR(2048) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin
                                                PATH '$')) j
      STRAIGHT_JOIN weave_queues q FORCE INDEX (ix_queue_name) ON q.name = j.name
     WHERE (in_namespace IS NULL OR in_namespace = ''
            OR q.namespace_id = (SELECT n.id FROM weave_namespaces n WHERE n.name = in_namespace
                                                     AND OCTET_LENGTH(n.name) = OCTET_LENGTH(in_namespace)))
       AND (SELECT t.id FROM pulse_tasks t FORCE INDEX (ix_task_claim) WHERE t.queue_id = q.id AND t.status = 'QUEUED'
             LIMIT 1) IS NOT NULL;
    IF v_queue_ids IS NOT NULL THEN
        IF NOT v_tx THEN
            SET v_tx = TRUE;
            SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
            START TRANSACTION;
        END IF;
        SET v_lease = v_now + INTERVAL in_lease_ms * 1000 MICROSECOND;

        -- Per queue, the claim index (queue, status, priority DESC, available_at, id) gives the order, so each
        -- scan stops after in_limit rows it could lock, whatever the backlog. Rows are skipped, not waited for.
        -- The mutex test is a scalar subquery on purpose: an EXISTS may be planned as a materialisation that
        -- reads every permit ever taken; this one is one unique-index lookup per candidate. What a claim needs of
        -- each task is kept with it, so the queues are walked and the picked tasks claimed without reading them
        -- again: one queue's pick is already in claim order; several queues' picks are merged into that order
        -- by one sort of the list. A task whose key an attempt of this very claim took (or a concurrent claim's,
        -- since the pick read the permits) is skipped at its turn: when that leaves the claim short, it picks again
        -- for what is left, and the permits its own attempts now hold keep those keys out of the new pick. The tasks
        -- picked after the ones it started are the next ones in claim order, so the order holds across the picks.
        picks: LOOP
            SET v_picked = '[]', v_skipped = 0, v_started = JSON_LENGTH(v_claimed);
            pick: BEGIN
                DECLARE v_n INT UNSIGNED DEFAULT JSON_LENGTH(v_queue_ids);
                DECLARE v_i INT UNSIGNED DEFAULT 0;
                DECLARE v_qid BIGINT UNSIGNED;
                DECLARE v_done TINYINT DEFAULT 0;
                DECLARE v_id BIGINT UNSIGNED;
                DECLARE v_task_ns BIGINT UNSIGNED;
                DECLARE v_task_inst BIGINT UNSIGNED;
                DECLARE v_task_mutex VARCHAR(256);
                DECLARE v_task_no INT UNSIGNED;
                DECLARE v_task_max INT UNSIGNED;
                DECLARE v_priority INT;
                DECLARE v_available DATETIME(6);
                DECLARE c_queue CURSOR FOR
                    SELECT t.id, t.namespace_id, t.instance_id, t.mutex_key, t.attempts_used + 1, t.max_attempts,
                           t.priority, t.available_at
                      FROM pulse_tasks t FORCE INDEX (ix_task_claim)
                     WHERE t.queue_id = v_qid AND t.status = 'QUEUED' AND t.available_at <= v_now
                       AND t.deadline_at > v_now
                       AND (t.mutex_key IS NULL OR (
                            SELECT COUNT(*) FROM pulse_permits p
                             WHERE p.namespace_id = t.namespace_id AND p.mutex_held = t.mutex_key) = 0)
                     ORDER BY t.priority DESC, t.available_at, t.id
                     LIMIT v_limit
                       FOR UPDATE SKIP LOCKED;
                DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_done = 1;
                WHILE v_i < v_n DO
                    SET v_qid = JSON_VALUE(v_queue_ids, CONCAT('$[', v_i, ']')), v_i = v_i + 1, v_done = 0;
                    OPEN c_queue;
                    rows_of_queue: LOOP
                        FETCH c_queue INTO v_id, v_task_ns, v_task_inst, v_task_mutex, v_task_no, v_task_max,
                                           v_priority, v_available;
                        IF v_done = 1 THEN
                            LEAVE rows_of_queue;
                        END IF;
                        SET v_picked = JSON_ARRAY_APPEND(v_picked, '$', JSON_OBJECT(
                            'id', v_id + 0, 'ns', v_task_ns + 0, 'inst', v_task_inst + 0, 'queue', v_qid + 0,
                            'mutex', v_task_mutex, 'no', v_task_no + 0, 'max', v_task_max + 0,
                            'priority', v_priority + 0,
                            'available', DATE_FORMAT(v_available, '%Y-%m-%d %H:%i:%s.%f')));
                    END LOOP;
                    CLOSE c_queue;
                END WHILE;
                IF v_n > 1 AND JSON_LENGTH(v_picked) > 1 THEN
                    -- Across queues, the same order again over what was locked; what is not claimed is let go at
                    -- commit. MariaDB caps JSON_ARRAYAGG at the session's group_concat_max_len (1 MiB by default) and
                    -- fails the statement past it (1260): in_limit picks of each of several queues can be longer. The
                    -- cap is raised for this one statement (SET STATEMENT, in a comment only MariaDB runs); MySQL does
                    -- not cap JSON_ARRAYAGG.
                    /*M!100301 SET STATEMENT group_concat_max_len = 1073741824 FOR */
                    SELECT JSON_ARRAYAGG(JSON_EXTRACT(v_picked, CONCAT('$[', j.ord - 1, ']'))
                                         ORDER BY j.priority DESC, j.available, j.id)
                      INTO v_picked
                      FROM JSON_TABLE(v_picked, '$[*]' COLUMNS (ord FOR ORDINALITY, id BIGINT UNSIGNED PATH '$.id',
                                                                 priority INT PATH '$.priority',
                                                                 available VARCHAR(26) PATH '$.available')) j;
                END IF;
            END pick;

            claim: BEGIN
                DECLARE v_n INT UNSIGNED DEFAULT LEAST(JSON_LENGTH(v_picked), v_limit);  -- the first in_limit of them
                DECLARE v_i INT UNSIGNED DEFAULT 0;
                DECLARE v_one LONGTEXT;
                DECLARE v_task BIGINT UNSIGNED;
                DECLARE v_ns BIGINT UNSIGNED;
                DECLARE v_inst BIGINT UNSIGNED;
                DECLARE v_queue BIGINT UNSIGNED;
                DECLARE v_mutex VARCHAR(256);
                DECLARE v_no INT UNSIGNED;
                DECLARE v_max INT UNSIGNED;
                DECLARE v_attempt BIGINT UNSIGNED;
                DECLARE v_dup TINYINT;
                next_task: WHILE v_i < v_n DO
                    SET v_one = JSON_EXTRACT(v_picked, CONCAT('$[', v_i, ']')), v_i = v_i + 1;
                    SET v_task = JSON_VALUE(v_one, '$.id'), v_ns = JSON_VALUE(v_one, '$.ns'),
                        v_inst = JSON_VALUE(v_one, '$.inst'), v_queue = JSON_VALUE(v_one, '$.queue'),
                        v_mutex = JSON_VALUE(v_one, '$.mutex'),
                        v_no = JSON_VALUE(v_one, '$.no'), v_max = JSON_VALUE(v_one, '$.max');
                    IF v_no > v_max THEN
                        -- A QUEUED task with no attempt left cannot exist (M-4.5); never start one past the budget.
                        ITERATE next_task;
                    END IF;
                    INSERT INTO pulse_attempts (namespace_id, task_id, instance_id, attempt_no, worker_id, status,
                                                lease_expires_at, started_at)
                    VALUES (v_ns, v_task, v_inst, v_no, in_worker_id, 'RUNNING', v_lease, v_now);
                    SET v_attempt = LAST_INSERT_ID();
                    SET v_dup = 0;
                    BEGIN
                        DECLARE CONTINUE HANDLER FOR 1062 SET v_dup = 1;
                        INSERT INTO pulse_permits (attempt_id, namespace_id, queue_id, task_id, mutex_key, mutex_held,
                                                   taken_at)
                        VALUES (v_attempt, v_ns, v_queue, v_task, v_mutex, v_mutex, v_now);
                    END;
                    IF v_dup = 1 THEN
                        -- Another attempt took this mutex key first (in this claim or a concurrent one): skip.
                        DELETE FROM pulse_attempts WHERE id = v_attempt;
                        SET v_skipped = v_skipped + 1;
                    ELSE
                        UPDATE pulse_tasks SET status = 'RUNNING', attempts_used = v_no, updated_at = v_now
                         WHERE id = v_task;
                        SET v_claimed = JSON_ARRAY_APPEND(v_claimed, '$', v_attempt + 0);
                    END IF;
                END WHILE;
            END claim;
            -- Picked again only for room a skipped key left, and only while each pick starts something (so at most
            -- in_limit times): a claim with no key skipped stops here after one pick.
            IF v_skipped = 0 OR JSON_LENGTH(v_claimed) = v_started OR JSON_LENGTH(v_claimed) >= in_limit THEN
                LEAVE picks;
            END IF;
            SET v_limit = in_limit - JSON_LENGTH(v_claimed);
        END LOOP picks;
        COMMIT;
    ELSEIF v_tx THEN
        COMMIT;  -- nothing queued, in a session with autocommit off
    END IF;

    -- The claimed attempts in claim order: the list is sorted first, then each row is looked up by its key. On small
    -- tables the optimizer would rather scan them through a join buffer, which loses the list's order, and sort
    -- the joined rows again in a temporary table, on disk for the task's input (a file per claim).
    SELECT CONCAT('tsk_', t.id) AS task_id, a.id AS attempt_id, a.attempt_no, t.max_attempts, n.name AS namespace,
           q.name AS queue, CONCAT('wf_', t.instance_id) AS workflow_id, t.step_key, t.round_no, t.handler,
           t.handler_version, t.input, t.business_key, t.mutex_key, t.priority, t.deadline_at, a.started_at,
           a.lease_expires_at
      FROM JSON_TABLE(v_claimed, '$[*]' COLUMNS (ord FOR ORDINALITY, aid BIGINT UNSIGNED PATH '$')) j
      STRAIGHT_JOIN pulse_attempts a FORCE INDEX (PRIMARY) ON a.id = j.aid
      STRAIGHT_JOIN pulse_tasks t FORCE INDEX (PRIMARY) ON t.id = a.task_id
      STRAIGHT_JOIN weave_queues q FORCE INDEX (PRIMARY) ON q.id = t.queue_id
      STRAIGHT_JOIN weave_namespaces n FORCE INDEX (PRIMARY) ON n.id = t.namespace_id
     ORDER BY j.ord;
    IF @@autocommit = 0 THEN
        COMMIT;  -- the answer's read opened a transaction there: the session is left as the call found it
    END IF;
END
