-- The audit trail (R-4), newest first: without a workflow, the namespace's own actions (credentials, apps, queues,
-- definitions, console sign-ins, retention runs: instance 0), which need the admin scope; with one, that
-- instance's audit rows, read as its events are. Each is one range of ix_audit_namespace (namespace, instance,
-- time), so a page reads what it answers however long the engine's history beside it. The cursor is the last
-- row's time and id: keyset pagination that neither skips nor repeats while rows are added. An admin restricted to
-- some queues reads the namespace's actions of the credentials it administers (those of its queues, itself
-- included: S-2), as it lists and may disable only those; the actions of credentials for other queues, or for every
-- queue, are not its to read.
CREATE PROCEDURE weave_audit_list(
        IN in_token       VARCHAR(512),
        IN in_namespace   VARCHAR(200),
        IN in_workflow_id VARCHAR(64),
        IN in_action      VARCHAR(48),
        IN in_limit       INT,
        IN in_cursor      VARCHAR(64))
    COMMENT 'Description: a page of the audit trail, newest first: the namespace''s own actions, or one instance''s
audit rows; optionally of one action.
Parameters: in_token (admin for the namespace''s own actions, of the credentials it administers when restricted to
some queues; workflows:read and every queue of the definition for an instance''s), in_namespace, in_workflow_id (NULL: the namespace''s own actions), in_action (NULL, or an action such as
credential.disable; an instance''s action, such as step.resolve, only with in_workflow_id), in_limit (1..500,
NULL = 50), in_cursor (NULL, or the next_cursor of the previous page).
Result set 1: audit_id, workflow_id (NULL for the namespace''s own actions), actor, credential_id (NULL for the
engine''s own decisions), action, idempotency_key, request_digest, accepted_at, deadline_at, reason, details
(JSON), created_at.
Result set 2: next_cursor - the cursor of the next page, NULL on the last page.
Errors: 50001 UNAUTHENTICATED, 50002 FORBIDDEN, 50003 NOT_FOUND, 50100 INVALID_ARGUMENT (cursor; an instance''s
action without in_workflow_id), 50121 LIMIT_INVALID.
Rules: R-4, S-2.'
    READS SQL DATA
BEGIN
    DECLARE v_ns BIGINT UNSIGNED;
    DECLARE v_inst BIGINT UNSIGNED DEFAULT 0;
    DECLARE v_limit INT DEFAULT COALESCE(in_limit, 50);
    DECLARE v_prev INT;
    DECLARE v_at DATETIME(6) DEFAULT NULL;   -- the cursor: the last row's time and id
    DECLARE v_id BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_last_at DATETIME(6) DEFAULT NULL;
    DECLARE v_last_id BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_more BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_cred BIGINT UNSIGNED;
    DECLARE v_actor VARCHAR(128);
    DECLARE v_allowed VARCHAR(2048) DEFAULT '*';  -- the caller's queues (restricted: it reads its credentials' rows)
    IF in_workflow_id IS NULL THEN
        CALL _weave_authorize(in_token, in_namespace, 'admin', NULL, v_ns, v_cred, v_actor, v_allowed);
    ELSE
        CALL _weave_instance_find(in_token, in_namespace, in_workflow_id, v_ns, v_inst);
    END IF;
    IF v_limit < 1 OR v_limit > 500 THEN
        CALL _weave_raise(50121, 'LIMIT_INVALID: limit must be 1..500');
    END IF;
    -- An instance's action (instance.pause, step.resolve, signal.accept, ...) is never among the namespace's own: the
    -- page would be empty whatever happened, and say nothing of why.
    IF in_workflow_id IS NULL AND in_action REGEXP '^(instance|step|signal|task|poll|timer|wait)\\.' THEN
        CALL _weave_raise(50100, CONCAT('INVALID_ARGUMENT: ', LEFT(in_action, 32),
                                        ' is an action on one instance: read it with that instance''s workflow id'));
    END IF;
    IF in_cursor IS NOT NULL THEN
        IF NOT in_cursor REGEXP '^[0-9]{20}-[0-9]{1,19}\\z' THEN
            CALL _weave_raise(50100, 'INVALID_ARGUMENT: the cursor must be the next_cursor of a page');
        END IF;
        BEGIN
            DECLARE CONTINUE HANDLER FOR 1411 SET v_at = NULL;  -- digits that are no time
            SET v_at = STR_TO_DATE(LEFT(in_cursor, 20), '%Y%m%d%H%i%s%f');
        END;
        SET v_id = CAST(SUBSTRING(in_cursor, 22) AS UNSIGNED);
        IF v_at IS NULL THEN
            CALL _weave_raise(50100, 'INVALID_ARGUMENT: the cursor must be the next_cursor of a page');
        END IF;
    END IF;
    SET v_prev = v_limit - 1;
    SELECT CONCAT('aud_', id) AS audit_id, IF(instance_id = 0, NULL, CONCAT('wf_', instance_id)) AS workflow_id, actor,
           IF(credential_id = 0, NULL, CONCAT('cred_', credential_id)) AS credential_id, action, idempotency_key,
           request_digest, accepted_at, deadline_at, reason, details, created_at
      FROM weave_audit FORCE INDEX (ix_audit_namespace)
     WHERE namespace_id = v_ns AND instance_id = v_inst AND (in_action IS NULL OR action = in_action)
       AND (v_allowed = '*' OR credential_id IN (SELECT c.id FROM weave_credentials c
             WHERE c.namespace_id = v_ns AND _weave_queue_refused(c.queues, v_allowed) IS NULL))
       AND (v_at IS NULL OR created_at < v_at OR (created_at = v_at AND id < v_id))
     ORDER BY created_at DESC, id DESC LIMIT v_limit;
    SELECT created_at, id INTO v_last_at, v_last_id FROM weave_audit FORCE INDEX (ix_audit_namespace)
     WHERE namespace_id = v_ns AND instance_id = v_inst AND (in_action IS NULL OR action = in_action)
       AND (v_allowed = '*' OR credential_id IN (SELECT c.id FROM weave_credentials c
             WHERE c.namespace_id = v_ns AND _weave_queue_refused(c.queues, v_allowed) IS NULL))
       AND (v_at IS NULL OR created_at < v_at OR (created_at = v_at AND id < v_id))
     ORDER BY created_at DESC, id DESC LIMIT 1 OFFSET v_prev;
    IF v_last_id IS NOT NULL THEN
        SELECT id INTO v_more FROM weave_audit FORCE INDEX (ix_audit_namespace)
         WHERE namespace_id = v_ns AND instance_id = v_inst AND (in_action IS NULL OR action = in_action)
           AND (v_allowed = '*' OR credential_id IN (SELECT c.id FROM weave_credentials c
             WHERE c.namespace_id = v_ns AND _weave_queue_refused(c.queues, v_allowed) IS NULL))
           AND (created_at < v_last_at OR (created_at = v_last_at AND id < v_last_id))
         ORDER BY created_at DESC, id DESC LIMIT 1;
    END IF;
    SELECT IF(v_more IS NULL, NULL, CONCAT(DATE_FORMAT(v_last_at, '%Y%m%d%H%i%s%f'), '-', v_last_id)) AS next_cursor;
END
