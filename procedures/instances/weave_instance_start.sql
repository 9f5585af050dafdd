-- Starting is idempotent per (namespace, idempotency key): the same request again answers the same
-- instance, whatever the spelling of its input's JSON; the same key with a different request is a conflict. Two concurrent first starts of one
-- key meet on the unique index: the loser waits for the winner's commit, then answers as a replay.
-- The ROOT advance runs in the start's own transaction: the first waits are open and the first tasks
-- queued when it commits (a signal sent at once settles at Send). The app is found, and share-locked,
-- through its (namespace, name) index, which the in-flight counters' update of its row by its primary
-- key does not wait on: starts of one app that create tasks queue on that update, and never deadlock.
CREATE PROCEDURE weave_instance_start(
        IN in_token           VARCHAR(512),
        IN in_namespace       VARCHAR(200),
        IN in_definition      VARCHAR(200),
        IN in_version         BIGINT,
        IN in_app             VARCHAR(200),
        IN in_input           LONGTEXT,
        IN in_deadline_at     DATETIME(6),
        IN in_deadline_ms     BIGINT,
        IN in_business_key    VARCHAR(1024),
        IN in_idempotency_key VARCHAR(512))
    COMMENT 'Description: starts an instance of a definition version (NULL = latest), pinning that version; event and
