-- Inlined: installed as a block in each routine that calls it, not called (procedures/inlining.py).
-- The decision of one checkpoint, inside the transaction its caller started: the shared candidate
-- opening takes the locks in R-3 order (the instance SKIP LOCKED so orchestrators never queue behind
-- each other, R-13), then the checkpoint and the step's rows are re-read and verified under them, and
-- the ROOT walk or the step kind's handler runs (_weave_step_advance, which a fresh signal reaches too).
-- The scan only proposed it (R-6); this decides.
CREATE PROCEDURE _weave_checkpoint_decide(
        IN  in_checkpoint_id BIGINT UNSIGNED,
        OUT out_outcome      VARCHAR(16))
    COMMENT 'Internal. Description: advances one due checkpoint in the caller''s transaction. out_outcome: GONE,
BUSY, NOT_DUE, EARLIER_FIRST (a fact of another step of the instance, due before it, is still to be decided; it
stays due), STALE, or the step kind handler''s outcome (as weave_checkpoint_advance).
Errors: 50007 INVALID_STATE for a kind without a handler (_weave_step_advance).
Rules: R-1, R-3, R-5, R-6, R-13, F-9.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_now DATETIME(6);
    DECLARE v_last DATETIME(6);  -- the instance's last decision, as locked (R-2)
    DECLARE v_open INT UNSIGNED;  -- its steps not SUCCEEDED, as locked
    DECLARE v_pending INT UNSIGNED;  -- of those, PENDING
    DECLARE v_ns BIGINT UNSIGNED;
    DECLARE v_inst BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_kind VARCHAR(8) DEFAULT NULL;
    DECLARE v_step_key VARCHAR(64);
    DECLARE v_activation BIGINT UNSIGNED;
    DECLARE v_available DATETIME(6);
    DECLARE v_due DATETIME(6);
    DECLARE v_earlier DATETIME(6);  -- the earliest fact of the instance's other steps still to be decided
    DECLARE v_status VARCHAR(16);

    decide: BEGIN
        CALL _weave_candidate_open('CHECKPOINT', in_checkpoint_id, v_ns, v_inst, v_status, v_last, v_open, v_pending,
                                   out_outcome);
        IF out_outcome IS NOT NULL THEN
            LEAVE decide;
        END IF;
        SET out_outcome = 'GONE';
        -- The clock in the re-read of the candidate (see _weave_candidate_open), never before the instance's last
        -- decision (R-2: see _weave_signal_accept).
        -- In the same statement, the earliest stored time among the facts of the instance's other steps still to be
        -- decided that came before this checkpoint's due time (_weave_facts_before). An instance whose only open
        -- step is this one has no other facts: the function is not called.
        SELECT c.kind, c.step_key, c.activation_id, c.available_at, c.due_at,
               GREATEST(UTC_TIMESTAMP(6) + INTERVAL (SELECT clock_offset_us FROM weave_install WHERE id = 1) MICROSECOND,
                        v_last),
               CASE v_open > 1
                   WHEN TRUE THEN _weave_facts_before(c.instance_id, c.step_key, c.due_at, v_open, v_pending)
                   WHEN FALSE THEN TIMESTAMP'9999-12-31 00:00:00' END
          INTO v_kind, v_step_key, v_activation, v_available, v_due, v_now, v_earlier
          FROM weave_pending_advances c WHERE c.id = in_checkpoint_id AND c.instance_id = v_inst FOR UPDATE;
        IF v_kind IS NULL THEN
            LEAVE decide;
        END IF;
        IF v_now IS NULL OR v_earlier IS NULL THEN  -- both always answer: cut short (see _weave_root_advance)
            CALL _weave_raise(50016, 'INTERRUPTED: the clock or the facts due came back empty; nothing is changed');
        END IF;
        IF v_available > v_now THEN
            SET out_outcome = 'NOT_DUE';
            LEAVE decide;
        END IF;
        IF v_earlier < v_due AND NOT (@weave_facts_only <=> v_inst) THEN
            -- R-13, F-9: an instance's facts are decided in the order of their stored times, whichever node or
            -- scan comes to them first. Served late (every runner down) and out of order, a timer would start its
            -- successor's task in an instance whose other wait had run out before the timer fell due, and whose
            -- gate that expiry closes. Nothing changes: the candidate stays due, and the scan that brings it back
            -- brings the earlier one too (it lists each class earliest first). A cancel deciding the instance's
            -- facts (weave_instance_cancel) starts no work, so there their order changes nothing.
            SET out_outcome = 'EARLIER_FIRST';
            LEAVE decide;
        END IF;
        IF v_kind = 'ROOT' THEN
            CALL _weave_root_advance(v_ns, v_inst, v_now, 32, TRUE, NULL, NULL, NULL, NULL, out_outcome);
        ELSE
            CALL _weave_step_advance(v_ns, v_inst, v_step_key, v_kind, v_activation, v_now, out_outcome);
        END IF;
    END decide;
END
