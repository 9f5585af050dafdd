-- Lock order R-3 for every decision about one instance: identity -> app -> queues (by name) ->
-- instance. The identity is read shared (concurrent decisions of one credential do not queue), and so
-- is the app of a definition without queues. The app and queue rows of a definition that runs tasks
-- are not locked here at all: quota and capacity live in their in-flight counters, which
-- _pulse_slot_take changes with one guarded conditional UPDATE only where a task is created (R-8,
-- M-4.7), so decisions of one app no longer queue behind each other on its row (a shared lock here
-- would turn that UPDATE into a lock upgrade, and two upgrades deadlock).
-- The caller passes the instance's identity, app and definition queues, which never change once the
-- instance exists: the authorisation reads them with the instance it resolves, so they are not read
-- twice. The orchestrator's candidates use the same sequence fused into _weave_candidate_open, which
-- skips a locked instance instead of waiting (R-13).
CREATE PROCEDURE _weave_instance_lock(
        IN  in_instance_id BIGINT UNSIGNED,
        IN  in_identity_id BIGINT UNSIGNED,
        IN  in_app_id      BIGINT UNSIGNED,
        IN  in_queues      VARCHAR(2048),
        OUT out_locked     TINYINT)
    COMMENT 'Internal. Description: locks identity, app (definitions without queues) and the instance in R-3 order,
waiting for each; in_identity_id, in_app_id and in_queues are the instance''s (as read with it, unlocked: they never
change); in_queues NULL leaves the app alone (a decision that starts no work). out_locked: 1 locked; 0 the instance
does not exist.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_dummy BIGINT UNSIGNED;
    DECLARE v_locked BIGINT UNSIGNED DEFAULT NULL;
    IF in_queues = '' THEN  -- identity then app, in one statement (STRAIGHT_JOIN keeps the order)
        SELECT c.id INTO v_dummy FROM weave_credentials c STRAIGHT_JOIN weave_apps a ON a.id = in_app_id
         WHERE c.id = in_identity_id LOCK IN SHARE MODE;
    ELSE
        SELECT id INTO v_dummy FROM weave_credentials WHERE id = in_identity_id LOCK IN SHARE MODE;
    END IF;
    SELECT id INTO v_locked FROM weave_instances WHERE id = in_instance_id FOR UPDATE;
    SET out_locked = IF(v_locked IS NULL, 0, 1);
END
