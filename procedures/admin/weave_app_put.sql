-- Create-or-update: operators re-run provisioning scripts, and the same call must converge.
CREATE PROCEDURE weave_app_put(
        IN in_token         VARCHAR(512),
        IN in_namespace     VARCHAR(200),
        IN in_name          VARCHAR(200),
        IN in_max_in_flight BIGINT,
        IN in_status        VARCHAR(32))
    COMMENT 'Description: creates an app or changes its quota and status.
Parameters: in_token (admin scope), in_namespace, in_name (1-64 chars [A-Za-z0-9_.:-]), in_max_in_flight (0..1000000),
in_status (ACTIVE or DISABLED; NULL keeps the current one, ACTIVE for a new app).
Result set: name, max_in_flight, status, created (1 when new).
Errors: 50001 UNAUTHENTICATED, 50002 FORBIDDEN, 50003 NOT_FOUND, 50116 NAME_INVALID, 50121 LIMIT_INVALID.
Rules: R-8, M-2.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_now DATETIME(6);
    DECLARE v_ns BIGINT UNSIGNED;
    DECLARE v_admin BIGINT UNSIGNED;
    DECLARE v_admin_actor VARCHAR(128);
    DECLARE v_id BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_status VARCHAR(16);
    DECLARE v_created TINYINT DEFAULT 0;
    DECLARE v_tx BOOLEAN DEFAULT FALSE;  -- TRUE once this routine has started its own transaction
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN IF v_tx THEN ROLLBACK; END IF; RESIGNAL; END;
    CALL _weave_transaction_claim('weave_app_put', v_tx);
    START TRANSACTION;
    CALL _weave_admin_begin(in_token, in_namespace, 'admin', v_ns, v_admin, v_admin_actor, v_now);
    CALL _weave_provision_check('app', in_name, 'max_in_flight', in_max_in_flight);
    IF in_status IS NOT NULL AND in_status NOT IN ('ACTIVE', 'DISABLED') THEN
        CALL _weave_raise(50100, 'INVALID_ARGUMENT: status must be ACTIVE or DISABLED');
    END IF;
    SELECT id, status INTO v_id, v_status FROM weave_apps WHERE namespace_id = v_ns AND name = in_name FOR UPDATE;
    IF v_id IS NULL THEN
        SET v_status = COALESCE(in_status, 'ACTIVE'), v_created = 1;
        INSERT INTO weave_apps (namespace_id, name, max_in_flight, status, created_at, updated_at)
        VALUES (v_ns, in_name, in_max_in_flight, v_status, v_now, v_now);
    ELSE
        SET v_status = COALESCE(in_status, v_status);
        UPDATE weave_apps SET max_in_flight = in_max_in_flight, status = v_status, updated_at = v_now WHERE id = v_id;
    END IF;
    CALL _weave_audit(v_ns, 0, v_admin, v_admin_actor, 'app.put', NULL, NULL, v_now, NULL, NULL,
                      JSON_OBJECT('name', in_name, 'max_in_flight', in_max_in_flight + 0, 'status', v_status), NULL);
    COMMIT;
    SELECT in_name AS name, in_max_in_flight AS max_in_flight, v_status AS status, v_created AS created;
END
