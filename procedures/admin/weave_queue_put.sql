-- Create-or-update, like apps: provisioning converges when re-run.
CREATE PROCEDURE weave_queue_put(
        IN in_token     VARCHAR(512),
        IN in_namespace VARCHAR(200),
        IN in_name      VARCHAR(200),
        IN in_capacity  BIGINT)
    COMMENT 'Description: creates a queue or changes its capacity.
Parameters: in_token (admin scope), in_namespace, in_name (1-64 chars [A-Za-z0-9_.:-]), in_capacity (0..1000000).
Result set: name, capacity, created (1 when new).
Errors: 50001 UNAUTHENTICATED, 50002 FORBIDDEN, 50003 NOT_FOUND, 50116 NAME_INVALID, 50121 LIMIT_INVALID.
Rules: R-8, M-2.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_now DATETIME(6);
    DECLARE v_ns BIGINT UNSIGNED;
    DECLARE v_admin BIGINT UNSIGNED;
    DECLARE v_admin_actor VARCHAR(128);
    DECLARE v_id BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_created TINYINT DEFAULT 0;
    DECLARE v_tx BOOLEAN DEFAULT FALSE;  -- TRUE once this routine has started its own transaction
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN IF v_tx THEN ROLLBACK; END IF; RESIGNAL; END;
    CALL _weave_transaction_claim('weave_queue_put', v_tx);
    START TRANSACTION;
    CALL _weave_admin_begin(in_token, in_namespace, 'admin', v_ns, v_admin, v_admin_actor, v_now);
    CALL _weave_provision_check('queue', in_name, 'capacity', in_capacity);
    SELECT id INTO v_id FROM weave_queues WHERE namespace_id = v_ns AND name = in_name FOR UPDATE;
    IF v_id IS NULL THEN
        SET v_created = 1;
        INSERT INTO weave_queues (namespace_id, name, capacity, created_at, updated_at)
        VALUES (v_ns, in_name, in_capacity, v_now, v_now);
    ELSE
        UPDATE weave_queues SET capacity = in_capacity, updated_at = v_now WHERE id = v_id;
    END IF;
    CALL _weave_audit(v_ns, 0, v_admin, v_admin_actor, 'queue.put', NULL, NULL, v_now, NULL, NULL,
                      JSON_OBJECT('name', in_name, 'capacity', in_capacity + 0), NULL);
    COMMIT;
    SELECT in_name AS name, in_capacity AS capacity, v_created AS created;
END
