-- Appends one event with the next gap-free sequence number of the instance (M-4.9). The counter
-- lives on the instance row, which every state change already holds locked (R-3), so two writers
-- can never take the same number. Two statements: the counter's new value travels in the session's
-- LAST_INSERT_ID (every caller that reads its own LAST_INSERT_ID() does so right after its own INSERT); one when
-- the caller has taken the number in an update of the instance row its decision makes anyway.
-- A decision the engine takes by itself is audited with the same facts as its event (R-4): given the
-- audit action, the same call writes that audit row too, under the engine's name.
CREATE PROCEDURE _weave_event(
        IN in_namespace_id    BIGINT UNSIGNED,
        IN in_instance_id     BIGINT UNSIGNED,
        IN in_type            VARCHAR(48),
        IN in_step_key        VARCHAR(64),
        IN in_activation_seq  INT UNSIGNED,
        IN in_now             DATETIME(6),
        IN in_data            LONGTEXT,
        IN in_audit_action    VARCHAR(48),
        IN in_audit_deadline  DATETIME(6),
        IN in_number          INT UNSIGNED)
    COMMENT 'Internal. Description: writes an event row with the next sequence number of the instance (R-4); with
in_audit_action, also the engine''s audit row of that action with the event''s data as details and
in_audit_deadline as its deadline (NULL: no audit row). in_number: the event''s number when the caller''s own update
of the instance row has taken it (raised event_seq to it); NULL: the next number is taken here.'
    MODIFIES SQL DATA
BEGIN
    -- LAST_INSERT_ID(expr) hands the new number to the INSERT below without reading the row back. A caller that
    -- writes the instance row in its decision anyway takes the number in that update and passes it.
    IF in_number IS NULL THEN
        UPDATE weave_instances SET event_seq = LAST_INSERT_ID(event_seq + 1), updated_at = in_now,
                                   version = version + 1
         WHERE id = in_instance_id;
        SET in_number = LAST_INSERT_ID();
    END IF;
    INSERT INTO weave_events (instance_id, seq, namespace_id, type, step_key, activation_seq, occurred_at, data)
    VALUES (in_instance_id, in_number, in_namespace_id, in_type, COALESCE(in_step_key, ''),
            COALESCE(in_activation_seq, 0), in_now, COALESCE(in_data, '{}'));
    IF in_audit_action IS NOT NULL THEN
        INSERT INTO weave_audit (namespace_id, instance_id, credential_id, actor, action, accepted_at, deadline_at,
                                 details, created_at)
        VALUES (in_namespace_id, in_instance_id, 0, 'weave.orchestrator', in_audit_action, in_now, in_audit_deadline,
                COALESCE(in_data, '{}'), in_now);
    END IF;
END
