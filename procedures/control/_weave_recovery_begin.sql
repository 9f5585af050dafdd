-- The checks every step recovery shares (C-4, C-6): the instance is in review, the step is in review, and
-- no task of the instance is unsettled (an operator never races a request whose effect is unknown).
CREATE PROCEDURE _weave_recovery_begin(
        IN  in_instance_id BIGINT UNSIGNED,
        IN  in_step_key    VARCHAR(200),
        OUT out_step_id    BIGINT UNSIGNED,
        OUT out_step_type  VARCHAR(16),
        OUT out_seq        INT UNSIGNED,
        OUT out_activation BIGINT UNSIGNED)
    COMMENT 'Internal. Description: verifies a step recovery may act; locks the step.
Errors: 50003 NOT_FOUND (no such step), 50007 INVALID_STATE, 50008 TASK_IN_FLIGHT.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_status VARCHAR(16);
    DECLARE v_step_status VARCHAR(16);
    DECLARE v_unsettled INT;
    DECLARE v_which VARCHAR(112);  -- with its code, within the 128 characters a message carries
    SET out_step_id = NULL;
    SELECT status INTO v_status FROM weave_instances WHERE id = in_instance_id;
    SELECT id, type, status, activation_seq, activation_id
      INTO out_step_id, out_step_type, v_step_status, out_seq, out_activation
      FROM weave_steps WHERE instance_id = in_instance_id AND step_key = in_step_key FOR UPDATE;
    IF out_step_id IS NULL THEN
        CALL _weave_raise(50003, 'NOT_FOUND: the instance has no step with this key');
    END IF;
    IF v_status <> 'NEEDS_REVIEW' THEN
        CALL _weave_raise(50007, CONCAT('INVALID_STATE: the instance is ', v_status, ', not NEEDS_REVIEW'));
    END IF;
    -- Before the step's own state: a step kept ACTIVE by a request in flight at a deadline (P-11) is
    -- answered with the reason an operator can act on.
    CALL _weave_task_unsettled_count(in_instance_id, v_unsettled);
    IF v_unsettled > 0 THEN
        -- Which one, so that an operator can look at it (its step's explain) rather than search for it.
        SELECT CONCAT('task tsk_', t.id, ' of step ', LEFT(t.step_key, 24), ' is ', t.status,
                      IF(a.worker_id IS NULL, '', CONCAT(' on worker ', LEFT(a.worker_id, 24))))
          INTO v_which
          FROM pulse_tasks t
          LEFT JOIN pulse_attempts a ON a.task_id = t.id AND a.status = 'RUNNING'
         WHERE t.instance_id = in_instance_id AND t.status IN ('QUEUED', 'RUNNING')
         ORDER BY t.id LIMIT 1;
        IF v_which IS NULL THEN
            SELECT CONCAT('the outcome of task tsk_', e.task_id, ' of step ', LEFT(t.step_key, 24),
                          ' waits for the orchestrator')
              INTO v_which
              FROM pulse_inbox e JOIN pulse_tasks t ON t.id = e.task_id
             WHERE e.instance_id = in_instance_id AND e.state = 'PENDING'
             ORDER BY e.id LIMIT 1;
        END IF;
        CALL _weave_raise(50008, CONCAT('TASK_IN_FLIGHT: ', COALESCE(v_which, 'a task of the instance is unsettled')));
    END IF;
    IF v_step_status <> 'NEEDS_REVIEW' THEN
        CALL _weave_raise(50007, CONCAT('INVALID_STATE: the step is ', v_step_status, ', not NEEDS_REVIEW'));
    END IF;
END
