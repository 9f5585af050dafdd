-- Every filter reads as many rows as its answer needs, however long the history beside it (R-11, C-3): the
-- page is read from the smallest set that holds it, in the order of an index, and the cursor is the last id seen
-- (keyset pagination, newest first). A business key is an exact match on ix_instance_business_key. A review code
-- is read from the open reasons of that code on ix_review_open, a deferral from the deferred checkpoints: both are
-- live work (a reason is closed by the action that settles it, a checkpoint deleted), so the page is read from
-- those rows and sorted, never found by walking every instance of the namespace. A control is read on
-- ix_instance_control (PAUSED before a status: paused instances are few), a status on ix_instance_status, a status
-- with a definition on ix_instance_definition_status (namespace, definition, status, id), and a definition alone
-- from the newest page of each status's range of that index, merged.
CREATE PROCEDURE weave_instance_list(
        IN in_token        VARCHAR(512),
        IN in_namespace    VARCHAR(200),
        IN in_status       VARCHAR(32),
        IN in_definition   VARCHAR(200),
        IN in_control      VARCHAR(32),
        IN in_business_key VARCHAR(300),
        IN in_review_code  VARCHAR(64),
        IN in_deferred     TINYINT,
        IN in_limit        INT,
        IN in_before_id    BIGINT UNSIGNED)
    COMMENT 'Description: instances of the namespace, newest first, optionally by status, definition name, control,
business key, open review reason and deferral.
Parameters: in_token (workflows:read), in_namespace, in_status (NULL = any), in_definition (NULL = any),
in_control (ACTIVE or PAUSED; NULL = any),
in_business_key (exact; NULL = any), in_review_code (only instances with an open review reason of this code;
NULL = any), in_deferred (1 = only instances whose checkpoint is deferred, 0 or NULL = any),
in_limit (1..500, NULL = 50), in_before_id (cursor: list ids below it; NULL = from the newest).
Result set: workflow_id, definition_name, definition_version, status, control, gate, deadline_at, business_key,
created_at, updated_at, cursor_id (for the next page).
Errors: 50001 UNAUTHENTICATED, 50002 FORBIDDEN, 50003 NOT_FOUND, 50100 INVALID_ARGUMENT, 50121 LIMIT_INVALID.
Rules: C-3, M-1, R-11.'
    READS SQL DATA
