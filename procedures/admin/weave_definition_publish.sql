-- The document arrives validated and canonicalised by the Python layer (procedures.definitions), which
-- says everything wrong with it at once; this routine holds a document sent straight to it to what no
-- instance could run without (numbers, queues, the steps' types, keys and graph), naming the first
-- problem. The digest is computed here so the stored digest always matches the stored bytes. Versions are
-- numbered under a lock on the namespace row: publishing is rare, and two first publications of one
-- name must not both become version 1. With an idempotency key, a retry whose first answer was lost answers
-- that answer again, under the same lock: a late retry of an older document does not make it the latest again.
CREATE PROCEDURE weave_definition_publish(
        IN in_token     VARCHAR(512),
        IN in_namespace VARCHAR(200),
        IN in_document  LONGTEXT,
        IN in_compiled  LONGTEXT,
        IN in_queues    VARCHAR(4096),
        IN in_idempotency_key VARCHAR(512))
    COMMENT 'Description: publishes a canonical definition document as the next immutable version; the same
content as the latest version returns that version instead. A publish with an idempotency key that the
namespace''s publishes have used before answers what that publish answered, whatever was published since.
Parameters: in_token (definitions:publish and every queue the definition uses), in_namespace, in_document (canonical
JSON), in_compiled (compiled expression templates per step), in_queues (the queues of the TASK and POLL steps,
distinct, in byte order, as the validator lists them; NULL: derived here from the document, as they always are; a
list that differs is refused), in_idempotency_key (NULL, or 1-128 printable ASCII, no space: the publish''s key in
the namespace, its first answer kept in its audit row).
Result set: name, version, digest, created (1 when a new version was written; a replay: the first answer''s),
replayed (1 when the key''s first answer is answered again).
Errors: 50001 UNAUTHENTICATED, 50002 FORBIDDEN, 50003 NOT_FOUND, 50005 IDEMPOTENCY_CONFLICT (the key published
another document), 50113 IDEMPOTENCY_KEY_INVALID, 50119 DEFINITION_INVALID (also for a document
of no step or more than 256, for in_queues
that differ from the steps'' queues, a TASK or POLL step without a queue, or a step''s number missing or outside the
range the validator allows: delay_ms, timeout_ms, interval_ms, max_rounds, task_timeout_ms, priority, retry; for a
step whose type is not one of the four, whose key is not a key or is another step''s, a SIGNAL step without its
contract, a step without its compiled expressions, an after that names no other step of the document or names one
twice, and steps that wait for each other in a cycle; the message names the first), 50124 QUEUE_NOT_FOUND
(queues the definition uses do not exist in the namespace; the message lists them, comma-separated, ending ",..."
when more did not fit), 50125 UNKNOWN_FIELD (the document has a field besides
name and steps).
Rules: M-2, R-18.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_now DATETIME(6);
    DECLARE v_ns BIGINT UNSIGNED;
    DECLARE v_cred BIGINT UNSIGNED;
    DECLARE v_actor VARCHAR(128);
    DECLARE v_name VARCHAR(512);
    DECLARE v_digest CHAR(64);
    DECLARE v_latest INT UNSIGNED DEFAULT NULL;
    DECLARE v_latest_digest CHAR(64);
    DECLARE v_version INT UNSIGNED;
    DECLARE v_id BIGINT UNSIGNED;
    DECLARE v_rest VARCHAR(4096);
    DECLARE v_queue VARCHAR(64);
    DECLARE v_queues VARCHAR(4096);
    DECLARE v_missing VARCHAR(4096);  -- the queues of the definition that do not exist, comma-separated
    DECLARE v_unqueued INT;
    DECLARE v_unknown LONGTEXT;
    DECLARE v_allowed VARCHAR(2048);  -- the credential's own queues
    DECLARE v_number VARCHAR(160) DEFAULT NULL;  -- the first number of a step that is missing or out of its range
    DECLARE v_problem VARCHAR(160) DEFAULT NULL;  -- the first step whose structure is not a definition's
    DECLARE v_forward INT DEFAULT 0;  -- edges to a step later in the document: only those can close a cycle
    DECLARE v_steps INT;
    DECLARE v_started INT;  -- steps that could start, all they wait for started before them
    DECLARE v_waiting VARCHAR(1100);  -- by position, four digits a step: how many steps it still waits for
    DECLARE v_free VARCHAR(800);  -- positions free to start, three digits each, in the order they came free
    DECLARE v_waiters LONGTEXT;  -- {position: the positions of the steps that wait for it, three digits each}
    DECLARE v_next VARCHAR(800);
    DECLARE v_head INT;
    DECLARE v_at INT;
    DECLARE v_pos INT;
    DECLARE v_left INT;
    DECLARE v_keyed LONGTEXT;  -- the answer of the publish the idempotency key made before, if it did
    DECLARE v_answer LONGTEXT;
    DECLARE v_tx BOOLEAN DEFAULT FALSE;  -- TRUE once this routine has started its own transaction
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN IF v_tx THEN ROLLBACK; END IF; RESIGNAL; END;
    CALL _weave_transaction_claim('weave_definition_publish', v_tx);
    CALL _weave_admin_begin(in_token, in_namespace, 'definitions:publish', NULL, v_ns, v_cred, v_actor, v_now,
                            v_allowed);
    IF in_document IS NULL OR NOT JSON_VALID(in_document)
       OR COALESCE(JSON_TYPE(JSON_EXTRACT(in_document, '$.steps')), '') <> 'ARRAY'
       OR COALESCE(JSON_LENGTH(in_document, '$.steps'), 0) NOT BETWEEN 1 AND 256
       OR in_compiled IS NULL OR NOT JSON_VALID(in_compiled) THEN
        CALL _weave_raise(50119, 'DEFINITION_INVALID: document must be a validated definition');
    END IF;
    -- A document carries name and steps only; anything else is a field the engine would silently ignore.
    SET v_unknown = JSON_KEYS(JSON_REMOVE(in_document, '$.name', '$.steps'));
    IF JSON_LENGTH(v_unknown) > 0 THEN
        CALL _weave_raise(50125, CONCAT('UNKNOWN_FIELD: definition field ',
                                        LEFT(JSON_UNQUOTE(JSON_EXTRACT(v_unknown, '$[0]')), 64), ' is not known'));
    END IF;
    SET v_name = JSON_UNQUOTE(JSON_EXTRACT(in_document, '$.name'));
    IF v_name IS NULL OR NOT (v_name REGEXP '^[A-Za-z0-9_.:-]{1,128}\\z') OR v_name IN ('.', '..') THEN
        CALL _weave_raise(50119, 'DEFINITION_INVALID: name');
    END IF;
    -- The numbers every decision of a step computes with, in the ranges the validator allows (04-polls, 03-timers,
    -- 05-signals): past them a due time or a backoff overflows (a decision that fails again and again) or means
    -- nothing (a timer of 0 ms fires at once, a task of 0 attempts never starts). Each rule: the step types it
    -- applies to, the member, its range, whether it is required (an optional one has the engine's default), and
    -- whether a fraction is allowed. A document sent straight to this routine is held to them too.
    SELECT CONCAT(LEFT(s.step_key, 40), '.', f.member, ' must be ', IF(f.fraction, 'a number', 'an integer'),
                  ' from ', f.low, ' to ', f.high)
      INTO v_number
      FROM JSON_TABLE(in_document, '$.steps[*]' COLUMNS (pos FOR ORDINALITY, step_key VARCHAR(200) PATH '$.key',
                                                         type VARCHAR(16) PATH '$.type', spec JSON PATH '$')) AS s
      JOIN JSON_TABLE('[["TIMER", "delay_ms", 1, 31536000000, 1, 0], ["SIGNAL", "timeout_ms", 1, 31536000000, 1, 0],'
                      ' ["POLL", "timeout_ms", 1, 31536000000, 1, 0], ["POLL", "interval_ms", 1, 86400000, 1, 0],'
                      ' ["POLL", "max_rounds", 1, 10000, 1, 0], ["TASK,POLL", "task_timeout_ms", 1, 86400000, 0, 0],'
                      ' ["TASK,POLL", "priority", -1000, 1000, 0, 0],'
                      ' ["TASK,POLL", "retry.max_attempts", 1, 100, 1, 0],'
                      ' ["TASK,POLL", "retry.initial_backoff_ms", 0, 86400000, 1, 0],'
                      ' ["TASK,POLL", "retry.backoff_coefficient", 1, 10, 1, 1],'
                      ' ["TASK,POLL", "retry.max_backoff_ms", 0, 86400000, 1, 0]]',
                      '$[*]' COLUMNS (types VARCHAR(16) PATH '$[0]', member VARCHAR(32) PATH '$[1]',
                                      low BIGINT PATH '$[2]', high BIGINT PATH '$[3]', required TINYINT PATH '$[4]',
                                      fraction TINYINT PATH '$[5]')) AS f
        ON FIND_IN_SET(s.type, f.types) > 0
     WHERE CASE WHEN COALESCE(JSON_TYPE(JSON_EXTRACT(s.spec, CONCAT('$.', f.member))), 'NULL') = 'NULL'
                THEN f.required = 1
                ELSE JSON_TYPE(JSON_EXTRACT(s.spec, CONCAT('$.', f.member)))
                         NOT IN ('INTEGER', 'UNSIGNED INTEGER', IF(f.fraction = 1, 'DOUBLE', 'INTEGER'))
                     -- MariaDB types 1e3 INTEGER, and the engine reads such a member AS UNSIGNED, which stops at the
                     -- e (1, or a refused truncation): an integer member is written in digits only, as JSON writes
                     -- an integer and the validator takes one.
                     OR (f.fraction = 0
                         AND NOT (JSON_EXTRACT(s.spec, CONCAT('$.', f.member)) REGEXP '^-?[0-9]+\\z'))
                     OR NOT CAST(JSON_EXTRACT(s.spec, CONCAT('$.', f.member)) AS DOUBLE) BETWEEN f.low AND f.high
           END
     ORDER BY s.pos LIMIT 1;
    IF v_number IS NOT NULL THEN
        CALL _weave_raise(50119, CONCAT('DEFINITION_INVALID: ', v_number));
    END IF;
    -- The steps' structure, as the validator leaves it, held for a document sent straight to this routine too: a
    -- type the engine does not know failed every start, a key used twice failed here with the server's own error,
    -- and an `after` naming no step was ignored (its step ran at once). Keys compare as the engine's tables compare
    -- them (utf8mb4_bin).
    SELECT problem INTO v_problem FROM (
        SELECT s.pos AS ord, CASE
                 WHEN s.type IS NULL  -- a pattern, not IN: the collation pads, and 'TIMER ' would equal 'TIMER'
                      OR NOT (CONVERT(s.type USING utf8mb4) COLLATE utf8mb4_bin REGEXP '^(TIMER|SIGNAL|POLL|TASK)\\z')
                     THEN CONCAT('steps[', s.pos - 1, '].type must be TIMER, SIGNAL, POLL or TASK')
                 WHEN s.step_key IS NULL OR s.step_key IN ('.', '..')
                      OR NOT (CONVERT(s.step_key USING utf8mb4) COLLATE utf8mb4_bin
                              REGEXP '^[A-Za-z0-9_.][A-Za-z0-9_.-]{0,63}\\z')
                     THEN CONCAT('steps[', s.pos - 1, '].key must be 1-64 characters of A-Z a-z 0-9 _ . -')
                 WHEN s.type = 'SIGNAL' AND COALESCE(JSON_TYPE(JSON_EXTRACT(s.spec, '$.signal')), '') <> 'OBJECT'
                     THEN CONCAT('steps[', s.pos - 1, '].signal must be the contract its signals match')
                 WHEN COALESCE(JSON_TYPE(JSON_EXTRACT(s.spec, '$.after')), 'ARRAY') <> 'ARRAY'
                     THEN CONCAT('steps[', s.pos - 1, '].after must be a list of step keys')
                 WHEN NOT JSON_CONTAINS_PATH(in_compiled, 'one', CONCAT('$."', s.step_key, '"'))
                     THEN CONCAT('steps[', s.pos - 1, '] has no compiled expressions')
               END AS problem
          FROM JSON_TABLE(in_document, '$.steps[*]' COLUMNS (pos FOR ORDINALITY, step_key VARCHAR(200) PATH '$.key',
                                                             type VARCHAR(16) PATH '$.type', spec JSON PATH '$')) AS s
        UNION ALL
        SELECT 100000, CONCAT('step key ', LEFT(MIN(d.step_key), 64), ' is used by two steps')
          FROM JSON_TABLE(in_document, '$.steps[*]' COLUMNS (step_key VARCHAR(200) PATH '$.key')) AS d
         GROUP BY CONVERT(d.step_key USING utf8mb4) COLLATE utf8mb4_bin HAVING COUNT(*) > 1
        UNION ALL
        -- Each `after` element a step key: null, a number or a list named no step and was dropped (its step ran at
        -- once), and one with a space in it was stored as a key no step has.
        SELECT 200000 + j.pos, CONCAT('steps[', j.pos - 1, '].after[', j.n - 1, '] must be a step key')
          FROM JSON_TABLE(in_document, '$.steps[*]' COLUMNS (pos FOR ORDINALITY,
                              NESTED PATH '$.after[*]' COLUMNS (n FOR ORDINALITY, after_key VARCHAR(200) PATH '$',
                                                                after_json JSON PATH '$'))) AS j
         WHERE j.n IS NOT NULL
           AND (COALESCE(JSON_TYPE(j.after_json), '') <> 'STRING' OR j.after_key IS NULL
                OR NOT (CONVERT(j.after_key USING utf8mb4) COLLATE utf8mb4_bin
                        REGEXP '^[A-Za-z0-9_.][A-Za-z0-9_.-]{0,63}\\z'))
      ) AS p
     WHERE p.problem IS NOT NULL ORDER BY p.ord LIMIT 1;
    IF v_problem IS NOT NULL THEN
        CALL _weave_raise(50119, CONCAT('DEFINITION_INVALID: ', v_problem));
    END IF;
    -- The queues are the TASK and POLL steps' own, derived from the document: the engine checks a credential's queues
    -- against them and decides from them whether a start activates its first steps (weave_instance_start), so they
    -- are never taken from the caller. Byte order and binary distinctness, as the validator lists them. The list
    -- may be 2048 characters (and is refused past that), however little the caller's session lets GROUP_CONCAT make:
    -- the statement raises the cap for itself alone (MariaDB's SET STATEMENT, MySQL's SET_VAR hint; each server
    -- reads the other's as a comment).
    /*M!100301 SET STATEMENT group_concat_max_len = 1048576 FOR */
    SELECT /*+ SET_VAR(group_concat_max_len = 1048576) */ CONVERT(COALESCE(GROUP_CONCAT(DISTINCT s.queue ORDER BY s.queue SEPARATOR ','), '') USING utf8mb4),
           COALESCE(SUM(s.queue IS NULL), 0)
      INTO v_queues, v_unqueued
      FROM JSON_TABLE(in_document, '$.steps[*]' COLUMNS (type VARCHAR(16) PATH '$.type',
                                                         queue VARBINARY(64) PATH '$.queue')) AS s
     WHERE s.type IN ('TASK', 'POLL');
    IF v_unqueued > 0 OR (v_queues <> '' AND NOT (v_queues REGEXP '^[A-Za-z0-9_.:-]{1,64}(,[A-Za-z0-9_.:-]{1,64})*\\z'))
       OR NOT (COALESCE(in_queues, v_queues) <=> v_queues) THEN
        CALL _weave_raise(50119, 'DEFINITION_INVALID: queues must be the TASK and POLL steps'' own queues');
    END IF;
    -- A publisher restricted to some queues publishes only definitions of its queues (S-2): their instances' tasks
    -- take those queues' capacity.
    CALL _weave_queues_check(v_queues, v_allowed);
    -- R-18: a definition whose queues do not exist would only ever defer its instances; refuse it now, naming
    -- every queue missing (as many as the message holds, then ",..."), so that one answer says all there is to do.
    SET v_rest = v_queues, v_missing = '';
    WHILE v_rest <> '' DO
        SET v_queue = SUBSTRING_INDEX(v_rest, ',', 1);
        SET v_rest = IF(LOCATE(',', v_rest) > 0, SUBSTRING(v_rest, LOCATE(',', v_rest) + 1), '');
        IF NOT EXISTS (SELECT 1 FROM weave_queues WHERE namespace_id = v_ns AND name = v_queue) THEN
            SET v_missing = CONCAT(v_missing, IF(v_missing = '', '', ','), v_queue);
        END IF;
    END WHILE;
    IF v_missing <> '' THEN
        IF CHAR_LENGTH(v_missing) > 84 THEN  -- past the 128 characters of a message: whole names, then ",..."
            SET v_missing = LEFT(v_missing, 80);  -- names are at most 64 characters: a comma is in it
            SET v_missing = CONCAT(LEFT(v_missing, CHAR_LENGTH(v_missing) - LOCATE(',', REVERSE(v_missing))), ',...');
        END IF;
        CALL _weave_raise(50124, CONCAT('QUEUE_NOT_FOUND: create these queues first: ', v_missing));
    END IF;
    SET v_digest = SHA2(in_document, 256);
    SELECT id INTO v_ns FROM weave_namespaces WHERE id = v_ns FOR UPDATE;
    CALL _weave_now(v_now);  -- R-2: after the lock that numbers the versions, so created_at follows their order
    CALL _weave_admin_replay(v_ns, 'definition.publish', in_idempotency_key, v_digest,
                             'published a different document', v_keyed);
    IF v_keyed IS NOT NULL THEN
        COMMIT;
        SELECT JSON_VALUE(v_keyed, '$.name') AS name, CAST(JSON_VALUE(v_keyed, '$.version') AS UNSIGNED) AS version,
               JSON_VALUE(v_keyed, '$.digest') AS digest, CAST(JSON_VALUE(v_keyed, '$.created') AS UNSIGNED) AS created,
               1 AS replayed;
    ELSE
        -- A locking read: a plain one reads the snapshot taken before the namespace's lock was granted, in which a
        -- publish that held the lock before this one has not yet written its version.
        SELECT version, digest INTO v_latest, v_latest_digest FROM weave_definitions
         WHERE namespace_id = v_ns AND name = v_name ORDER BY version DESC LIMIT 1 FOR UPDATE;
        IF v_latest IS NOT NULL AND v_latest_digest = v_digest THEN
            IF in_idempotency_key IS NOT NULL THEN  -- the key's answer, kept for its retries
                SET v_answer = JSON_OBJECT('name', v_name, 'version', v_latest + 0, 'digest', v_digest,
                                           'created', 0);
                CALL _weave_audit(v_ns, 0, v_cred, v_actor, 'definition.publish', in_idempotency_key, v_digest, v_now,
                                  NULL, NULL, v_answer, v_answer);
            END IF;
            COMMIT;
            SELECT v_name AS name, v_latest AS version, v_digest AS digest, 0 AS created, 0 AS replayed;
        ELSE
            SET v_version = COALESCE(v_latest, 0) + 1;
            INSERT INTO weave_definitions (namespace_id, name, version, document, compiled, digest, queues,
                                           created_by, created_at)
            VALUES (v_ns, v_name, v_version, in_document, in_compiled, v_digest, v_queues, v_cred, v_now);
            SET v_id = LAST_INSERT_ID();
            INSERT INTO weave_definition_steps (definition_id, step_key, position, type, after_count, spec)
            SELECT v_id, s.step_key, s.pos - 1, s.type, COALESCE(JSON_LENGTH(s.after_keys), 0), s.spec
              FROM JSON_TABLE(in_document, '$.steps[*]' COLUMNS (
                       pos FOR ORDINALITY,
                       step_key VARCHAR(64) PATH '$.key',
                       type VARCHAR(16) PATH '$.type',
                       after_keys JSON PATH '$.after',
                       spec JSON PATH '$')) AS s;
            -- Each `after` names another step of the document, once: read against the steps just written (their key).
            SELECT CONCAT('steps[', e.pos - 1, '].after ',
                          IF(MIN(n.step_key) IS NULL, 'names no step of the definition: ',
                             IF(MIN(n.position) = e.pos - 1, 'names the step itself: ', 'names a step twice: ')),
                          LEFT(MIN(e.after_key), 40))
              INTO v_problem
              FROM JSON_TABLE(in_document, '$.steps[*]' COLUMNS (pos FOR ORDINALITY,
                                  NESTED PATH '$.after[*]' COLUMNS (after_key VARCHAR(200) PATH '$'))) AS e
              LEFT JOIN weave_definition_steps n
                ON n.definition_id = v_id AND n.step_key = CONVERT(e.after_key USING utf8mb4) COLLATE utf8mb4_bin
             WHERE e.after_key IS NOT NULL
             GROUP BY e.pos, CONVERT(e.after_key USING utf8mb4) COLLATE utf8mb4_bin
            HAVING MIN(n.step_key) IS NULL OR MIN(n.position) = e.pos - 1 OR COUNT(*) > 1
             ORDER BY e.pos LIMIT 1;
            IF v_problem IS NOT NULL THEN
                CALL _weave_raise(50119, CONCAT('DEFINITION_INVALID: ', v_problem));
            END IF;
            INSERT INTO weave_definition_edges (definition_id, step_key, after_key)
            SELECT v_id, e.step_key, e.after_key
              FROM JSON_TABLE(in_document, '$.steps[*]' COLUMNS (
                       step_key VARCHAR(64) PATH '$.key',
                       NESTED PATH '$.after[*]' COLUMNS (after_key VARCHAR(64) PATH '$'))) AS e
             WHERE e.after_key IS NOT NULL;
            -- Steps that wait for each other never start, and their instance would wait for ever without a word (R-18).
            -- A cycle needs an edge to a step later in the document: with none (the order people write), there is none.
            -- Else the steps are started in thought as they could start, each once all it waits for has: a step that
            -- never could waits in a cycle, or for one. Each step and each edge is looked at once.
            SELECT COUNT(*) INTO v_forward
              FROM weave_definition_edges e
              JOIN weave_definition_steps s ON s.definition_id = e.definition_id AND s.step_key = e.step_key
              JOIN weave_definition_steps a ON a.definition_id = e.definition_id AND a.step_key = e.after_key
             WHERE e.definition_id = v_id AND a.position > s.position;
            IF v_forward > 0 THEN
                -- Kept in variables (a temporary table is one Galera does not replicate, Z-6), by position: how many
                -- steps each step still waits for, four digits a step; the steps that wait for each, three digits a
                -- step; and the steps free to start, in the order they came free.
                /*M!100301 SET STATEMENT group_concat_max_len = 1048576 FOR */
                SELECT /*+ SET_VAR(group_concat_max_len = 1048576) */
                       GROUP_CONCAT(LPAD(after_count, 4, '0') ORDER BY position SEPARATOR ''),
                       GROUP_CONCAT(IF(after_count = 0, LPAD(position, 3, '0'), NULL) ORDER BY position SEPARATOR ''),
                       COUNT(*)
                  INTO v_waiting, v_free, v_steps
                  FROM weave_definition_steps WHERE definition_id = v_id;
                /*M!100301 SET STATEMENT group_concat_max_len = 1048576 FOR */
                SELECT /*+ SET_VAR(group_concat_max_len = 1048576) */ JSON_OBJECTAGG(x.position, x.waiters)
                  INTO v_waiters
                  FROM (SELECT a.position, GROUP_CONCAT(LPAD(w.position, 3, '0') SEPARATOR '') AS waiters
                          FROM weave_definition_edges e
                          JOIN weave_definition_steps w ON w.definition_id = e.definition_id AND w.step_key = e.step_key
                          JOIN weave_definition_steps a
                            ON a.definition_id = e.definition_id AND a.step_key = e.after_key
                         WHERE e.definition_id = v_id
                         GROUP BY a.position) AS x;
                SET v_free = COALESCE(v_free, ''), v_head = 1, v_started = 0;
                WHILE v_head <= CHAR_LENGTH(v_free) DO  -- each step once, each edge once
                    SET v_pos = SUBSTRING(v_free, v_head, 3) + 0, v_head = v_head + 3, v_started = v_started + 1;
                    SET v_next = COALESCE(JSON_UNQUOTE(JSON_EXTRACT(v_waiters, CONCAT('$."', v_pos, '"'))), ''),
                        v_at = 1;
                    WHILE v_at <= CHAR_LENGTH(v_next) DO
                        SET v_pos = SUBSTRING(v_next, v_at, 3) + 0, v_at = v_at + 3;
                        SET v_left = SUBSTRING(v_waiting, v_pos * 4 + 1, 4) - 1;
                        SET v_waiting = INSERT(v_waiting, v_pos * 4 + 1, 4, LPAD(v_left, 4, '0'));
                        IF v_left = 0 THEN
                            SET v_free = CONCAT(v_free, LPAD(v_pos, 3, '0'));
                        END IF;
                    END WHILE;
                END WHILE;
                IF v_started < v_steps THEN  -- the first step, by position, that still waits
                    SELECT step_key INTO v_problem FROM weave_definition_steps
                     WHERE definition_id = v_id AND SUBSTRING(v_waiting, position * 4 + 1, 4) <> '0000'
                     ORDER BY position LIMIT 1;
                END IF;
                IF v_problem IS NOT NULL THEN
                    CALL _weave_raise(50119, CONCAT('DEFINITION_INVALID: steps wait for each other in a cycle, and ',
                                                    'step ', LEFT(v_problem, 40), ' waits for it'));
                END IF;
            END IF;
            SET v_answer = JSON_OBJECT('name', v_name, 'version', v_version + 0, 'digest', v_digest, 'created', 1);
            CALL _weave_audit(v_ns, 0, v_cred, v_actor, 'definition.publish', in_idempotency_key, v_digest, v_now,
                              NULL, NULL, v_answer, IF(in_idempotency_key IS NULL, NULL, v_answer));
            COMMIT;
            SELECT v_name AS name, v_version AS version, v_digest AS digest, 1 AS created, 0 AS replayed;
        END IF;
    END IF;
END
