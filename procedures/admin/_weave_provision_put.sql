-- The body of weave_app_put and weave_queue_put: apps and queues are provisioned alike, created or updated by
-- name with one bounded number, so that re-running a provisioning script converges. The row is locked by name
-- for the decision; an app also carries a status (ACTIVE or DISABLED), which NULL keeps as it is. The time of the
-- change is read after that lock (R-2): a task creation takes its slot on the same row, so every task created at or
-- after a limit's updated_at took its slot under that limit (invariant M-4.7 relies on it). A put with an
-- idempotency key answers its first answer again when retried (_weave_admin_replay), changing nothing: a retry
-- after a lost answer must not undo a change another admin made meanwhile.
CREATE PROCEDURE _weave_provision_put(
        IN  in_kind      VARCHAR(16),
        IN  in_token     VARCHAR(512),
        IN  in_namespace VARCHAR(200),
        IN  in_name      VARCHAR(200),
        IN  in_limit     BIGINT,
        IN  in_status    VARCHAR(32),
        IN  in_key       VARCHAR(512),
        OUT out_status   VARCHAR(16),
        OUT out_created  TINYINT,
        OUT out_replayed TINYINT)
    COMMENT 'Internal. Description: creates or updates the app (in_kind app: in_limit is max_in_flight, in_status its
