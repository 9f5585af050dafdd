-- An admin request's idempotency key (07-api: every POST that creates or changes something takes one). The key
-- names one operation of its kind in the namespace; its first answer is kept in the audit row the operation
-- writes (action in_action, idempotency_key, request_digest, response), and a retry answers it again. The
-- namespace's row is locked first: a READ COMMITTED transaction locks no gap, so two tries of one key that
-- arrive together would each find no row and both act. Admin requests are rare; starts never take that row.
CREATE PROCEDURE _weave_admin_replay(
        IN  in_namespace_id BIGINT UNSIGNED,
        IN  in_action       VARCHAR(48),
        IN  in_key          VARCHAR(512),
        IN  in_digest       CHAR(64),
        IN  in_conflict     VARCHAR(100),
        OUT out_answer      LONGTEXT)
    COMMENT 'Internal. Description: with in_key NULL, nothing (out_answer NULL). Otherwise checks the key (1-128
printable ASCII, no space), locks the namespace row, and reads the audit row in_action wrote under the key:
out_answer is its response when in_digest is that row''s request_digest, NULL when the key is new. Errors: 50005
IDEMPOTENCY_CONFLICT (the key was used for another request: the message is IDEMPOTENCY_CONFLICT: this key
in_conflict), 50113 IDEMPOTENCY_KEY_INVALID.'
    READS SQL DATA
BEGIN
    DECLARE v_ns BIGINT UNSIGNED;
    DECLARE v_digest CHAR(64) DEFAULT NULL;
    SET out_answer = NULL;
    IF in_key IS NOT NULL THEN
        IF NOT (in_key REGEXP '^[!-~]{1,128}\\z') THEN
            CALL _weave_raise(50113, 'IDEMPOTENCY_KEY_INVALID: 1-128 printable ASCII characters, no space');
        END IF;
        SELECT id INTO v_ns FROM weave_namespaces WHERE id = in_namespace_id FOR UPDATE;
        -- A locking read: a plain one reads the snapshot taken before the lock was granted, in which the try that
        -- held the lock before this one has not yet written its audit row.
        SELECT request_digest, response INTO v_digest, out_answer FROM weave_audit
         WHERE instance_id = 0 AND action = in_action AND idempotency_key = in_key AND namespace_id = in_namespace_id
         ORDER BY id LIMIT 1 FOR UPDATE;
        IF v_digest IS NOT NULL AND v_digest <> in_digest THEN
            CALL _weave_raise(50005, CONCAT('IDEMPOTENCY_CONFLICT: this key ', in_conflict));
        END IF;
    END IF;
END
