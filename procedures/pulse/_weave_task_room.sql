-- R-8 and M-4.7 for one new task: the queue must exist and have capacity left, the app quota must
-- have room. Counted from the task rows themselves (QUEUED + RUNNING), under the app and queue locks
-- that _weave_instance_lock took, so two creators can never both take the last slot. Workers only
-- ever lower these counts (a task that ends), so their lock-free changes cannot break the bound.
-- A missing queue is a reason to wait, not an error: an operator may create it later.
CREATE PROCEDURE _weave_task_room(
        IN  in_namespace_id BIGINT UNSIGNED,
        IN  in_instance_id  BIGINT UNSIGNED,
        IN  in_queue        VARCHAR(64),
        OUT out_why         VARCHAR(256))
    COMMENT 'Internal. Description: NULL when a task for the instance may be created on in_queue now, else why not
(queue missing, queue full, app quota full). The caller holds the locks of _weave_instance_lock.
Rules: R-8, M-4.7.'
    READS SQL DATA
BEGIN
    DECLARE v_queue BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_capacity INT UNSIGNED;
    DECLARE v_app BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_quota INT UNSIGNED;
    DECLARE v_queued INT UNSIGNED DEFAULT 0;
    DECLARE v_running INT UNSIGNED DEFAULT 0;

    SET out_why = NULL;
    SELECT id, capacity INTO v_queue, v_capacity FROM weave_queues
     WHERE namespace_id = in_namespace_id AND name = in_queue;
    SELECT a.id, a.max_in_flight INTO v_app, v_quota
      FROM weave_instances i JOIN weave_apps a ON a.id = i.app_id
     WHERE i.id = in_instance_id AND i.namespace_id = in_namespace_id;
    IF v_queue IS NULL THEN
        SET out_why = CONCAT('QUEUE_NOT_FOUND: queue ', COALESCE(in_queue, '(none)'), ' does not exist');
    ELSEIF v_app IS NULL THEN
        SET out_why = 'APP_NOT_FOUND: app of the instance does not exist';
    ELSE
        SELECT COUNT(*) INTO v_queued FROM pulse_tasks WHERE queue_id = v_queue AND status = 'QUEUED';
        SELECT COUNT(*) INTO v_running FROM pulse_tasks WHERE queue_id = v_queue AND status = 'RUNNING';
        IF v_queued + v_running >= v_capacity THEN
            SET out_why = CONCAT('QUEUE_FULL: queue ', in_queue, ' is full (capacity ', v_capacity, ')');
        ELSE
            SELECT COUNT(*) INTO v_queued FROM pulse_tasks WHERE app_id = v_app AND status = 'QUEUED';
            SELECT COUNT(*) INTO v_running FROM pulse_tasks WHERE app_id = v_app AND status = 'RUNNING';
            IF v_queued + v_running >= v_quota THEN
                SET out_why = CONCAT('QUOTA_FULL: app quota is full (max_in_flight ', v_quota, ')');
            END IF;
        END IF;
    END IF;
END
