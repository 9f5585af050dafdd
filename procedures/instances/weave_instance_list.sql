-- Listing by status uses ix_instance_status (namespace, status, id), so listing NEEDS_REVIEW stays cheap
-- however many instances exist (C-3); the cursor is the last id seen (keyset pagination, newest first).
CREATE PROCEDURE weave_instance_list(
        IN in_token      VARCHAR(512),
        IN in_namespace  VARCHAR(200),
        IN in_status     VARCHAR(32),
        IN in_definition VARCHAR(200),
        IN in_limit      INT,
        IN in_before_id  BIGINT UNSIGNED)
    COMMENT 'Description: instances of the namespace, newest first, optionally by status and definition name.
Parameters: in_token (workflows:read), in_namespace, in_status (NULL = any), in_definition (NULL = any),
in_limit (1..500, NULL = 50), in_before_id (cursor: list ids below it; NULL = from the newest).
Result set: workflow_id, definition_name, definition_version, status, control, gate, deadline_at, business_key,
created_at, updated_at, cursor_id (for the next page).
Errors: 50001 UNAUTHENTICATED, 50002 FORBIDDEN, 50003 NOT_FOUND, 50121 LIMIT_INVALID.
Rules: C-3, M-1.'
    READS SQL DATA
BEGIN
    DECLARE v_ns BIGINT UNSIGNED;
    DECLARE v_cred BIGINT UNSIGNED;
    DECLARE v_actor VARCHAR(128);
    DECLARE v_limit INT DEFAULT COALESCE(in_limit, 50);
    DECLARE v_before BIGINT UNSIGNED DEFAULT COALESCE(in_before_id, 18446744073709551615);
    CALL _weave_authorize(in_token, in_namespace, 'workflows:read', NULL, v_ns, v_cred, v_actor);
    IF v_limit < 1 OR v_limit > 500 THEN
        CALL _weave_raise(50121, 'LIMIT_INVALID: limit must be 1..500');
    END IF;
    IF in_status IS NOT NULL AND in_status NOT IN ('RUNNING', 'SUCCEEDED', 'NEEDS_REVIEW', 'CANCELLING', 'CANCELLED') THEN
        CALL _weave_raise(50100, 'INVALID_ARGUMENT: unknown status');
    END IF;
    IF in_status IS NOT NULL THEN
        SELECT CONCAT('wf_', id) AS workflow_id, definition_name, definition_version, status, control, gate,
               deadline_at, business_key, created_at, updated_at, id AS cursor_id
          FROM weave_instances FORCE INDEX (ix_instance_status)
         WHERE namespace_id = v_ns AND status = in_status AND id < v_before
           AND (in_definition IS NULL OR definition_name = in_definition)
         ORDER BY id DESC LIMIT v_limit;
    ELSEIF in_definition IS NOT NULL THEN
        SELECT CONCAT('wf_', id) AS workflow_id, definition_name, definition_version, status, control, gate,
               deadline_at, business_key, created_at, updated_at, id AS cursor_id
          FROM weave_instances FORCE INDEX (ix_instance_definition)
         WHERE namespace_id = v_ns AND definition_name = in_definition AND id < v_before
         ORDER BY id DESC LIMIT v_limit;
    ELSE
        SELECT CONCAT('wf_', id) AS workflow_id, definition_name, definition_version, status, control, gate,
               deadline_at, business_key, created_at, updated_at, id AS cursor_id
          FROM weave_instances FORCE INDEX (ix_instance_namespace)
         WHERE namespace_id = v_ns AND id < v_before
         ORDER BY id DESC LIMIT v_limit;
    END IF;
END
