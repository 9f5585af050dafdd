-- The common opening of every operator action (06-control): validate reason and key, authorise, lock
-- in R-3 order, and answer replays. An action is identified by (instance, action, idempotency key);
-- the same key with the same request is a replay, with another request a conflict.
CREATE PROCEDURE _weave_control_begin(
        IN  in_token           VARCHAR(512),
        IN  in_namespace       VARCHAR(200),
        IN  in_workflow_id     VARCHAR(64),
        IN  in_scope           VARCHAR(64),
        IN  in_action          VARCHAR(48),
        IN  in_reason          VARCHAR(4096),
        IN  in_idempotency_key VARCHAR(512),
        IN  in_request_digest  CHAR(64),
        IN  in_caller_compares BOOLEAN,
        OUT out_namespace_id   BIGINT UNSIGNED,
        OUT out_credential_id  BIGINT UNSIGNED,
        OUT out_actor          VARCHAR(128),
        OUT out_instance_id    BIGINT UNSIGNED,
        OUT out_replayed       TINYINT,
        OUT out_now            DATETIME(6))
    COMMENT 'Internal. Description: validates, authorises and locks for an operator action; out_replayed = 1 when the
same key already did the same request; with in_caller_compares, 2 when it did one of another digest (the caller
decides whether it is the same request), else that is IDEMPOTENCY_CONFLICT. Errors: 50111 REASON_INVALID, 50113
IDEMPOTENCY_KEY_INVALID, 50005
IDEMPOTENCY_CONFLICT, 50003 NOT_FOUND (also when the instance is removed while the action waits for its lock), and
those of _weave_instance_authorize.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_locked BIGINT UNSIGNED;  -- the instance's event_seq, once locked
    DECLARE v_identity BIGINT UNSIGNED;  -- the instance's starting identity, for its lock
    DECLARE v_digest CHAR(64) DEFAULT NULL;
    CALL _weave_instance_authorize(in_token, in_namespace, in_workflow_id, in_scope,
                                   out_namespace_id, out_credential_id, out_actor, out_instance_id,
                                   v_identity);
    -- A reason of spaces alone says nothing, and the audit trail would keep it as the action's reason.
    IF in_reason IS NULL OR CHAR_LENGTH(in_reason) NOT BETWEEN 1 AND 1024 OR NOT in_reason REGEXP '[^[:space:]]' THEN
        CALL _weave_raise(50111, 'REASON_INVALID: a reason of 1-1024 characters, not spaces alone, is required');
    END IF;
    IF in_idempotency_key IS NULL OR NOT (in_idempotency_key REGEXP '^[!-~]{1,128}\\z') THEN
        CALL _weave_raise(50113, 'IDEMPOTENCY_KEY_INVALID: 1-128 printable ASCII characters, no space');
    END IF;
    CALL _weave_instance_lock(out_instance_id, v_identity, v_locked);
    IF v_locked IS NULL THEN  -- removed (a retention purge) after the unlocked read that authorised the action
        CALL _weave_raise(50003, 'NOT_FOUND: no such object in this namespace');
    END IF;
    -- R-2: the decision's time is read after the lock that orders it (_weave_now's expression, inline), never before
    -- the instance's last decision (see _weave_signal_accept).
    SELECT GREATEST(UTC_TIMESTAMP(6) + INTERVAL clock_offset_us MICROSECOND,
                    (SELECT updated_at FROM weave_instances WHERE id = out_instance_id))
      INTO out_now FROM weave_install WHERE id = 1;
    IF out_now IS NULL THEN  -- the instance is held and the clock always answers: cut short (see _weave_root_advance)
        CALL _weave_raise(50016, 'INTERRUPTED: the clock came back empty; nothing is changed');
    END IF;
    SELECT request_digest INTO v_digest FROM weave_audit
     WHERE instance_id = out_instance_id AND action = in_action AND idempotency_key = in_idempotency_key
     LIMIT 1 FOR UPDATE;
    SET out_replayed = 0;
    IF v_digest IS NOT NULL THEN
        IF v_digest = in_request_digest THEN
            SET out_replayed = 1;
        ELSEIF in_caller_compares THEN
            SET out_replayed = 2;  -- the caller compares what the digest alone cannot (a JSON value's spellings)
        ELSE
            CALL _weave_raise(50005, 'IDEMPOTENCY_CONFLICT: this key did a different request');
        END IF;
    END IF;
END
