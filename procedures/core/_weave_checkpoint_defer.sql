-- A deferral moves only the next check time: the due time a checkpoint was created with stays,
-- nothing is consumed and no deadline moves (R-8, P-6). A deferral for room (QUOTA_FULL, QUEUE_FULL) names the app
-- or queue it waits for, and keeps its place in that line (deferred_since) while it waits for the same one; the
-- assignments read the row's old reason and line, which are written last.
CREATE PROCEDURE _weave_checkpoint_defer(
        IN in_namespace_id BIGINT UNSIGNED,
        IN in_instance_id  BIGINT UNSIGNED,
        IN in_step_key     VARCHAR(64),
        IN in_kind         VARCHAR(8),
        IN in_activation_id BIGINT UNSIGNED,
        IN in_until        DATETIME(6),
        IN in_now          DATETIME(6),
        IN in_why          VARCHAR(256),
        IN in_waits_for    BIGINT UNSIGNED)
    COMMENT 'Internal. Description: defers the checkpoint of (instance, step) to in_until, keeping its due time;
in_why is ''CODE: detail'', and the code is kept as the deferral''s reason with the time the deferral began (R-18);
in_waits_for: for a deferral for room, the app (QUOTA_FULL) or queue (QUEUE_FULL) it waits for, else NULL. Counts
it in @weave_made_due when in_until is not after in_now (see _weave_checkpoint_set).'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_id BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_reason VARCHAR(32) DEFAULT LEFT(SUBSTRING_INDEX(in_why, ':', 1), 32);
    SELECT id INTO v_id FROM weave_pending_advances
     WHERE instance_id = in_instance_id AND step_key = in_step_key FOR UPDATE;
    IF v_id IS NULL THEN
        INSERT INTO weave_pending_advances (namespace_id, instance_id, step_key, kind, activation_id, due_at,
                                            available_at, last_error, deferred_reason, deferred_since, deferrals,
                                            deferred_for, created_at)
        VALUES (in_namespace_id, in_instance_id, in_step_key, in_kind, in_activation_id, in_now, in_until,
                in_why, v_reason, in_now, 1, in_waits_for, in_now);
    ELSE
        UPDATE weave_pending_advances
           SET available_at = GREATEST(due_at, in_until), last_error = in_why, version = version + 1,
               deferred_since = IF(deferred_reason <=> v_reason AND COALESCE(deferred_for = in_waits_for, TRUE),
                                   deferred_since, in_now),
               deferrals = IF(deferred_reason <=> v_reason AND COALESCE(deferred_for = in_waits_for, TRUE),
                              deferrals + 1, 1),
               deferred_for = in_waits_for, deferred_reason = v_reason
         WHERE id = v_id;
    END IF;
    IF in_until <= in_now THEN
        SET @weave_made_due = COALESCE(@weave_made_due, 0) + 1;  -- due already (see _weave_checkpoint_set)
    END IF;
END
