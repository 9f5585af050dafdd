-- An admin restricted to some queues sees those queues (S-2), as it may set the capacity of those only. A page is
-- keyset-paged by name (the cursor is the last name a page answered), one range of uq_queue_name.
CREATE PROCEDURE weave_queue_list(
        IN in_token     VARCHAR(512),
        IN in_namespace VARCHAR(200),
        IN in_limit     INT,
        IN in_cursor    VARCHAR(200))
    COMMENT 'Description: a page of the namespace''s queues, by name, each with its capacity and the tasks it holds
(for an admin restricted to some queues, those queues).
Parameters: in_token (admin), in_namespace, in_limit (1..1000, NULL = 100), in_cursor (NULL, or the next_cursor of
the previous page: the queues named after it).
Result set 1: name, capacity, queued, running, waiting (work deferred in its line for room, QUEUE_FULL), created_at,
updated_at.
Result set 2: next_cursor - the cursor of the next page, NULL on the last page.
Errors: 50001 UNAUTHENTICATED, 50002 FORBIDDEN, 50003 NOT_FOUND, 50121 LIMIT_INVALID.
Rules: K-8, S-2, R-11.'
    READS SQL DATA
BEGIN
    DECLARE v_ns BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_cred BIGINT UNSIGNED;
    DECLARE v_actor VARCHAR(128);
    DECLARE v_allowed VARCHAR(2048);  -- the credential's own queues
    DECLARE v_limit INT;
    DECLARE v_prev INT;
    DECLARE v_after VARCHAR(200) DEFAULT COALESCE(in_cursor, '');  -- every name sorts after the empty one
    DECLARE v_tx BOOLEAN DEFAULT FALSE;  -- TRUE once this routine has started its own transaction
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN IF v_tx THEN ROLLBACK; END IF; RESIGNAL; END;
    -- The page and its next cursor from one snapshot: read apart, a row made between them inside the page would
    -- move the cursor past the page's end, and the next page would repeat its last row.
    CALL _weave_snapshot_open(v_tx);
    CALL _weave_authorize(in_token, in_namespace, 'admin', NULL, v_ns, v_cred, v_actor, v_allowed);
    SET v_limit = _weave_page_limit(in_limit);
    SET v_prev = v_limit - 1;
    -- The queue's tasks in flight from its counter (slots taken less its release stripes), as the room check reads
    -- them; the running ones counted (no more than the capacity) through the claim index (on a small table the
    -- optimizer would rather scan it), the queued ones the rest: no read as large as the backlog.
    SELECT name, capacity, CAST(in_flight - running AS UNSIGNED) AS queued, running, waiting, created_at, updated_at
      FROM (SELECT q.name, q.capacity, q.created_at, q.updated_at,
                   (SELECT COUNT(*) FROM weave_pending_advances w FORCE INDEX (ix_checkpoint_room_line)
                     WHERE w.deferred_reason = 'QUEUE_FULL' AND w.deferred_for = q.id) AS waiting,
                   q.slots_taken - (SELECT SUM(r.released) FROM pulse_slot_releases r
                                     WHERE r.owner_kind = 'QUEUE' AND r.owner_id = q.id) AS in_flight,
                   (SELECT COUNT(*) FROM pulse_tasks t FORCE INDEX (ix_task_claim)
                     WHERE t.queue_id = q.id AND t.status = 'RUNNING') AS running
              FROM weave_queues q
             WHERE q.namespace_id = v_ns AND q.name > v_after
               AND (v_allowed = '*' OR FIND_IN_SET(q.name, v_allowed) > 0)
             ORDER BY q.name LIMIT v_limit) AS queues
     ORDER BY name;
    -- The page's last name when another follows it: the two names at its end and one past it.
    SELECT IF(COUNT(*) = 2, MIN(name), NULL) AS next_cursor
      FROM (SELECT name FROM weave_queues WHERE namespace_id = v_ns AND name > v_after
               AND (v_allowed = '*' OR FIND_IN_SET(name, v_allowed) > 0)
             ORDER BY name LIMIT 2 OFFSET v_prev) ends;
    IF v_tx THEN
        COMMIT;
    END IF;
END
