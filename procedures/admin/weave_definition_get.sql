CREATE PROCEDURE weave_definition_get(
        IN in_token     VARCHAR(512),
        IN in_namespace VARCHAR(200),
        IN in_name      VARCHAR(200),
        IN in_version   BIGINT)
    COMMENT 'Description: one published definition version (NULL version = the latest).
Parameters: in_token (workflows:read), in_namespace, in_name, in_version.
Result set: name, version, digest, document, queues, created_at.
Errors: 50001 UNAUTHENTICATED, 50002 FORBIDDEN, 50003 NOT_FOUND.
Rules: M-2.'
    READS SQL DATA
BEGIN
    DECLARE v_ns BIGINT UNSIGNED DEFAULT _weave_namespace_authorize(in_token, in_namespace, 'workflows:read');
    DECLARE v_id BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_latest INT UNSIGNED DEFAULT NULL;
    SELECT id INTO v_id FROM weave_definitions
     WHERE namespace_id = v_ns AND name = in_name AND (in_version IS NULL OR version = in_version)
     ORDER BY version DESC LIMIT 1;
    IF v_id IS NULL THEN
        -- Said as precisely as the caller may know: a version the definition does not have names its latest.
        SELECT MAX(version) INTO v_latest FROM weave_definitions WHERE namespace_id = v_ns AND name = in_name;
        CALL _weave_raise(50003, IF(v_latest IS NULL,
                                    CONCAT('NOT_FOUND: no definition ', LEFT(in_name, 128), ' in this namespace'),
                                    CONCAT('NOT_FOUND: definition ', LEFT(in_name, 128), ' has no version ', in_version,
                                           '; its latest is version ', v_latest)));
    END IF;
    SELECT name, version, digest, document, queues, created_at FROM weave_definitions WHERE id = v_id;
END
