-- Listings read no row under lock: they answer what is published now, which is all a listing promises. A page is
-- keyset-paged by name (the cursor is the last name a page answered): it reads the names it answers and one more,
-- however many definitions the namespace holds, and neither skips nor repeats one published meanwhile.
CREATE PROCEDURE weave_definition_list(
        IN in_token     VARCHAR(512),
        IN in_namespace VARCHAR(200),
        IN in_limit     INT,
        IN in_cursor    VARCHAR(200))
    COMMENT 'Description: a page of the namespace''s definitions, by name, each with its latest version.
Parameters: in_token (workflows:read), in_namespace, in_limit (1..1000, NULL = 100), in_cursor (NULL, or the
next_cursor of the previous page: the definitions named after it).
Result set 1: name, latest_version, digest, queues, created_at (of the latest version), versions.
Result set 2: next_cursor - the cursor of the next page, NULL on the last page.
Errors: 50001 UNAUTHENTICATED, 50002 FORBIDDEN, 50003 NOT_FOUND, 50121 LIMIT_INVALID.
Rules: M-2, R-11.'
    READS SQL DATA
BEGIN
    DECLARE v_ns BIGINT UNSIGNED DEFAULT _weave_namespace_authorize(in_token, in_namespace, 'workflows:read');
    DECLARE v_limit INT DEFAULT _weave_page_limit(in_limit);
    DECLARE v_after VARCHAR(200) DEFAULT COALESCE(in_cursor, '');  -- every name sorts after the empty one
    DECLARE v_prev INT DEFAULT v_limit - 1;
    DECLARE v_tx BOOLEAN DEFAULT FALSE;  -- TRUE once this routine has started its own transaction
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN IF v_tx THEN ROLLBACK; END IF; RESIGNAL; END;
    -- The page and its next cursor from one snapshot: read apart, a row made between them inside the page would
    -- move the cursor past the page's end, and the next page would repeat its last row.
    CALL _weave_snapshot_open(v_tx);
    -- Each name's latest version is the end of its range of the (namespace, name, version) index: read there alone
    -- (a loose index scan, which grouping by the index's own leading columns allows), not every version. Versions
    -- are numbered 1, 2, ... under the namespace's lock and never removed, so the latest is also how many there are.
    -- Sorted by the names alone, before the join: the latest versions' rows (their queues run to 2,048 characters)
    -- were sorted in a temporary table, on disk past a few thousand definitions.
    SELECT d.name, d.version AS latest_version, d.digest, d.queues, d.created_at, d.version AS versions
      FROM (SELECT namespace_id, name, MAX(version) AS latest FROM weave_definitions
             WHERE namespace_id = v_ns AND name > v_after GROUP BY namespace_id, name ORDER BY name LIMIT v_limit) n
      JOIN weave_definitions d ON d.namespace_id = v_ns AND d.name = n.name AND d.version = n.latest
     ORDER BY n.name;
    -- The page's last name when another follows it: the two names at its end and one past it.
    SELECT IF(COUNT(*) = 2, MIN(name), NULL) AS next_cursor
      FROM (SELECT name FROM weave_definitions WHERE namespace_id = v_ns AND name > v_after
             GROUP BY namespace_id, name ORDER BY name LIMIT 2 OFFSET v_prev) ends;
    IF v_tx THEN
        COMMIT;
    END IF;
END
