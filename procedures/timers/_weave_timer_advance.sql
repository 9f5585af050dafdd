-- TIMER settlement (T-1..T-8). The due time is re-derived from the stored facts and never from now;
-- a timer scanned late settles with its original due time (T-6) and its successors then face R-8 as
-- of now. Settling, the successors (bounded by R-7), the events and the audit row are one
-- transaction (T-7): the caller's.
CREATE PROCEDURE _weave_timer_advance(
        IN  in_namespace_id  BIGINT UNSIGNED,
        IN  in_instance_id   BIGINT UNSIGNED,
        IN  in_step_key      VARCHAR(64),
        IN  in_activation_id BIGINT UNSIGNED,
        IN  in_now           DATETIME(6),
        OUT out_outcome      VARCHAR(16))
    COMMENT 'Internal. Description: settles a due TIMER wait (T-3), or expires a truncated one into review (T-4).
out_outcome: SETTLED, TRUNCATED, NOT_DUE or STALE.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_step BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_seq INT UNSIGNED;
    DECLARE v_wait BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_started DATETIME(6);
    DECLARE v_due DATETIME(6);
    DECLARE v_planned DATETIME(6);
    DECLARE v_deadline DATETIME(6);
    DECLARE v_root VARCHAR(16);
    DECLARE v_facts LONGTEXT;
    -- The opening's outputs this handler does not use: it verified them (R-6) and found the wait open.
    DECLARE v_no_step_status VARCHAR(16);
    DECLARE v_no_wait_status VARCHAR(16);
    DECLARE v_no_frozen LONGTEXT;

    CALL _weave_step_open(in_instance_id, in_step_key, in_activation_id, 'TIMER', v_step, v_no_step_status, v_seq,
                          v_wait, v_no_wait_status, v_started, v_due, v_planned, v_deadline, v_no_frozen);

    timer: BEGIN
        IF v_step IS NULL THEN  -- stale (R-5), or the wait or the step has ended
            SET out_outcome = 'STALE';
            LEAVE timer;
        END IF;
        IF in_now < v_due THEN
            CALL _weave_checkpoint_set(in_namespace_id, in_instance_id, in_step_key, 'TIMER', in_activation_id,
                                       v_due, in_now);
            SET out_outcome = 'NOT_DUE';
            LEAVE timer;
        END IF;

        SET v_facts = JSON_OBJECT(
            'started_at', DATE_FORMAT(v_started, '%Y-%m-%dT%H:%i:%s.%fZ'),
            'due_at', DATE_FORMAT(v_due, '%Y-%m-%dT%H:%i:%s.%fZ'),
            'planned_due_at', DATE_FORMAT(v_planned, '%Y-%m-%dT%H:%i:%s.%fZ'),
            'settled_at', DATE_FORMAT(in_now, '%Y-%m-%dT%H:%i:%s.%fZ'),
            'lateness_ms', TIMESTAMPDIFF(MICROSECOND, v_due, in_now) / 1000);
        IF v_due < v_planned THEN
            -- T-4: the instance deadline cut the delay short; a truncated wait is never a success.
            CALL _weave_wait_expire(v_step, in_activation_id, v_wait, in_now);
            CALL _weave_event(in_namespace_id, in_instance_id, 'TIMER_TRUNCATED', in_step_key, v_seq, in_now, v_facts,
                              'timer.truncate', v_deadline, NULL);
            CALL _weave_review_open(in_namespace_id, in_instance_id, 'TIMER_TRUNCATED', in_step_key, v_seq,
                                    v_facts, in_now);
            SET out_outcome = 'TRUNCATED';
        ELSE
            -- T-3 (and T-5, T-6: a paused or late-scanned timer settles all the same): the wait is satisfied with
            -- the step's close.
            CALL _weave_step_close(in_namespace_id, in_instance_id, in_step_key, v_seq, in_activation_id, v_wait,
                                   'null', 'TIMER_SETTLED', 'timer.settle', v_deadline, v_facts, in_now, v_root);
            SET out_outcome = 'SETTLED';
        END IF;
    END timer;
    -- Every end of the wait removes its checkpoint: a settled step's goes with its close (in the ROOT walk's
    -- closing delete), NOT_DUE has set it anew, a stale wait's went in the opening, and a truncated one's goes here.
    IF out_outcome = 'TRUNCATED' THEN
        DELETE FROM weave_pending_advances WHERE instance_id = in_instance_id AND step_key = in_step_key;
    END IF;
END
