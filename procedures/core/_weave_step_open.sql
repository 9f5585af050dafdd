-- Inlined: installed as a block in each routine that calls it, not called (procedures/inlining.py).
-- The opening every wait handler shares (TIMER, SIGNAL, POLL): lock the step, then R-5: a checkpoint
-- of an activation that is no longer the step's current one is stale, deleted and never acted on (an
-- old activation can never wake new work). The current activation's checkpoint is the handler's to
-- keep, re-set or remove: a step that settles loses it with its close (the ROOT walk's closing delete).
-- A handler whose step waits (TIMER, SIGNAL) names its wait kind, and the activation and its wait are
-- read and locked by the same statement, in R-3 order (step, activation, wait): one read for what every
-- such handler verifies first. R-6: a wait whose stored times do not follow from the activation's frozen
-- inputs is left untouched for an operator (an error, never a repair by guessing); a wait that is no longer
-- WAITING, or a step that is no longer ACTIVE, is stale like an old activation. The caller holds the
-- instance lock and owns the transaction.
CREATE PROCEDURE _weave_step_open(
        IN  in_instance_id   BIGINT UNSIGNED,
        IN  in_step_key      VARCHAR(64),
        IN  in_activation_id BIGINT UNSIGNED,
        IN  in_wait_kind     VARCHAR(16),
        OUT out_step_id      BIGINT UNSIGNED,
        OUT out_status       VARCHAR(16),
        OUT out_seq          INT UNSIGNED,
        OUT out_wait_id      BIGINT UNSIGNED,
        OUT out_wait_status  VARCHAR(16),
        OUT out_wait_started DATETIME(6),
        OUT out_wait_due     DATETIME(6),
        OUT out_wait_planned DATETIME(6),
        OUT out_act_deadline DATETIME(6),
        OUT out_act_frozen   LONGTEXT)
    COMMENT 'Internal. Description: locks the step of a checkpoint and checks its activation is current (R-5).
out_step_id: the step (NULL: stale, its checkpoint deleted); out_status, out_seq: the step''s status and activation
sequence. in_wait_kind (TIMER or SIGNAL; NULL: none): the activation''s wait of that kind, locked with the
step and verified (R-6): its id, status, started_at, due time (TIMER: due_at; SIGNAL: deadline_at) and
planned_due_at, and the activation''s deadline and frozen inputs; a wait not WAITING or a step not ACTIVE is stale.
Errors: 50007 INVALID_STATE when the wait''s facts do not verify (T-1 for a TIMER, S-11 for a SIGNAL).
Rules: R-5, R-6.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_current BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_ms BIGINT UNSIGNED;  -- the wait's length as frozen: a TIMER's delay_ms, a SIGNAL's timeout_ms

    SET out_step_id = NULL, out_status = NULL, out_seq = NULL, out_wait_id = NULL;
    SELECT s.id, s.status, s.activation_id, s.activation_seq, w.id, w.status, w.started_at,
           IF(w.kind = 'TIMER', w.due_at, w.deadline_at), w.planned_due_at, a.deadline_at, a.frozen
      INTO out_step_id, out_status, v_current, out_seq, out_wait_id, out_wait_status, out_wait_started,
           out_wait_due, out_wait_planned, out_act_deadline, out_act_frozen
      FROM weave_steps s
      LEFT JOIN weave_activations a ON a.id = in_activation_id AND in_wait_kind IS NOT NULL
      LEFT JOIN weave_waits w ON w.activation_id = a.id AND w.kind = in_wait_kind AND w.instance_id = in_instance_id
     WHERE s.instance_id = in_instance_id AND s.step_key = in_step_key FOR UPDATE;
    IF out_step_id IS NOT NULL AND v_current = in_activation_id AND in_wait_kind IS NOT NULL THEN
        SET v_ms = CAST(JSON_VALUE(out_act_frozen, IF(in_wait_kind = 'TIMER', '$.delay_ms', '$.timeout_ms'))
                        AS UNSIGNED);
        IF out_wait_id IS NULL OR v_ms IS NULL
           OR out_wait_due <> LEAST(out_wait_started + INTERVAL v_ms * 1000 MICROSECOND, out_act_deadline)
           OR (in_wait_kind = 'TIMER' AND out_wait_planned <> out_wait_started + INTERVAL v_ms * 1000 MICROSECOND)
        THEN
            CALL _weave_raise(50007, IF(in_wait_kind = 'TIMER',
                                        'INVALID_STATE: timer facts do not verify (T-1); left for an operator',
                                        'INVALID_STATE: signal wait facts do not verify (S-11); left for an operator'));
        END IF;
        IF out_wait_status <> 'WAITING' OR out_status <> 'ACTIVE' THEN
            SET v_current = NULL;  -- stale: the wait or the step has ended
        END IF;
    END IF;
    IF out_step_id IS NULL OR v_current IS NULL OR v_current <> in_activation_id THEN
        DELETE FROM weave_pending_advances WHERE instance_id = in_instance_id AND step_key = in_step_key
           AND activation_id = in_activation_id;
        SET out_step_id = NULL;
    END IF;
END
