-- Listings read no row under lock: they answer what is published now, which is all a listing promises.
CREATE PROCEDURE weave_definition_list(
        IN in_token     VARCHAR(512),
        IN in_namespace VARCHAR(200))
    COMMENT 'Description: every definition of the namespace with its latest version, by name.
Parameters: in_token (workflows:read), in_namespace.
Result set: name, latest_version, digest, queues, created_at (of the latest version), versions.
Errors: 50001 UNAUTHENTICATED, 50002 FORBIDDEN, 50003 NOT_FOUND.
Rules: M-2.'
    READS SQL DATA
BEGIN
    DECLARE v_ns BIGINT UNSIGNED DEFAULT _weave_namespace_authorize(in_token, in_namespace, 'workflows:read');
    -- Each name's latest version is the end of its range of the (namespace, name, version) index: read there alone
    -- (a loose index scan, which grouping by the index's own leading columns allows), not every version. Versions
    -- are numbered 1, 2, ... under the namespace's lock and never removed, so the latest is also how many there are.
    -- Sorted by the names alone, before the join: the latest versions' rows (their queues run to 2,048 characters)
    -- were sorted in a temporary table, on disk past a few thousand definitions.
    SELECT d.name, d.version AS latest_version, d.digest, d.queues, d.created_at, d.version AS versions
      FROM (SELECT namespace_id, name, MAX(version) AS latest FROM weave_definitions
             WHERE namespace_id = v_ns GROUP BY namespace_id, name) n
      JOIN weave_definitions d ON d.namespace_id = v_ns AND d.name = n.name AND d.version = n.latest
     ORDER BY n.name;
END
