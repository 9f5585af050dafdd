-- P-10, F-9: once a round's task has ended, its outcome is in the inbox, and the inbox decides by its own
-- time (respecting its backoff). A POLL decision that finds the round ended, or its outcome already stored,
-- leaves the round to the inbox: the POLL checkpoint is kept, deferred until a second after the outcome is
-- available, so that the two stored times are compared by the outcome's consumer.
CREATE PROCEDURE _weave_poll_inbox_first(
        IN  in_namespace_id  BIGINT UNSIGNED,
        IN  in_instance_id   BIGINT UNSIGNED,
        IN  in_step_key      VARCHAR(64),
        IN  in_activation_id BIGINT UNSIGNED,
        IN  in_task_id       BIGINT UNSIGNED,
        IN  in_task_ended    BOOLEAN,
        IN  in_now           DATETIME(6),
        IN  in_why           VARCHAR(200),
        OUT out_deferred     BOOLEAN)
    COMMENT 'Internal. Description: locks the round task''s pending inbox outcome; when there is one, or the task has
ended (in_task_ended), defers the POLL checkpoint to a second after the outcome is available (reason
OUTCOME_IN_INBOX: in_why) and sets out_deferred. Errors: 50007 INVALID_STATE when the task ended with no outcome in
the inbox.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_inbox BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_available DATETIME(6);
    -- By the task's own index: through the index of every PENDING event the lock would take other instances'.
    SELECT id, available_at INTO v_inbox, v_available FROM pulse_inbox FORCE INDEX (ix_inbox_task)
     WHERE task_id = in_task_id AND state = 'PENDING' ORDER BY occurred_at, id LIMIT 1 FOR UPDATE;
    SET out_deferred = v_inbox IS NOT NULL OR in_task_ended;
    IF out_deferred THEN
        IF v_inbox IS NULL THEN
            CALL _weave_raise(50007, 'INVALID_STATE: the round task ended but its outcome is not in the inbox');
        END IF;
        CALL _weave_checkpoint_defer(in_namespace_id, in_instance_id, in_step_key, 'POLL', in_activation_id,
                                     GREATEST(in_now + INTERVAL 1 SECOND, v_available), in_now,
                                     CONCAT('OUTCOME_IN_INBOX: ', in_why), NULL);
    END IF;
END
