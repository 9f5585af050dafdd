-- Create-or-update, like apps: provisioning converges when re-run. The decision itself is
-- _weave_provision_put, shared with apps.
CREATE PROCEDURE weave_queue_put(
        IN in_token     VARCHAR(512),
        IN in_namespace VARCHAR(200),
        IN in_name      VARCHAR(200),
        IN in_capacity  BIGINT,
        IN in_idempotency_key VARCHAR(512))
    COMMENT 'Description: creates a queue or changes its capacity.
Parameters: in_token (admin scope and the queue), in_namespace, in_name (1-64 chars [A-Za-z0-9_.:-]),
in_capacity (0..1000000), in_idempotency_key (NULL, or 1-128 printable ASCII, no space: the put''s key among the
namespace''s queue puts; a retry with it answers the first answer again and changes nothing, even after other puts).
Result set: name, capacity, created (1 when new; a replay: the first answer''s), replayed (1 when the key''s first
answer is answered again).
Errors: 50001 UNAUTHENTICATED, 50002 FORBIDDEN, 50003 NOT_FOUND, 50005 IDEMPOTENCY_CONFLICT (the key put
another request), 50113 IDEMPOTENCY_KEY_INVALID, 50116 NAME_INVALID, 50121 LIMIT_INVALID,
1205 (the row is held for more than a second, by a long transaction that uses it: try again).
Rules: R-8, M-2.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_status VARCHAR(16);
    DECLARE v_created TINYINT;
    DECLARE v_replayed TINYINT;
    DECLARE v_tx BOOLEAN DEFAULT FALSE;  -- TRUE once this routine has started its own transaction
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN IF v_tx THEN ROLLBACK; END IF; RESIGNAL; END;
    CALL _weave_transaction_begin('weave_queue_put', v_tx);  -- READ COMMITTED: its wakes lock no gaps of the line
    CALL _weave_provision_put('queue', in_token, in_namespace, in_name, in_capacity, NULL, in_idempotency_key,
                              v_status, v_created, v_replayed);
    COMMIT;
    SELECT in_name AS name, in_capacity AS capacity, v_created AS created, v_replayed AS replayed;
END
