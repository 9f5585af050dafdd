-- Create-or-update: operators re-run provisioning scripts, and the same call must converge. The
-- decision itself is _weave_provision_put, shared with queues.
CREATE PROCEDURE weave_app_put(
        IN in_token         VARCHAR(512),
        IN in_namespace     VARCHAR(200),
        IN in_name          VARCHAR(200),
        IN in_max_in_flight BIGINT,
        IN in_status        VARCHAR(32),
        IN in_idempotency_key VARCHAR(512))
    COMMENT 'Description: creates an app or changes its quota and status.
Parameters: in_token (admin scope, every queue: *), in_namespace, in_name (1-64 chars [A-Za-z0-9_.:-]),
in_max_in_flight (0..1000000), in_status (ACTIVE or DISABLED; NULL keeps the current one, ACTIVE for a new app),
in_idempotency_key (NULL, or 1-128 printable ASCII, no space: the put''s key among the namespace''s app puts; a
retry with it answers the first answer again and changes nothing, even after other puts).
Result set: name, max_in_flight, status, created (1 when new; a replay: the first answer''s), replayed (1 when the
key''s first answer is answered again).
Errors: 50001 UNAUTHENTICATED, 50002 FORBIDDEN, 50003 NOT_FOUND, 50005 IDEMPOTENCY_CONFLICT (the key put
another request), 50100 INVALID_ARGUMENT (a status other than ACTIVE or DISABLED), 50113 IDEMPOTENCY_KEY_INVALID,
50116 NAME_INVALID, 50121 LIMIT_INVALID, 1205 (the row is held for more than a second, by a long transaction that
uses it: try again).
Rules: R-8, M-2.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_status VARCHAR(16);
    DECLARE v_created TINYINT;
    DECLARE v_replayed TINYINT;
    DECLARE v_tx BOOLEAN DEFAULT FALSE;  -- TRUE once this routine has started its own transaction
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN IF v_tx THEN ROLLBACK; END IF; RESIGNAL; END;
    CALL _weave_transaction_begin('weave_app_put', v_tx);  -- READ COMMITTED: its wakes lock no gaps of the line
    CALL _weave_provision_put('app', in_token, in_namespace, in_name, in_max_in_flight, in_status,
                              in_idempotency_key, v_status, v_created, v_replayed);
    COMMIT;
    SELECT in_name AS name, in_max_in_flight AS max_in_flight, v_status AS status, v_created AS created,
           v_replayed AS replayed;
END
