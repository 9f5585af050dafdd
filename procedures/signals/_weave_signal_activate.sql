-- S-11: the wait pins everything a signal must meet (name, payload version and type, the correlation
-- bytes frozen on the activation row, the activation sequence) and its deadline, fixed now and never
-- re-timed (T-1): min(start + timeout_ms, the instance deadline in force). S-10: when signals arrived
-- before the step became active, the SIGNAL checkpoint is due at once, so they are looked at right
-- away; otherwise it is due at the wait's deadline.
CREATE PROCEDURE _weave_signal_activate(
        IN in_namespace_id  BIGINT UNSIGNED,
        IN in_instance_id   BIGINT UNSIGNED,
        IN in_activation_id BIGINT UNSIGNED,
        IN in_step_key      VARCHAR(64),
        IN in_seq           INT UNSIGNED,
        IN in_frozen        LONGTEXT,
        IN in_now           DATETIME(6),
        IN in_deadline      DATETIME(6))
    COMMENT 'Internal. Description: creates the SIGNAL wait and its checkpoint (due at once) for a new activation.
Rules: S-10, S-11, T-1.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_timeout BIGINT UNSIGNED DEFAULT CAST(JSON_VALUE(in_frozen, '$.timeout_ms') AS UNSIGNED);
    DECLARE v_planned DATETIME(6);
    DECLARE v_deadline DATETIME(6);
    DECLARE v_corr VARBINARY(512);
    DECLARE v_due DATETIME(6);
    SET v_planned = in_now + INTERVAL v_timeout * 1000 MICROSECOND;
    SET v_deadline = LEAST(v_planned, in_deadline);
    -- The correlation bytes as the activation row froze them (_weave_step_activate stores this same value).
    SET v_corr = IF(JSON_TYPE(JSON_EXTRACT(in_frozen, '$.correlation')) = 'STRING',
                    CAST(JSON_UNQUOTE(JSON_EXTRACT(in_frozen, '$.correlation')) AS BINARY), NULL);
    INSERT INTO weave_waits (namespace_id, instance_id, activation_id, step_key, activation_seq, kind, status,
                             started_at, deadline_at, signal_name, payload_version, payload_type, correlation_key)
    VALUES (in_namespace_id, in_instance_id, in_activation_id, in_step_key, in_seq, 'SIGNAL', 'WAITING', in_now,
            v_deadline, JSON_VALUE(in_frozen, '$.signal.name'), JSON_VALUE(in_frozen, '$.signal.payload_version'),
            COALESCE(JSON_VALUE(in_frozen, '$.signal.payload_type'), 'any'), v_corr);
    -- S-10: with early signals the checkpoint is due at once and looks at them; with none there is nothing
    -- to look at before the deadline (a signal that arrives later makes it due itself, S-3).
    SELECT IF(EXISTS (SELECT 1 FROM weave_signals WHERE instance_id = in_instance_id AND target_step_key = in_step_key
                         AND target_activation_seq = in_seq AND status = 'PENDING'), in_now, v_deadline) INTO v_due;
    CALL _weave_checkpoint_set(in_namespace_id, in_instance_id, in_step_key, 'SIGNAL', in_activation_id, v_due, in_now);
    CALL _weave_event(in_namespace_id, in_instance_id, 'STEP_ACTIVATED', in_step_key, in_seq, in_now,
         JSON_OBJECT('type', 'SIGNAL', 'name', JSON_VALUE(in_frozen, '$.signal.name'),
                     'payload_version', JSON_VALUE(in_frozen, '$.signal.payload_version'),
                     'correlation_key', CONVERT(v_corr USING utf8mb4), 'timeout_ms', v_timeout + 0,
                     'deadline_at', DATE_FORMAT(v_deadline, '%Y-%m-%dT%H:%i:%s.%fZ'),
                     'truncated', v_deadline < v_planned), NULL, NULL);
END
