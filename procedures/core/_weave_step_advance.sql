-- The one place where a step kind picks its handler. Every path that wakes a step (its checkpoint,
-- a fresh signal for its wait) comes through here, so a step can never be decided two ways; a new
-- kind plugs in by naming its handler below. The caller holds the instance lock and owns the
-- transaction.
CREATE PROCEDURE _weave_step_advance(
        IN  in_namespace_id  BIGINT UNSIGNED,
        IN  in_instance_id   BIGINT UNSIGNED,
        IN  in_kind          VARCHAR(8),
        IN  in_step_key      VARCHAR(64),
        IN  in_activation_id BIGINT UNSIGNED,
        IN  in_now           DATETIME(6),
        OUT out_outcome      VARCHAR(16))
    COMMENT 'Internal. Description: runs the handler of a step kind (ROOT, TIMER, SIGNAL or POLL) for one step of the
locked instance. out_outcome: the handler''s outcome.
Errors: 50007 INVALID_STATE for a kind without a handler.'
    MODIFIES SQL DATA
BEGIN
    CASE in_kind
        WHEN 'ROOT' THEN CALL _weave_root_advance(in_namespace_id, in_instance_id, in_now, 32, out_outcome);
        WHEN 'TIMER' THEN
            CALL _weave_timer_advance(in_namespace_id, in_instance_id, in_step_key, in_activation_id, in_now,
                                      out_outcome);
        WHEN 'SIGNAL' THEN
            CALL _weave_signal_advance(in_namespace_id, in_instance_id, in_step_key, in_activation_id, in_now,
                                       out_outcome);
        WHEN 'POLL' THEN
            CALL _weave_poll_advance(in_namespace_id, in_instance_id, in_step_key, in_activation_id, in_now,
                                     out_outcome);
        ELSE CALL _weave_raise(50007, 'INVALID_STATE: a step kind without a handler');
    END CASE;
END
