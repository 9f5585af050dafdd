-- One checkpoint row per (instance, step) (R-5), kept by the unique key: one statement creates it or
-- re-sets it. Callers hold the instance row lock, so no other transaction writes the same key.
CREATE PROCEDURE _weave_checkpoint_set(
        IN in_namespace_id BIGINT UNSIGNED,
        IN in_instance_id  BIGINT UNSIGNED,
        IN in_step_key     VARCHAR(64),
        IN in_kind         VARCHAR(8),
        IN in_activation_id BIGINT UNSIGNED,
        IN in_due_at       DATETIME(6),
        IN in_now          DATETIME(6))
    COMMENT 'Internal. Description: makes the checkpoint of (instance, step) due at in_due_at, pinned to in_activation_id;
counts it in the session''s @weave_made_due when in_due_at is not after in_now (the advancers answer made_due).'
    MODIFIES SQL DATA
BEGIN
    -- A deferral record (R-18) survives only a re-set to the same due time and activation; the deferral
    -- columns are assigned first, while due_at and activation_id still hold the row's old values.
    INSERT INTO weave_pending_advances (namespace_id, instance_id, step_key, kind, activation_id, due_at, available_at,
                                        created_at)
    VALUES (in_namespace_id, in_instance_id, in_step_key, in_kind, in_activation_id, in_due_at, in_due_at, in_now)
    ON DUPLICATE KEY UPDATE
        deferred_reason = IF(due_at = VALUES(due_at) AND activation_id = VALUES(activation_id), deferred_reason, NULL),
        deferred_since = IF(due_at = VALUES(due_at) AND activation_id = VALUES(activation_id), deferred_since, NULL),
        deferrals = IF(due_at = VALUES(due_at) AND activation_id = VALUES(activation_id), deferrals, 0),
        deferred_for = IF(due_at = VALUES(due_at) AND activation_id = VALUES(activation_id), deferred_for, NULL),
        kind = VALUES(kind), activation_id = VALUES(activation_id), due_at = VALUES(due_at),
        available_at = VALUES(available_at), attempts = 0, last_error = NULL, version = version + 1;
    -- Due already: the session's count of candidates made due moves, and the advancer answers made_due, so
    -- that the loop scans again at once instead of probing first.
    IF in_due_at <= in_now THEN
        SET @weave_made_due = COALESCE(@weave_made_due, 0) + 1;
    END IF;
END