BEGIN
    DECLARE v_ns BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_cred BIGINT UNSIGNED;
    DECLARE v_actor VARCHAR(128);
    DECLARE v_allowed VARCHAR(2048);  -- the credential's own queues
    DECLARE v_limit INT DEFAULT COALESCE(in_limit, 50);
    DECLARE v_before BIGINT UNSIGNED DEFAULT COALESCE(in_before_id, 18446744073709551615);
    DECLARE v_deferred TINYINT DEFAULT COALESCE(in_deferred, 0);
    DECLARE v_newest TEXT;  -- a definition alone: the newest page of one of its statuses ({status} left to fill)
    CALL _weave_authorize(in_token, in_namespace, 'workflows:read', NULL, v_ns, v_cred, v_actor, v_allowed);
    -- A credential restricted to some queues sees only the instances whose definitions use none other (S-2), as it
    -- may read no other instance by its id: the definition versions it may see, a subquery the page's statement
    -- materialises once (a namespace has few; not a list, which a session's group_concat_max_len would cut short).
    -- The page then reads past the instances of the others.
    IF v_limit < 1 OR v_limit > 500 THEN
        CALL _weave_raise(50121, 'LIMIT_INVALID: limit must be 1..500');
    END IF;
    IF in_status IS NOT NULL AND in_status NOT IN ('RUNNING', 'SUCCEEDED', 'NEEDS_REVIEW', 'CANCELLING', 'CANCELLED') THEN
        CALL _weave_raise(50100, 'INVALID_ARGUMENT: unknown status');
    END IF;
    IF in_control IS NOT NULL AND in_control NOT IN ('ACTIVE', 'PAUSED') THEN
        CALL _weave_raise(50100, 'INVALID_ARGUMENT: control is ACTIVE or PAUSED');
    END IF;
    IF in_business_key IS NOT NULL AND CHAR_LENGTH(in_business_key) > 256 THEN
        CALL _weave_raise(50100, 'INVALID_ARGUMENT: a business key is at most 256 characters');
    END IF;
    IF v_deferred NOT IN (0, 1) THEN  -- any other value would match nothing, silently
        CALL _weave_raise(50100, 'INVALID_ARGUMENT: deferred is 1 (only deferred instances), 0 or NULL');
    END IF;
    -- One query for every combination of filters. Its range is the smallest set that holds the page: a business
    -- key; else the open reasons of a review code; else the deferred checkpoints; else the PAUSED instances; else a
    -- definition with a status; else a status; else a definition (the newest page of each of its statuses, at most
    -- five pages read for one); else a control (ACTIVE); else the whole namespace. FORCE INDEX names the range's
    -- index (an index hint takes no parameter, so the statement is prepared from text); the reasons, the
    -- checkpoints and the pages of a definition are read first into a set of instance ids, each joined on the
    -- primary key and the few sorted. The pages of a definition read the values from the statement's variables:
    -- the same values, bound the same way, without placeholders the other texts do not have.
    -- Every value is bound, and a filter bound to NULL folds away before the range is chosen. The review code and the
    -- deferral are written as conditions on the range's rows only when given and not the range itself: the server
    -- reads a subquery's rows into a set before it tests them, so a filter bound to NULL would read every open
    -- reason (or deferred checkpoint) of every namespace. The placeholders stay the same in every text.
    SET v_newest = CONCAT(
        '(SELECT d.id FROM weave_instances d FORCE INDEX (ix_instance_definition_status)',
        '  WHERE d.namespace_id = @weave_list_ns AND d.definition_name = @weave_list_definition',
        '    AND d.status = ''{status}''',
        '    AND d.id < @weave_list_before AND (@weave_list_control IS NULL OR d.control = @weave_list_control)',
        '  ORDER BY d.id DESC LIMIT ', v_limit, ')');
    SET @weave_list_query = CONCAT(
        'SELECT CONCAT(''wf_'', i.id) AS workflow_id, i.definition_name, i.definition_version, i.status, i.control,',
        '       i.gate, i.deadline_at, i.business_key, i.created_at, i.updated_at, i.id AS cursor_id',
        CASE WHEN in_business_key IS NULL AND in_review_code IS NOT NULL THEN CONCAT(
             '  FROM (SELECT DISTINCT r.instance_id FROM weave_review_reasons r FORCE INDEX (ix_review_open)',
             '         WHERE r.closed_at IS NULL AND r.code = ? AND r.namespace_id = ? AND r.instance_id < ?)',
             '       AS picked',
             '  STRAIGHT_JOIN weave_instances i FORCE INDEX (PRIMARY) ON i.id = picked.instance_id')
             WHEN in_business_key IS NULL AND v_deferred = 1 THEN CONCAT(
             '  FROM (SELECT DISTINCT p.instance_id FROM weave_pending_advances p',
             '         FORCE INDEX (ix_checkpoint_room_line)',
             '         WHERE p.deferred_reason IS NOT NULL) AS picked',
             '  STRAIGHT_JOIN weave_instances i FORCE INDEX (PRIMARY) ON i.id = picked.instance_id')
             WHEN in_business_key IS NULL AND NOT in_control <=> 'PAUSED' AND in_status IS NULL
                  AND in_definition IS NOT NULL THEN CONCAT(
             '  FROM (', REPLACE(v_newest, '{status}', 'RUNNING'),
             ' UNION ALL ', REPLACE(v_newest, '{status}', 'NEEDS_REVIEW'),
             ' UNION ALL ', REPLACE(v_newest, '{status}', 'CANCELLING'),
             ' UNION ALL ', REPLACE(v_newest, '{status}', 'SUCCEEDED'),
             ' UNION ALL ', REPLACE(v_newest, '{status}', 'CANCELLED'), ') AS picked',
             '  STRAIGHT_JOIN weave_instances i FORCE INDEX (PRIMARY) ON i.id = picked.id')
             ELSE CONCAT('  FROM weave_instances i FORCE INDEX (',
                  CASE WHEN in_business_key IS NOT NULL THEN 'ix_instance_business_key'
                       WHEN in_control = 'PAUSED' THEN 'ix_instance_control'
                       WHEN in_definition IS NOT NULL THEN 'ix_instance_definition_status'
                       WHEN in_status IS NOT NULL THEN 'ix_instance_status'
                       WHEN in_control IS NOT NULL THEN 'ix_instance_control'
                       ELSE 'ix_instance_namespace' END, ')') END,
        ' WHERE i.namespace_id = ? AND i.id < ?',
        -- The key's collation pads with spaces ('bk' = 'bk '): its length in bytes makes the match exact.
        '   AND (? IS NULL OR i.business_key = ? AND OCTET_LENGTH(i.business_key) = ?) AND (? IS NULL OR i.status = ?)',
        '   AND (? IS NULL OR i.definition_name = ?) AND (? IS NULL OR i.control = ?)',
        CASE WHEN in_review_code IS NULL THEN '   AND ? IS NULL AND ? IS NULL'
             WHEN in_business_key IS NULL THEN '   AND ? IS NOT NULL AND ? IS NOT NULL'
             ELSE CONCAT('   AND ? IS NOT NULL AND EXISTS (SELECT 1 FROM weave_review_reasons r',
                         '         WHERE r.instance_id = i.id AND r.closed_at IS NULL AND r.code = ?)') END,
        CASE WHEN v_deferred = 0 THEN '   AND ? = 0'
             WHEN in_business_key IS NULL AND in_review_code IS NULL THEN '   AND ? = 1'
             ELSE CONCAT('   AND ? = 1 AND EXISTS (SELECT 1 FROM weave_pending_advances p',
                         '         WHERE p.instance_id = i.id AND p.deferred_reason IS NOT NULL)') END,
        '   AND (? = ''*'' OR i.definition_id IN (SELECT d.id FROM weave_definitions d',
        '         WHERE d.namespace_id = ? AND _weave_queue_refused(d.queues, ?) IS NULL))',
        ' ORDER BY i.id DESC LIMIT ?');
    SET @weave_list_ns = v_ns, @weave_list_before = v_before, @weave_list_key = in_business_key,
        @weave_list_key_bytes = OCTET_LENGTH(in_business_key),
        @weave_list_status = in_status, @weave_list_definition = in_definition, @weave_list_control = in_control,
        @weave_list_code = in_review_code, @weave_list_deferred = v_deferred, @weave_list_allowed = v_allowed,
        @weave_list_limit = v_limit;
    PREPARE weave_instance_list_page FROM @weave_list_query;
    IF in_business_key IS NULL AND in_review_code IS NOT NULL THEN  -- the reasons' range comes first
        EXECUTE weave_instance_list_page USING @weave_list_code, @weave_list_ns, @weave_list_before, @weave_list_ns,
            @weave_list_before, @weave_list_key, @weave_list_key, @weave_list_key_bytes, @weave_list_status,
            @weave_list_status, @weave_list_definition, @weave_list_definition, @weave_list_control,
            @weave_list_control, @weave_list_code, @weave_list_code, @weave_list_deferred, @weave_list_allowed,
            @weave_list_ns, @weave_list_allowed, @weave_list_limit;
    ELSE
        EXECUTE weave_instance_list_page USING @weave_list_ns, @weave_list_before, @weave_list_key, @weave_list_key,
            @weave_list_key_bytes, @weave_list_status, @weave_list_status, @weave_list_definition,
            @weave_list_definition, @weave_list_control, @weave_list_control, @weave_list_code, @weave_list_code,
            @weave_list_deferred, @weave_list_allowed, @weave_list_ns, @weave_list_allowed, @weave_list_limit;
    END IF;
    DEALLOCATE PREPARE weave_instance_list_page;
    SET @weave_list_query = NULL, @weave_list_ns = NULL, @weave_list_before = NULL, @weave_list_key = NULL,
        @weave_list_key_bytes = NULL, @weave_list_status = NULL, @weave_list_definition = NULL,
        @weave_list_control = NULL, @weave_list_code = NULL, @weave_list_deferred = NULL, @weave_list_allowed = NULL,
        @weave_list_limit = NULL;
END
