-- Appends one event with the next gap-free sequence number of the instance (M-4.9). The counter
-- lives on the instance row, which every state change already holds locked (R-3), so two writers
-- can never take the same number. Two statements: the counter's new value travels in the session's
-- LAST_INSERT_ID (every caller that reads its own LAST_INSERT_ID() does so right after its own INSERT).
CREATE PROCEDURE _weave_event(
        IN in_namespace_id  BIGINT UNSIGNED,
        IN in_instance_id   BIGINT UNSIGNED,
        IN in_type          VARCHAR(48),
        IN in_step_key      VARCHAR(64),
        IN in_activation_seq INT UNSIGNED,
        IN in_now           DATETIME(6),
        IN in_data          LONGTEXT)
    COMMENT 'Internal. Description: writes an event row with the next sequence number of the instance (R-4).'
    MODIFIES SQL DATA
BEGIN
    -- LAST_INSERT_ID(expr) hands the new number to the INSERT below without reading the row back.
    UPDATE weave_instances SET event_seq = LAST_INSERT_ID(event_seq + 1), updated_at = in_now, version = version + 1
     WHERE id = in_instance_id;
    INSERT INTO weave_events (instance_id, seq, namespace_id, type, step_key, activation_seq, occurred_at, data)
    VALUES (in_instance_id, LAST_INSERT_ID(), in_namespace_id, in_type, COALESCE(in_step_key, ''),
            COALESCE(in_activation_seq, 0), in_now, COALESCE(in_data, '{}'));
END
