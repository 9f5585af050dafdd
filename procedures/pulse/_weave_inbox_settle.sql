-- K-7: a task's outcomes are applied in the order of their own times, so the event a decision is about
-- is applied after any earlier one of the same task still pending. The caller holds the instance lock,
-- has read the instance's status under it and owns the transaction; an instance being cancelled is
-- finished once its last task has reported (C-2).
-- Settle at Report: a worker's report that holds its instance (_pulse_attempt_current) consumes the
-- outcome it has just written in its own transaction (in_guarded), as the orchestrator would: one
-- decision and one scan fewer, and the step moves on as the worker reports. Guarded, the consumption
-- runs behind a savepoint: when it fails (facts that do not verify, an audit store down), only it is
-- undone and the event waits PENDING for the candidate path, which retries it with backoff; the
-- worker's report stands. A deadlock has taken the whole transaction, so it fails the report too,
-- which the worker retries.
CREATE PROCEDURE _weave_inbox_settle(
        IN  in_namespace_id BIGINT UNSIGNED,
        IN  in_instance_id  BIGINT UNSIGNED,
        IN  in_inst_status  VARCHAR(16),
        IN  in_task_id      BIGINT UNSIGNED,
        IN  in_inbox_id     BIGINT UNSIGNED,
        IN  in_now          DATETIME(6),
        IN  in_guarded      BOOLEAN,
        OUT out_outcome     VARCHAR(16))
    COMMENT 'Internal. Description: applies the PENDING inbox events of a task of the locked instance in outcome-time
order up to in_inbox_id (at most 16), then finishes a CANCELLING instance that has no task left in flight.
out_outcome: as _weave_inbox_apply, for the last event applied. in_guarded (a worker''s report): behind a
savepoint, a failure undoes only this and answers LATER, the events staying PENDING for the orchestrator.
Rules: K-3, K-7, C-2, R-3, R-4.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_next BIGINT UNSIGNED;
    DECLARE v_guard INT DEFAULT 0;
    DECLARE v_finished TINYINT;
    DECLARE v_errno INT;
    IF in_guarded THEN
        SAVEPOINT weave_inbox_settle;
    END IF;
    settle: BEGIN
        DECLARE EXIT HANDLER FOR SQLEXCEPTION
        BEGIN
            GET DIAGNOSTICS CONDITION 1 v_errno = MYSQL_ERRNO;
            -- An interrupt is the whole decision's, as a deadlock is (see _weave_signal_accept's wake).
            IF NOT in_guarded OR _weave_error_ends_call(v_errno) THEN
                RESIGNAL;
            END IF;
            ROLLBACK TO SAVEPOINT weave_inbox_settle;
            SET out_outcome = 'LATER';
        END;
        REPEAT
            CALL _weave_inbox_apply(in_namespace_id, in_instance_id, in_task_id, in_now, v_next, out_outcome);
            SET v_guard = v_guard + 1;
        UNTIL v_next = in_inbox_id OR v_guard >= 16 END REPEAT;
        IF in_inst_status = 'CANCELLING' THEN  -- no outcome makes an instance CANCELLING: only a cancel does
            CALL _weave_instance_cancel_finish(in_namespace_id, in_instance_id, in_now, v_finished);
        END IF;
    END settle;
END
