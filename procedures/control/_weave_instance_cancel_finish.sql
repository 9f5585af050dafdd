-- C-2: a CANCELLING instance becomes CANCELLED (final) once no task of it is in flight and every task
-- outcome has been collected. Called by cancel itself and after each consumed task outcome.
CREATE PROCEDURE _weave_instance_cancel_finish(
        IN  in_namespace_id BIGINT UNSIGNED,
        IN  in_instance_id  BIGINT UNSIGNED,
        IN  in_now          DATETIME(6),
        OUT out_finished    TINYINT)
    COMMENT 'Internal. Description: moves a CANCELLING instance to CANCELLED when nothing of it is in flight (C-2).'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_status VARCHAR(16);
    DECLARE v_unsettled INT;
    SET out_finished = 0;
    SELECT status INTO v_status FROM weave_instances WHERE id = in_instance_id;
    IF v_status = 'CANCELLING' THEN
        CALL _weave_task_unsettled_count(in_instance_id, v_unsettled);
        IF v_unsettled = 0 THEN
            UPDATE weave_instances SET status = 'CANCELLED', finished_at = in_now WHERE id = in_instance_id;
            DELETE FROM weave_pending_advances WHERE instance_id = in_instance_id;
            CALL _weave_event(in_namespace_id, in_instance_id, 'INSTANCE_CANCELLED', '', 0, in_now, '{}', NULL, NULL,
                              NULL);
            SET out_finished = 1;
        END IF;
    END IF;
END
