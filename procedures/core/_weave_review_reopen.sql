-- C-4: when no step-level and no instance-level reason remains open, the instance runs again: status
-- RUNNING, gate OPEN, ROOT checkpoint due at once. Called after any action that closes reasons.
CREATE PROCEDURE _weave_review_reopen(
        IN  in_namespace_id BIGINT UNSIGNED,
        IN  in_instance_id  BIGINT UNSIGNED,
        IN  in_now          DATETIME(6),
        OUT out_reopened    TINYINT)
    COMMENT 'Internal. Description: reopens a NEEDS_REVIEW instance that has no open review reason left (C-4).'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_open INT;
    DECLARE v_status VARCHAR(16);
    SET out_reopened = 0;
    SELECT status INTO v_status FROM weave_instances WHERE id = in_instance_id;
    SELECT COUNT(*) INTO v_open FROM weave_review_reasons WHERE instance_id = in_instance_id AND closed_at IS NULL;
    IF v_status = 'NEEDS_REVIEW' AND v_open = 0 THEN
        UPDATE weave_instances SET status = 'RUNNING', gate = 'OPEN' WHERE id = in_instance_id;
        CALL _weave_checkpoint_set(in_namespace_id, in_instance_id, '', 'ROOT', 0, in_now, in_now);
        CALL _weave_event(in_namespace_id, in_instance_id, 'INSTANCE_REOPENED', '', 0, in_now, '{}', NULL, NULL, NULL);
        SET out_reopened = 1;
    END IF;
END
