-- K-6, run by the orchestrator (candidate class TASK_EXPIRY): a task still QUEUED at its deadline will
-- never start, so it ends EXPIRED and its outcome goes to the inbox, consumed like a failure. The
-- outcome's time is the deadline itself, not the time of the scan (P-10). Only the task row is locked
-- (SKIP LOCKED: a claim in progress wins, and the claim itself refuses to start at the deadline); the
-- expiry itself is _pulse_task_expire, shared with the POLL deadline.
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
    DECLARE v_outcome VARCHAR(16) DEFAULT 'GONE';
    DECLARE v_tx BOOLEAN DEFAULT FALSE;  -- TRUE once this routine has started its own transaction
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN IF v_tx THEN ROLLBACK; END IF; RESIGNAL; END;
    CALL _weave_transaction_begin('pulse_task_expire', v_tx);  -- refused inside a caller's transaction (R-1)
    SELECT id INTO v_exists FROM pulse_tasks WHERE id = in_task_id;
    expire: BEGIN
        IF v_exists IS NULL THEN
            LEAVE expire;
        END IF;
        SELECT id INTO v_locked FROM pulse_tasks WHERE id = in_task_id FOR UPDATE SKIP LOCKED;
        IF v_locked IS NULL THEN
            SET v_outcome = 'BUSY';
            LEAVE expire;
        END IF;
        CALL _weave_now(v_now);  -- R-2: after the lock that orders the decision
        CALL _pulse_task_expire(in_task_id, v_now, TRUE, v_outcome);
    END expire;
    COMMIT;
    SELECT v_outcome AS outcome;
END
