-- Placeholder until the POLL checkpoint handler lands.
CREATE PROCEDURE _weave_poll_advance(
        IN  in_namespace_id  BIGINT UNSIGNED,
        IN  in_instance_id   BIGINT UNSIGNED,
        IN  in_step_key      VARCHAR(64),
        IN  in_activation_id BIGINT UNSIGNED,
        IN  in_now           DATETIME(6),
        OUT out_outcome      VARCHAR(16))
    COMMENT 'Internal. Description: advances a POLL checkpoint.'
    MODIFIES SQL DATA
BEGIN
    CALL _weave_raise(50007, 'INVALID_STATE: no handler for POLL checkpoints yet');
END
