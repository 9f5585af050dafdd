-- K-6, run by the orchestrator (candidate class TASK_EXPIRY): a task still QUEUED at its deadline will
-- never start, so it ends EXPIRED and its outcome goes to the inbox, consumed like a failure. The
-- outcome's time is the deadline itself, not the time of the scan (P-10). Only the task row is locked
-- (SKIP LOCKED: a claim in progress wins, and the claim itself refuses to start at the deadline).
CREATE PROCEDURE pulse_task_expire(IN in_task_id BIGINT UNSIGNED)
    COMMENT 'Description: expires one QUEUED task whose deadline has passed (K-6): status EXPIRED, inbox event EXPIRED
at the deadline, audit task.expire.
Parameters: in_task_id - from weave_scan (class TASK_EXPIRY).
Result set: outcome - EXPIRED, NOT_DUE, GONE (no longer QUEUED) or BUSY (another transaction holds the task).
Rules: K-6, R-6, R-13.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_now DATETIME(6);
    DECLARE v_exists BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_locked BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_status VARCHAR(16);
    DECLARE v_deadline DATETIME(6);
    DECLARE v_ns BIGINT UNSIGNED;
    DECLARE v_inst BIGINT UNSIGNED;
    DECLARE v_used INT UNSIGNED;
    DECLARE v_max INT UNSIGNED;
    DECLARE v_error VARCHAR(2048);
    DECLARE v_facts LONGTEXT;
    DECLARE v_outcome VARCHAR(16) DEFAULT 'GONE';
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;

    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
    START TRANSACTION;
    CALL _weave_now(v_now);
    SELECT id INTO v_exists FROM pulse_tasks WHERE id = in_task_id;
    expire: BEGIN
        IF v_exists IS NULL THEN
            LEAVE expire;
        END IF;
        SELECT id, status, deadline_at, namespace_id, instance_id, attempts_used, max_attempts, error
          INTO v_locked, v_status, v_deadline, v_ns, v_inst, v_used, v_max, v_error
          FROM pulse_tasks WHERE id = in_task_id FOR UPDATE SKIP LOCKED;
        IF v_locked IS NULL THEN
            SET v_outcome = 'BUSY';
            LEAVE expire;
        END IF;
        IF v_status <> 'QUEUED' THEN
            LEAVE expire;
        END IF;
        IF v_deadline > v_now THEN
            SET v_outcome = 'NOT_DUE';
            LEAVE expire;
        END IF;
        SET v_facts = JSON_OBJECT('task_id', CONCAT('tsk_', in_task_id),
                                  'deadline_at', DATE_FORMAT(v_deadline, '%Y-%m-%dT%H:%i:%s.%fZ'),
                                  'expired_at', DATE_FORMAT(v_now, '%Y-%m-%dT%H:%i:%s.%fZ'),
                                  'attempts_used', v_used + 0, 'max_attempts', v_max + 0, 'last_error', v_error);
        UPDATE pulse_tasks SET status = 'EXPIRED', finished_at = v_now, updated_at = v_now WHERE id = in_task_id;
        CALL _pulse_inbox_add(in_task_id, 'EXPIRED', v_facts, v_deadline, v_now);
        CALL _weave_audit(v_ns, v_inst, 0, 'weave.orchestrator', 'task.expire', NULL, NULL, v_now, v_deadline, NULL,
                          v_facts, NULL);
        SET v_outcome = 'EXPIRED';
    END expire;
    COMMIT;
    SELECT v_outcome AS outcome;
END
