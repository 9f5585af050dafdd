-- One checkpoint row per (instance, step) (R-5). Callers hold the instance row lock, so no other
-- transaction can race this read-then-write for the same key.
CREATE PROCEDURE _weave_checkpoint_set(
        IN in_namespace_id BIGINT UNSIGNED,
        IN in_instance_id  BIGINT UNSIGNED,
        IN in_step_key     VARCHAR(64),
        IN in_kind         VARCHAR(8),
        IN in_activation_id BIGINT UNSIGNED,
        IN in_due_at       DATETIME(6),
        IN in_now          DATETIME(6))
    COMMENT 'Internal. Description: makes the checkpoint of (instance, step) due at in_due_at, pinned to in_activation_id.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_id BIGINT UNSIGNED DEFAULT NULL;
    SELECT id INTO v_id FROM weave_pending_advances
     WHERE instance_id = in_instance_id AND step_key = in_step_key FOR UPDATE;
    IF v_id IS NULL THEN
        INSERT INTO weave_pending_advances (namespace_id, instance_id, step_key, kind, activation_id, due_at,
                                            available_at, created_at)
        VALUES (in_namespace_id, in_instance_id, in_step_key, in_kind, in_activation_id, in_due_at, in_due_at, in_now);
    ELSE
        UPDATE weave_pending_advances
           SET deferred_reason = IF(due_at = in_due_at AND activation_id = in_activation_id, deferred_reason, NULL),
               deferred_since = IF(due_at = in_due_at AND activation_id = in_activation_id, deferred_since, NULL),
               deferrals = IF(due_at = in_due_at AND activation_id = in_activation_id, deferrals, 0),
               kind = in_kind, activation_id = in_activation_id, due_at = in_due_at, available_at = in_due_at,
               attempts = 0, last_error = NULL, version = version + 1
         WHERE id = v_id;
    END IF;
END
