-- Never the token: only its hash is stored, and not even that leaves the database. An admin restricted to some
-- queues sees the credentials it administers: those of its queues (S-2), as it may create and disable only them.
-- A page is keyset-paged by id, oldest first (the cursor is the last credential id a page answered).
CREATE PROCEDURE weave_credential_list(
        IN in_token     VARCHAR(512),
        IN in_namespace VARCHAR(200),
        IN in_limit     INT,
        IN in_cursor    VARCHAR(200))
    COMMENT 'Description: a page of the namespace''s credentials, oldest first, without any token or hash (for an admin
restricted to some queues, the credentials of those queues).
Parameters: in_token (admin), in_namespace, in_limit (1..1000, NULL = 100), in_cursor (NULL, or the next_cursor of
the previous page: the credentials made after it).
Result set 1: credential_id, actor, scopes, queues, status (ACTIVE, DISABLED, or EXPIRED: active, past its expiry),
created_at, disabled_at, expires_at (NULL: never).
Result set 2: next_cursor - the cursor of the next page, NULL on the last page.
Errors: 50001 UNAUTHENTICATED, 50002 FORBIDDEN, 50003 NOT_FOUND, 50100 INVALID_ARGUMENT (cursor), 50121
LIMIT_INVALID.
Rules: S-2, R-11.'
    READS SQL DATA
BEGIN
    DECLARE v_ns BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_cred BIGINT UNSIGNED;
    DECLARE v_actor VARCHAR(128);
    DECLARE v_allowed VARCHAR(2048);  -- the credential's own queues
    DECLARE v_now DATETIME(6);
    DECLARE v_limit INT;
    DECLARE v_prev INT;
    DECLARE v_after BIGINT UNSIGNED DEFAULT 0;
    DECLARE v_tx BOOLEAN DEFAULT FALSE;  -- TRUE once this routine has started its own transaction
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN IF v_tx THEN ROLLBACK; END IF; RESIGNAL; END;
    -- The page and its next cursor from one snapshot: read apart, a row made between them inside the page would
    -- move the cursor past the page's end, and the next page would repeat its last row.
    CALL _weave_snapshot_open(v_tx);
    CALL _weave_admin_begin(in_token, in_namespace, 'admin', NULL, v_ns, v_cred, v_actor, v_now, v_allowed);
    SET v_limit = _weave_page_limit(in_limit);
    SET v_prev = v_limit - 1;
    SET v_after = _weave_cursor_id(in_cursor, 'cred_',
                                   'INVALID_ARGUMENT: the cursor must be the next_cursor of a page');
    SELECT CONCAT('cred_', id) AS credential_id, actor, scopes, queues,
           IF(status = 'ACTIVE' AND expires_at <= v_now, 'EXPIRED', status) AS status, created_at, disabled_at,
           expires_at
      FROM weave_credentials
     WHERE namespace_id = v_ns AND id > v_after
       AND (v_allowed = '*' OR _weave_queue_refused(queues, v_allowed) IS NULL)
     ORDER BY id LIMIT v_limit;
    -- The page's last credential when another follows it: the two at its end and one past it.
    SELECT IF(COUNT(*) = 2, CONCAT('cred_', MIN(id)), NULL) AS next_cursor
      FROM (SELECT id FROM weave_credentials
             WHERE namespace_id = v_ns AND id > v_after
               AND (v_allowed = '*' OR _weave_queue_refused(queues, v_allowed) IS NULL)
             ORDER BY id LIMIT 2 OFFSET v_prev) ends;
    IF v_tx THEN
        COMMIT;
    END IF;
END
