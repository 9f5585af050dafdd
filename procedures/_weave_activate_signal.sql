-- Placeholder until the SIGNAL step type lands: the activation is recorded and announced; its
-- work is created by the SIGNAL routines.
CREATE PROCEDURE _weave_activate_signal(
        IN in_namespace_id  BIGINT UNSIGNED,
        IN in_instance_id   BIGINT UNSIGNED,
        IN in_activation_id BIGINT UNSIGNED,
        IN in_step_key      VARCHAR(64),
        IN in_seq           INT UNSIGNED,
        IN in_frozen        LONGTEXT,
        IN in_now           DATETIME(6),
        IN in_deadline      DATETIME(6))
    COMMENT 'Internal. Description: creates the SIGNAL step''s work for a new activation.'
    MODIFIES SQL DATA
BEGIN
    CALL _weave_event(in_namespace_id, in_instance_id, 'STEP_ACTIVATED', in_step_key, in_seq, in_now,
                      JSON_OBJECT('type', 'SIGNAL'));
END
