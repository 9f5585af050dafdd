-- Placeholder until Pulse lands: quota and capacity checks for creating a task (R-8).
CREATE PROCEDURE _weave_task_room(
        IN  in_namespace_id BIGINT UNSIGNED,
        IN  in_instance_id  BIGINT UNSIGNED,
        IN  in_queue        VARCHAR(64),
        OUT out_why         VARCHAR(256))
    COMMENT 'Internal. Description: NULL when a task for the instance may be created on in_queue now, else why not.'
    READS SQL DATA
BEGIN
    SET out_why = NULL;
END