audit in the same transaction. Its ready steps are activated by the same transaction, their first tasks
created, as the ROOT advance would (R-7, R-8: a deferral, for a full quota or queue, or a review is left on the
ROOT checkpoint as by that advance).
Parameters: in_token (workflows:start and every queue of the definition), in_namespace, in_definition, in_version,
in_app, in_input (JSON, <= 1 MiB, no key twice in one object, no number beyond a double''s range; NULL = {}), exactly one of in_deadline_at (UTC) /
in_deadline_ms (from now), in_business_key (<= 256 chars), in_idempotency_key (1-128 printable ASCII, no space).
Result sets 1-5: the instance, exactly as weave_instance_get answers it, with created 1 for a new instance (as it
committed) and 0 for a replay (as it is now, read from one snapshot).
Errors: 50001 UNAUTHENTICATED, 50002 FORBIDDEN, 50003 NOT_FOUND, 50005 IDEMPOTENCY_CONFLICT, 50113
IDEMPOTENCY_KEY_INVALID, 50117 INPUT_INVALID, 50118 DEADLINE_INVALID, 50122 APP_NOT_FOUND, 50123 DEFINITION_NOT_FOUND.
Rules: R-1, R-3, R-4, R-5, R-7, R-8, M-2.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_now DATETIME(6);
    DECLARE v_ns BIGINT UNSIGNED;
    DECLARE v_cred BIGINT UNSIGNED;
    DECLARE v_actor VARCHAR(128);
    DECLARE v_def BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_def_version INT UNSIGNED;
    DECLARE v_queues VARCHAR(2048) DEFAULT NULL;
    DECLARE v_steps SMALLINT UNSIGNED;  -- the definition's steps: every one of them PENDING, none SUCCEEDED yet
    DECLARE v_app BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_input LONGTEXT;
    DECLARE v_deadline DATETIME(6);
    DECLARE v_digest CHAR(64);
    DECLARE v_id BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_existing_digest CHAR(64);
    DECLARE v_stored_input LONGTEXT;  -- a replay's stored input, read when its text differs from the request's
    DECLARE v_same_input TINYINT;
    DECLARE v_duplicate TINYINT DEFAULT 0;
    DECLARE v_found BIGINT UNSIGNED DEFAULT NULL;  -- the replayed instance, held (NULL: none, or purged meanwhile)
    DECLARE v_found_status VARCHAR(16);  -- its status as first read
    DECLARE v_root VARCHAR(16);
    DECLARE v_allowed VARCHAR(2048);  -- the credential's own queues, checked against the definition's there
    DECLARE v_tx BOOLEAN DEFAULT FALSE;  -- TRUE once this routine has started its own transaction
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN IF v_tx THEN ROLLBACK; END IF; RESIGNAL; END;
    CALL _weave_transaction_begin('weave_instance_start', v_tx);  -- refused inside a caller's transaction (R-1)
    -- The namespace is found by its name here already; _weave_authorize takes it instead of reading it again. The
    -- instance started under this idempotency key, if any, comes with it (a plain read, as the look-up below); a
    -- replay reads its request digest once it is known to be one. A replay answers that instance, so the queues
    -- checked are those of its pinned definition, not of the version the request names (without a version, the
    -- latest, which may use other queues since).
    SELECT d.id, d.version, COALESCE(p.queues, d.queues), JSON_LENGTH(d.document, '$.steps'), n.id, i.id, i.status
      INTO v_def, v_def_version, v_queues, v_steps, v_ns, v_id, v_found_status
      FROM weave_definitions d JOIN weave_namespaces n ON n.id = d.namespace_id AND n.name = in_namespace
                              AND OCTET_LENGTH(n.name) = OCTET_LENGTH(in_namespace)
      LEFT JOIN weave_instances i ON i.namespace_id = n.id AND i.idempotency_key = in_idempotency_key
      LEFT JOIN weave_definitions p ON p.id = i.definition_id
     WHERE d.name = in_definition AND (in_version IS NULL OR d.version = in_version)
       -- As written: the collation pads spaces, and 'flow ' found flow, and was stored as typed.
       AND OCTET_LENGTH(d.name) = OCTET_LENGTH(in_definition)
     ORDER BY d.version DESC LIMIT 1;
    CALL _weave_authorize(in_token, in_namespace, 'workflows:start', v_queues, v_ns, v_cred, v_actor, v_allowed);

    IF in_idempotency_key IS NULL OR NOT (in_idempotency_key REGEXP '^[!-~]{1,128}\\z') THEN
        CALL _weave_raise(50113, 'IDEMPOTENCY_KEY_INVALID: 1-128 printable ASCII characters, no space');
    END IF;
    SET v_input = COALESCE(in_input, '{}');
    SET v_digest = _weave_start_digest(in_definition, in_version, in_app, v_input,
                                       DATE_FORMAT(in_deadline_at, '%Y-%m-%dT%H:%i:%s.%f'), in_deadline_ms,
                                       in_business_key);

    IF v_def IS NULL THEN  -- no such definition: a replay of this key may still name another (a conflict)
        SELECT id, status INTO v_id, v_found_status FROM weave_instances
         WHERE namespace_id = v_ns AND idempotency_key = in_idempotency_key;
    END IF;
    IF v_id IS NOT NULL AND v_found_status IN ('SUCCEEDED', 'CANCELLED') THEN
        -- A finished instance is held until the answer is read, so that a retention purge (which removes only
        -- finished instances) cannot remove it under the replay: through its first event (R-3: a child record, after
        -- the credential), shared. Only a purge ever changes an event, so that lock waits for nothing else; the
        -- instance's own row may be held for long, even once finished, by a caller's transaction that sent it a
        -- signal (refused and recorded under that lock). A purge that has removed the event already is waited for
        -- (it commits at once); one that comes later waits for this replay. A live instance is not held: a replay
        -- answers it from a snapshot. One removed since the plain read above is gone for good: the request starts a
        -- new instance, as a start after the purge does, under the queues of the version it names.
        SELECT instance_id INTO v_found FROM weave_events WHERE instance_id = v_id AND seq = 1 LOCK IN SHARE MODE;
        IF v_found IS NULL THEN
            SET v_id = NULL;
            SELECT queues INTO v_queues FROM weave_definitions WHERE id = v_def;
            IF v_def IS NOT NULL AND v_allowed <> '*' AND v_queues <> '' THEN
                CALL _weave_queues_check(v_queues, v_allowed);
            END IF;
        END IF;
    END IF;
    IF v_id IS NULL THEN
        IF v_def IS NULL THEN
            CALL _weave_raise(50123, 'DEFINITION_NOT_FOUND: no such definition version');
        END IF;
        -- The input is read before the app's lock is taken, and its size before its text: reading a large document
        -- takes a while, and every task creation of the app waits for that lock (_pulse_slot_take).
        IF LENGTH(v_input) > 1048576 OR NOT _weave_json_strict(v_input) THEN
            CALL _weave_raise(50117, 'INPUT_INVALID: input must be one JSON value of at most 1 MiB, nested at most '
                                     '31 levels, no key twice, no number past a double');
        END IF;
        SELECT id INTO v_app FROM weave_apps
         WHERE namespace_id = v_ns AND name = in_app AND OCTET_LENGTH(name) = OCTET_LENGTH(in_app) LOCK IN SHARE MODE;
        IF v_app IS NULL THEN
            CALL _weave_raise(50122, 'APP_NOT_FOUND: no such app in the namespace');
        END IF;
        -- R-2: after the identity and app locks that order the start (_weave_now's expression, inline).
        SELECT UTC_TIMESTAMP(6) + INTERVAL clock_offset_us MICROSECOND INTO v_now FROM weave_install WHERE id = 1;
        IF in_business_key IS NOT NULL AND CHAR_LENGTH(in_business_key) NOT BETWEEN 1 AND 256 THEN
            CALL _weave_raise(50117, 'INPUT_INVALID: business_key must be 1-256 chars');
        END IF;
        IF (in_deadline_at IS NULL) = (in_deadline_ms IS NULL) THEN
            CALL _weave_raise(50118, 'DEADLINE_INVALID: give exactly one of deadline_at and deadline_ms');
        END IF;
        IF in_deadline_ms IS NOT NULL AND (in_deadline_ms <= 0 OR in_deadline_ms > 315360000000) THEN
            CALL _weave_raise(50118, 'DEADLINE_INVALID: deadline_ms must be 1..315360000000');
        END IF;
        SET v_deadline = COALESCE(in_deadline_at, v_now + INTERVAL in_deadline_ms * 1000 MICROSECOND);
        -- A date that is no time (0000-00-00, a zero month or day: a session without NO_ZERO_DATE passes it) is NULL
        -- to COALESCE, so v_deadline is NULL then.
        IF v_deadline IS NULL OR v_deadline <= v_now THEN
            CALL _weave_raise(50118, 'DEADLINE_INVALID: deadline_at must be a valid time that has not passed');
        END IF;
        BEGIN
            DECLARE CONTINUE HANDLER FOR 1062 SET v_duplicate = 1;
            -- The instance is born with its first event (seq 1, below) already counted, and with all its steps
            -- (the rows inserted below, one per step of the document) open and PENDING.
            INSERT INTO weave_instances (namespace_id, app_id, definition_id, definition_name, definition_version,
                                         input, status, control, gate, deadline_at, credential_id, business_key,
                                         idempotency_key, request_digest, event_seq, open_steps, pending_steps,
                                         created_at, updated_at)
            VALUES (v_ns, v_app, v_def, in_definition, v_def_version, v_input, 'RUNNING', 'ACTIVE', 'OPEN',
                    v_deadline, v_cred, in_business_key, in_idempotency_key, v_digest, 1, v_steps, v_steps, v_now,
                    v_now);
        END;
    END IF;

    IF v_id IS NULL AND v_duplicate = 0 THEN
        SET v_id = LAST_INSERT_ID();
        INSERT INTO weave_steps (namespace_id, instance_id, step_key, position, type, status, updated_at)
        SELECT v_ns, v_id, step_key, position, type, 'PENDING', v_now
          FROM weave_definition_steps WHERE definition_id = v_def;
        INSERT INTO weave_events (instance_id, seq, namespace_id, type, step_key, activation_seq, occurred_at, data)
        VALUES (v_id, 1, v_ns, 'INSTANCE_STARTED', '', 0, v_now,
                JSON_OBJECT('definition', in_definition, 'version', v_def_version + 0, 'app', in_app,
                            'deadline_at', DATE_FORMAT(v_deadline, '%Y-%m-%dT%H:%i:%s.%fZ'), 'actor', v_actor));
        -- Its audit row (R-4), written here as its event is, without a nested call: every instance starts here.
        INSERT INTO weave_audit (namespace_id, instance_id, credential_id, actor, action, idempotency_key,
                                 request_digest, accepted_at, deadline_at, details, created_at)
        VALUES (v_ns, v_id, v_cred, v_actor, 'instance.start', in_idempotency_key, v_digest, v_now, v_deadline,
                JSON_OBJECT('definition', in_definition, 'version', v_def_version + 0, 'app', in_app), v_now);
        -- The ROOT advance itself, its first tasks included: what it defers or leaves for more (R-7's 32) it writes
        -- as the ROOT checkpoint.
        CALL _weave_root_advance(v_ns, v_id, v_now, 32, FALSE, NULL, NULL, NULL, NULL, v_root);
        -- The instance as weave_instance_get answers it, read before the commit: every row of it is this
        -- transaction's own, so the sets are as consistent as a snapshot, and the caller needs no second call.
        CALL _weave_instance_show(in_namespace, v_id, TRUE);
        COMMIT;
    ELSE
        -- A replay: of an instance found above, or of a concurrent first start that won the unique index.
        SELECT id, request_digest INTO v_id, v_existing_digest
          FROM weave_instances WHERE namespace_id = v_ns AND idempotency_key = in_idempotency_key;
        IF v_existing_digest <> v_digest THEN
            -- The input is a JSON value, not bytes: the same request again may spell it otherwise (another client,
            -- another serialiser: key order, whitespace, escapes). When the stored input is the same value, the
            -- request is taken with the stored text in its place, and its digest decides as for any replay.
            SELECT input INTO v_stored_input FROM weave_instances WHERE id = v_id;
            SET v_same_input = 0;
            IF LENGTH(v_input) <= 1048576 AND _weave_json_strict(v_input) THEN  -- one a first start would take
                CALL _weave_json_equal(v_stored_input, v_input, v_same_input);
            END IF;
            IF v_same_input = 0
               OR v_existing_digest <> _weave_start_digest(in_definition, in_version, in_app, v_stored_input,
                                                           DATE_FORMAT(in_deadline_at, '%Y-%m-%dT%H:%i:%s.%f'),
                                                           in_deadline_ms, in_business_key) THEN
                CALL _weave_raise(50005, 'IDEMPOTENCY_CONFLICT: this key started a different request');
            END IF;
        END IF;
        IF v_found IS NOT NULL THEN
            -- A replay of a finished instance found above answers it as it is now, read before the commit while its
            -- first event is held, so that a purge leaves it.
            CALL _weave_instance_show(in_namespace, v_id, FALSE);
            COMMIT;
        ELSE
            COMMIT;
            -- The replay of a concurrent first start answers the instance as it is now, from one snapshot: a read-only
            -- REPEATABLE READ transaction whatever the session's level, whose snapshot its first read takes (as
            -- weave_instance_get reads it).
            SET TRANSACTION ISOLATION LEVEL REPEATABLE READ;
            START TRANSACTION READ ONLY;
            CALL _weave_instance_show(in_namespace, v_id, FALSE);
            COMMIT;
        END IF;
    END IF;
END
