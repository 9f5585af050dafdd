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
    SELECT d.name, d.version AS latest_version, d.digest, d.queues, d.created_at, n.versions
      FROM weave_definitions d
      JOIN (SELECT name, MAX(version) AS latest, COUNT(*) AS versions FROM weave_definitions
             WHERE namespace_id = v_ns GROUP BY name) n ON n.name = d.name AND n.latest = d.version
     WHERE d.namespace_id = v_ns
     ORDER BY d.name;
END
