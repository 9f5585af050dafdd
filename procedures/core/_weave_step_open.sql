-- The opening every wait handler shares (TIMER, SIGNAL, POLL): lock the step, then R-5: a checkpoint
-- of an activation that is no longer the step's current one is stale, deleted and never acted on (an
-- old activation can never wake new work). A handler that re-sets or removes its checkpoint on every
-- path asks for it to be taken here (in_take = 1), so no path can leave it behind. The caller holds
-- the instance lock and owns the transaction.
CREATE PROCEDURE _weave_step_open(
        IN  in_instance_id   BIGINT UNSIGNED,
        IN  in_step_key      VARCHAR(64),
        IN  in_activation_id BIGINT UNSIGNED,
        IN  in_take          TINYINT,
        OUT out_step_id      BIGINT UNSIGNED,
        OUT out_status       VARCHAR(16),
        OUT out_seq          INT UNSIGNED)
    COMMENT 'Internal. Description: locks the step of a checkpoint and checks its activation is current (R-5).
out_step_id: the step (NULL: stale, its checkpoint deleted); out_status, out_seq: the step''s status and activation
sequence. With in_take = 1 the step''s checkpoint is deleted too.
Rules: R-5.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_current BIGINT UNSIGNED DEFAULT NULL;

    SET out_step_id = NULL, out_status = NULL, out_seq = NULL;
    SELECT id, status, activation_id, activation_seq INTO out_step_id, out_status, v_current, out_seq
      FROM weave_steps WHERE instance_id = in_instance_id AND step_key = in_step_key FOR UPDATE;
    IF out_step_id IS NULL OR v_current IS NULL OR v_current <> in_activation_id THEN
        DELETE FROM weave_pending_advances WHERE instance_id = in_instance_id AND step_key = in_step_key
           AND activation_id = in_activation_id;
        SET out_step_id = NULL;
    ELSEIF in_take = 1 THEN
        DELETE FROM weave_pending_advances WHERE instance_id = in_instance_id AND step_key = in_step_key;
    END IF;
END
