-- "A task of the instance is still unsettled" (C-2, C-4): QUEUED or RUNNING, or ended with an outcome the
-- orchestrator has not consumed yet. An operator never acts while the effect of a request is unknown.
CREATE PROCEDURE _weave_task_unsettled_count(IN in_instance_id BIGINT UNSIGNED, OUT out_count INT)
    COMMENT 'Internal. Description: counts the tasks of an instance in flight or with an unconsumed outcome.'
    READS SQL DATA
BEGIN
    DECLARE v_in_flight INT;
    DECLARE v_unconsumed INT;
    SELECT COUNT(*) INTO v_in_flight FROM pulse_tasks
     WHERE instance_id = in_instance_id AND status IN ('QUEUED', 'RUNNING');
    SELECT COUNT(*) INTO v_unconsumed FROM pulse_inbox
     WHERE instance_id = in_instance_id AND state = 'PENDING';
    SET out_count = v_in_flight + v_unconsumed;
END
