-- Lock order R-3 for every decision about one instance: identity -> app -> queues (by name) ->
-- instance. The identity is read shared (concurrent decisions of one credential do not queue), and so
-- is the app of a definition without queues. The app and queue rows of a definition that runs tasks
-- are not locked here at all: quota and capacity live in their in-flight counters, which
-- _pulse_task_create changes with one guarded conditional UPDATE only where a task is created (R-8,
-- M-4.7), so decisions of one app no longer queue behind each other on its row (a shared lock here
-- would turn that UPDATE into a lock upgrade, and two upgrades deadlock).
-- The orchestrator passes in_skip_locked = 1 so nodes never wait on each other (R-13).
CREATE PROCEDURE _weave_instance_lock(
        IN  in_instance_id   BIGINT UNSIGNED,
        IN  in_skip_locked   TINYINT,
        OUT out_namespace_id BIGINT UNSIGNED,
        OUT out_locked       TINYINT)
    COMMENT 'Internal. Description: locks identity, app (definitions without queues) and the instance in R-3 order.
out_locked: 1 locked; 0 another transaction holds it (with in_skip_locked); -1 the instance does not exist.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_cred BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_app BIGINT UNSIGNED;
    DECLARE v_ns BIGINT UNSIGNED;
    DECLARE v_queues VARCHAR(2048);
    DECLARE v_dummy BIGINT UNSIGNED;
    DECLARE v_locked BIGINT UNSIGNED DEFAULT NULL;

    SET out_locked = -1, out_namespace_id = NULL;
    SELECT i.credential_id, i.app_id, i.namespace_id, d.queues INTO v_cred, v_app, v_ns, v_queues
      FROM weave_instances i JOIN weave_definitions d ON d.id = i.definition_id
     WHERE i.id = in_instance_id;
    IF v_cred IS NOT NULL THEN
        IF v_queues = '' THEN  -- identity then app, in one statement (STRAIGHT_JOIN keeps the order)
            SELECT c.id INTO v_dummy FROM weave_credentials c STRAIGHT_JOIN weave_apps a ON a.id = v_app
             WHERE c.id = v_cred LOCK IN SHARE MODE;
        ELSE
            SELECT id INTO v_dummy FROM weave_credentials WHERE id = v_cred LOCK IN SHARE MODE;
        END IF;
        IF in_skip_locked THEN
            SELECT id INTO v_locked FROM weave_instances WHERE id = in_instance_id FOR UPDATE SKIP LOCKED;
        ELSE
            SELECT id INTO v_locked FROM weave_instances WHERE id = in_instance_id FOR UPDATE;
        END IF;
        SET out_locked = IF(v_locked IS NULL, 0, 1);
        SET out_namespace_id = IF(v_locked IS NULL, NULL, v_ns);
    END IF;
END
