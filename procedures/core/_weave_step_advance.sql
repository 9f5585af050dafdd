-- Inlined: installed as a block in each routine that calls it, not called (procedures/inlining.py).
-- The one place where a step kind picks its handler. A step is decided from two places: its checkpoint
-- coming due (_weave_checkpoint_decide) and a fresh signal for its open wait (weave_signal_process). Both
-- run the handler named here, under the instance lock they hold, so a step can never be decided two ways.
-- A new step kind with clock or signal work plugs in by naming its handler below (and its checkpoint kind
-- in the schema).
CREATE PROCEDURE _weave_step_advance(
        IN  in_namespace_id  BIGINT UNSIGNED,
        IN  in_instance_id   BIGINT UNSIGNED,
        IN  in_step_key      VARCHAR(64),
        IN  in_kind          VARCHAR(16),
        IN  in_activation_id BIGINT UNSIGNED,
        IN  in_now           DATETIME(6),
        OUT out_outcome      VARCHAR(16))
    COMMENT 'Internal. Description: runs the handler of step kind in_kind (TIMER, SIGNAL or POLL) for the activation
in_activation_id of step in_step_key, in the caller''s transaction. out_outcome: the handler''s.
Errors: 50007 INVALID_STATE for a kind without a handler.
Rules: R-5, R-6.'
    MODIFIES SQL DATA
BEGIN
    CASE in_kind
        WHEN 'TIMER' THEN CALL _weave_timer_advance(in_namespace_id, in_instance_id, in_step_key, in_activation_id,
                                                    in_now, out_outcome);
        WHEN 'SIGNAL' THEN CALL _weave_signal_advance(in_namespace_id, in_instance_id, in_step_key, in_activation_id,
                                                      in_now, NULL, FALSE, out_outcome);
        WHEN 'POLL' THEN CALL _weave_poll_advance(in_namespace_id, in_instance_id, in_step_key, in_activation_id,
                                                  in_now, out_outcome);
        ELSE CALL _weave_raise(50007, 'INVALID_STATE: a step kind without a handler');
    END CASE;
END
