-- A page is keyset-paged by name (the cursor is the last name a page answered), one range of uq_app_name.
CREATE PROCEDURE weave_app_list(
        IN in_token     VARCHAR(512),
        IN in_namespace VARCHAR(200),
        IN in_limit     INT,
        IN in_cursor    VARCHAR(200))
    COMMENT 'Description: a page of the namespace''s apps, by name, each with its quota, status and the tasks it has in
flight.
Parameters: in_token (admin), in_namespace, in_limit (1..1000, NULL = 100), in_cursor (NULL, or the next_cursor of
the previous page: the apps named after it).
Result set 1: name, max_in_flight, status, in_flight (QUEUED and RUNNING tasks), waiting (work deferred for the
app: in its line for room, QUOTA_FULL, or for it to be enabled, APP_DISABLED), created_at, updated_at.
Result set 2: next_cursor - the cursor of the next page, NULL on the last page.
Errors: 50001 UNAUTHENTICATED, 50002 FORBIDDEN, 50003 NOT_FOUND, 50121 LIMIT_INVALID.
Rules: K-8, R-11.'
    READS SQL DATA
BEGIN
    DECLARE v_ns BIGINT UNSIGNED DEFAULT _weave_namespace_authorize(in_token, in_namespace, 'admin');
    DECLARE v_limit INT DEFAULT _weave_page_limit(in_limit);
    DECLARE v_after VARCHAR(200) DEFAULT COALESCE(in_cursor, '');  -- every name sorts after the empty one
    DECLARE v_prev INT DEFAULT v_limit - 1;
    DECLARE v_tx BOOLEAN DEFAULT FALSE;  -- TRUE once this routine has started its own transaction
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN IF v_tx THEN ROLLBACK; END IF; RESIGNAL; END;
    -- The page and its next cursor from one snapshot: read apart, a row made between them inside the page would
    -- move the cursor past the page's end, and the next page would repeat its last row.
    CALL _weave_snapshot_open(v_tx);
    SELECT a.name, a.max_in_flight, a.status,
           -- The app's counter (K-8): slots taken by task creations less those given back by task ends.
           CAST(a.slots_taken - (SELECT SUM(r.released) FROM pulse_slot_releases r
                                  WHERE r.owner_kind = 'APP' AND r.owner_id = a.id) AS UNSIGNED) AS in_flight,
           -- Its line (R-8, R-18): one index entry a waiter, no other row read.
           (SELECT COUNT(*) FROM weave_pending_advances w FORCE INDEX (ix_checkpoint_room_line)
             WHERE w.deferred_reason IN ('QUOTA_FULL', 'APP_DISABLED') AND w.deferred_for = a.id) AS waiting,
           a.created_at, a.updated_at
      FROM weave_apps a WHERE a.namespace_id = v_ns AND a.name > v_after ORDER BY a.name LIMIT v_limit;
    -- The page's last name when another follows it: the two names at its end and one past it.
    SELECT IF(COUNT(*) = 2, MIN(name), NULL) AS next_cursor
      FROM (SELECT name FROM weave_apps WHERE namespace_id = v_ns AND name > v_after
             ORDER BY name LIMIT 2 OFFSET v_prev) ends;
    IF v_tx THEN
        COMMIT;
    END IF;
END
