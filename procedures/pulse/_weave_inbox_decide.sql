-- K-7: task outcomes reach their instance only here, under the instance lock (R-3, taken SKIP LOCKED so
-- orchestrators never queue behind each other, R-13). Consumption is idempotent: an event is applied
-- only while it is PENDING, read under lock, and leaves that state in the same transaction. Outcomes
-- of one task are applied in the order of their own times: an earlier one still pending goes first.
-- The decision of one inbox event inside the transaction its caller started (weave_inbox_consume, or
-- weave_candidates_advance for a list).
CREATE PROCEDURE _weave_inbox_decide(
        IN  in_inbox_id BIGINT UNSIGNED,
        OUT out_outcome VARCHAR(16))
    COMMENT 'Internal. Description: consumes one task-inbox event in the caller''s transaction (K-7), after verifying the
task''s ownership (R-6). out_outcome: as weave_inbox_consume, or EARLIER_FIRST (a fact of another step, due before
the outcome occurred, is still to be decided; the outcome stays due).
Errors: 50007 INVALID_STATE when the event names an instance that does not exist.
Rules: K-7, R-3, R-4, R-6, R-9, R-13, F-9.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_now DATETIME(6);
    DECLARE v_last DATETIME(6);  -- the instance's last decision, as locked (R-2)
    DECLARE v_open INT UNSIGNED;  -- its steps not SUCCEEDED, as locked
    DECLARE v_pending INT UNSIGNED;  -- of those, PENDING
    DECLARE v_inst BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_ns BIGINT UNSIGNED;
    DECLARE v_task BIGINT UNSIGNED;
    DECLARE v_state VARCHAR(16) DEFAULT NULL;
    DECLARE v_available DATETIME(6);
    DECLARE v_occurred DATETIME(6);
    DECLARE v_earlier DATETIME(6);  -- the earliest fact of the instance's other steps still to be decided
    DECLARE v_status VARCHAR(16);  -- the instance's, read under its lock

    consume: BEGIN
        CALL _weave_candidate_open('INBOX', in_inbox_id, v_ns, v_inst, v_status, v_last, v_open, v_pending,
                                   out_outcome);
        IF out_outcome IS NOT NULL THEN
            LEAVE consume;
        END IF;
        SET out_outcome = 'GONE';
        -- The clock in the re-read of the candidate (see _weave_candidate_open), never before the instance's last
        -- decision (R-2: see _weave_signal_accept).
        -- With it, the earliest stored time of the facts of the instance's other steps than the task's still to be
        -- decided that came before this outcome (_weave_facts_before; not when the task's step is the instance's only
        -- open one).
        SELECT e.task_id, e.state, e.available_at, e.occurred_at,
               GREATEST(UTC_TIMESTAMP(6) + INTERVAL (SELECT clock_offset_us FROM weave_install WHERE id = 1) MICROSECOND,
                        v_last),
               CASE v_open > 1 WHEN TRUE THEN
                   _weave_facts_before(e.instance_id, (SELECT et.step_key FROM pulse_tasks et WHERE et.id = e.task_id),
                                       e.occurred_at, v_open, v_pending)
               WHEN FALSE THEN TIMESTAMP'9999-12-31 00:00:00' END
          INTO v_task, v_state, v_available, v_occurred, v_now, v_earlier
          FROM pulse_inbox e WHERE e.id = in_inbox_id AND e.instance_id = v_inst FOR UPDATE;
        IF v_state IS NULL OR v_state <> 'PENDING' THEN
            LEAVE consume;
        END IF;
        IF v_now IS NULL OR v_earlier IS NULL THEN  -- both always answer: cut short (see _weave_root_advance)
            CALL _weave_raise(50016, 'INTERRUPTED: the clock or the facts due came back empty; nothing is changed');
        END IF;
        IF v_available > v_now THEN
            SET out_outcome = 'NOT_DUE';
            LEAVE consume;
        END IF;
        IF v_earlier < v_occurred AND NOT (@weave_facts_only <=> v_inst) THEN
            -- R-13, F-9: a fact of another step, due before this outcome occurred, is decided first (see
            -- _weave_checkpoint_decide); the outcome stays due.
            SET out_outcome = 'EARLIER_FIRST';
            LEAVE consume;
        END IF;
        -- Ours is PENDING and locked, so the first pending outcome of the task always exists; at worst it is ours.
        CALL _weave_inbox_settle(v_ns, v_inst, v_status, v_task, in_inbox_id, v_now, FALSE, out_outcome);
    END consume;
END