status) or queue (queue: in_limit is its capacity, in_status NULL) named in_name, and audits it; out_status is the
app''s status after the call, out_created 1 when the row is new (created with its 16 release stripes). An app put
ACTIVE that was DISABLED makes the checkpoints deferred APP_DISABLED for it due at once, and a quota or capacity
raised by n makes the first n waiting in its line for room due at once (_weave_room_grown). With in_key (the
put''s idempotency key, or NULL), a key used before for the same request answers that put''s answer again
(out_replayed 1) and changes nothing. Errors: those of weave_app_put and weave_queue_put.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_ns BIGINT UNSIGNED;
    DECLARE v_admin BIGINT UNSIGNED;
    DECLARE v_admin_actor VARCHAR(128);
    DECLARE v_now DATETIME(6);
    DECLARE v_id BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_details LONGTEXT;
    DECLARE v_request LONGTEXT;  -- what the put asks, for its idempotency key
    DECLARE v_answer LONGTEXT;  -- the key's first answer, when it has one
    DECLARE v_was VARCHAR(16) DEFAULT NULL;  -- the app's status before this put
    DECLARE v_old_limit BIGINT DEFAULT NULL;  -- its quota, or the queue's capacity, before this put
    DECLARE v_allowed VARCHAR(2048);  -- the credential's own queues
    DECLARE v_wait BIGINT UNSIGNED DEFAULT @@SESSION.innodb_lock_wait_timeout;
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN SET SESSION innodb_lock_wait_timeout = v_wait; RESIGNAL; END;
    -- A queue's capacity is set only by an admin of that queue; an app's limit and status bound its tasks on every
    -- queue, so only an admin of every queue (*) sets them.
    CALL _weave_admin_begin(in_token, in_namespace, 'admin', IF(in_kind = 'queue', in_name, '*'), v_ns, v_admin,
                            v_admin_actor, v_now, v_allowed);
    CALL _weave_provision_check(in_kind, in_name, IF(in_kind = 'app', 'max_in_flight', 'capacity'), in_limit);
    IF in_kind = 'app' THEN
        -- Exactly (FIND_IN_SET): an IN list would pass 'ACTIVE ' (the collation pads spaces) and store it as it came.
        IF in_status IS NOT NULL AND FIND_IN_SET(in_status, 'ACTIVE,DISABLED') = 0 THEN
            CALL _weave_raise(50100, 'INVALID_ARGUMENT: status must be ACTIVE or DISABLED');
        END IF;
    END IF;
    SET v_request = IF(in_kind = 'app',
                       JSON_OBJECT('name', in_name, 'max_in_flight', in_limit + 0, 'status', in_status),
                       JSON_OBJECT('name', in_name, 'capacity', in_limit + 0));
    CALL _weave_admin_replay(v_ns, CONCAT(in_kind, '.put'), in_key, SHA2(v_request, 256),
                             CONCAT('made another ', in_kind, ' put'), v_answer);
    SET out_replayed = v_answer IS NOT NULL;
    IF out_replayed THEN  -- the first answer again, and nothing changed
        SET out_status = JSON_VALUE(v_answer, '$.status'), out_created = JSON_VALUE(v_answer, '$.created');
    ELSE
        IF in_kind = 'app' THEN
            -- Starts take the app's row shared and task creations exclusively (R-3), and queue behind this exclusive
            -- lock while it waits: a second at most behind a long holder, then a lock wait (transient).
            SET SESSION innodb_lock_wait_timeout = LEAST(v_wait, 1);
            SELECT id, status, max_in_flight INTO v_id, v_was, v_old_limit
              FROM weave_apps WHERE namespace_id = v_ns AND name = in_name FOR UPDATE;
            SET SESSION innodb_lock_wait_timeout = v_wait;
            CALL _weave_now(v_now);  -- R-2: after the row's lock, so updated_at follows every slot taken before it
            SET out_status = COALESCE(in_status, v_was, 'ACTIVE');
            IF v_id IS NULL THEN
                INSERT INTO weave_apps (namespace_id, name, max_in_flight, status, created_at, updated_at)
                VALUES (v_ns, in_name, in_limit, out_status, v_now, v_now);
            ELSE
                UPDATE weave_apps SET max_in_flight = in_limit, status = out_status, updated_at = v_now WHERE id = v_id;
                IF v_was = 'DISABLED' AND out_status = 'ACTIVE' THEN
                    -- The work its instances deferred while it was disabled looks again now (R-8), as resume does. Only
                    -- here: while the app was disabled no decision of it can have read it ACTIVE and be waiting for its
                    -- row (a task's slot) while holding a checkpoint this wake must change.
                    CALL _weave_deferrals_wake('APP_DISABLED', v_id, v_now);
                END IF;
                IF out_status = 'ACTIVE' AND in_limit > v_old_limit THEN
                    CALL _weave_room_grown('QUOTA_FULL', v_id, in_limit - v_old_limit, v_now);  -- new room: its line
                END IF;
            END IF;
            SET v_details = JSON_OBJECT('name', in_name, 'max_in_flight', in_limit + 0, 'status', out_status);
        ELSE
            SET SESSION innodb_lock_wait_timeout = LEAST(v_wait, 1);  -- as for an app, above
            SELECT id, capacity INTO v_id, v_old_limit FROM weave_queues WHERE namespace_id = v_ns AND name = in_name
               FOR UPDATE;
            SET SESSION innodb_lock_wait_timeout = v_wait;
            CALL _weave_now(v_now);  -- R-2: after the row's lock, so updated_at follows every slot taken before it
            IF v_id IS NULL THEN
                INSERT INTO weave_queues (namespace_id, name, capacity, created_at, updated_at)
                VALUES (v_ns, in_name, in_limit, v_now, v_now);
            ELSE
                UPDATE weave_queues SET capacity = in_limit, updated_at = v_now WHERE id = v_id;
                IF in_limit > v_old_limit THEN
                    CALL _weave_room_grown('QUEUE_FULL', v_id, in_limit - v_old_limit, v_now);  -- new room: its line
                END IF;
            END IF;
            SET v_details = JSON_OBJECT('name', in_name, 'capacity', in_limit + 0);
        END IF;
        SET out_created = IF(v_id IS NULL, 1, 0);
        IF v_id IS NULL THEN
            -- A new app or queue gets its 16 release stripes, into which its tasks' ends release their slots
            -- (_pulse_inbox_add); the tasks in flight are its slots taken less every stripe.
            INSERT INTO pulse_slot_releases (owner_kind, owner_id, stripe, released)
            SELECT UPPER(in_kind), LAST_INSERT_ID(), a.n * 4 + b.n, 0
              FROM (SELECT 0 AS n UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3) a
             CROSS JOIN (SELECT 0 AS n UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3) b;
        END IF;
        CALL _weave_audit(v_ns, 0, v_admin, v_admin_actor, CONCAT(in_kind, '.put'), in_key,
                          IF(in_key IS NULL, NULL, SHA2(v_request, 256)), v_now, NULL, NULL, v_details,
                          IF(in_key IS NULL, NULL, JSON_OBJECT('status', out_status, 'created', out_created + 0)));
    END IF;
END
