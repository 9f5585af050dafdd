-- The opening every wait handler shares (TIMER, SIGNAL, POLL): lock the step, then R-5: a checkpoint
-- of an activation that is no longer the step's current one is stale, deleted and never acted on (an
-- old activation can never wake new work). The current activation's checkpoint is the handler's to
-- keep, re-set or remove: a step that settles loses it with its close (the ROOT walk's closing delete).
-- A handler whose step waits (TIMER, SIGNAL) names its wait kind, and the activation and its wait are
-- read and locked by the same statement, in R-3 order (step, activation, wait): one read for what every
-- such handler verifies first. The caller holds the instance lock and owns the transaction.
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
step: out_wait_id (NULL: none), its status, started_at, due time (TIMER: due_at; SIGNAL: deadline_at) and
planned_due_at, and the activation''s deadline and frozen inputs.
Rules: R-5.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_current BIGINT UNSIGNED DEFAULT NULL;

    SET out_step_id = NULL, out_status = NULL, out_seq = NULL, out_wait_id = NULL;
    SELECT s.id, s.status, s.activation_id, s.activation_seq, w.id, w.status, w.started_at,
           IF(w.kind = 'TIMER', w.due_at, w.deadline_at), w.planned_due_at, a.deadline_at, a.frozen
      INTO out_step_id, out_status, v_current, out_seq, out_wait_id, out_wait_status, out_wait_started,
           out_wait_due, out_wait_planned, out_act_deadline, out_act_frozen
      FROM weave_steps s
      LEFT JOIN weave_activations a ON a.id = in_activation_id AND in_wait_kind IS NOT NULL
      LEFT JOIN weave_waits w ON w.activation_id = a.id AND w.kind = in_wait_kind AND w.instance_id = in_instance_id
     WHERE s.instance_id = in_instance_id AND s.step_key = in_step_key FOR UPDATE;
    IF out_step_id IS NULL OR v_current IS NULL OR v_current <> in_activation_id THEN
        DELETE FROM weave_pending_advances WHERE instance_id = in_instance_id AND step_key = in_step_key
           AND activation_id = in_activation_id;
        SET out_step_id = NULL;
    END IF;
END
