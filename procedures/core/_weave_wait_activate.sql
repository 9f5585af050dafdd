-- TIMER and SIGNAL steps are waits: their activation opens the step's wait, whose end is fixed now and never
-- re-timed (T-1): min(start + the step's delay_ms or timeout_ms, the instance deadline in force). A TIMER's end is
-- its due time, and the TIMER checkpoint pinned to this activation wakes it then (T-2: no task, no permit). A SIGNAL
-- wait's end is its deadline, and the wait pins everything a signal must meet (S-11: name, payload version and
-- type, the correlation bytes frozen on the activation row, the activation sequence). S-10: when signals arrived
-- before the step became active, the SIGNAL checkpoint is due at once, so they are looked at right away; with none
-- there is nothing to look at before the deadline (a signal that arrives later makes it due itself, S-3).
CREATE PROCEDURE _weave_wait_activate(
        IN in_namespace_id  BIGINT UNSIGNED,
        IN in_instance_id   BIGINT UNSIGNED,
        IN in_activation_id BIGINT UNSIGNED,
        IN in_step_key      VARCHAR(64),
        IN in_seq           INT UNSIGNED,
        IN in_type          VARCHAR(16),
        IN in_frozen        LONGTEXT,
        IN in_now           DATETIME(6),
        IN in_deadline      DATETIME(6),
        OUT out_facts LONGTEXT, OUT out_action VARCHAR(48), OUT out_audit_deadline DATETIME(6))
    COMMENT 'Internal. Description: opens the wait of a new TIMER or SIGNAL activation (in_type) with its checkpoint.
A TIMER is due at min(now + delay_ms, instance deadline). A SIGNAL wait''s deadline is min(now + timeout_ms, instance
deadline), and its checkpoint is due at once when signals for it are already PENDING, else at that deadline.
out_facts: the STEP_ACTIVATED event''s data, which the caller writes; out_action NULL: no audit row.
Rules: T-1, T-2, S-10, S-11.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_signal BOOLEAN DEFAULT in_type = 'SIGNAL';
    DECLARE v_ms BIGINT UNSIGNED;
    DECLARE v_planned DATETIME(6);
    DECLARE v_end DATETIME(6);  -- a TIMER's due time, a SIGNAL wait's deadline
    DECLARE v_due DATETIME(6);  -- when the checkpoint wakes
    DECLARE v_early INT DEFAULT NULL;  -- signals that came for the wait before it opened
    DECLARE v_corr VARBINARY(512) DEFAULT NULL;
    DECLARE v_name VARCHAR(128) DEFAULT NULL;  -- a SIGNAL wait's contract, read once for the wait and its event
    DECLARE v_version VARCHAR(32) DEFAULT NULL;
    SET v_ms = CAST(IF(v_signal, JSON_VALUE(in_frozen, '$.timeout_ms'), JSON_VALUE(in_frozen, '$.delay_ms'))
                    AS UNSIGNED);
    SET v_planned = in_now + INTERVAL v_ms * 1000 MICROSECOND;
    SET v_end = LEAST(v_planned, in_deadline);
    SET v_due = v_end;
    IF v_signal THEN
        -- The correlation bytes as the activation row froze them (_weave_step_activate stores this same value).
        SET v_corr = IF(JSON_TYPE(JSON_EXTRACT(in_frozen, '$.correlation')) = 'STRING',
                        CAST(JSON_UNQUOTE(JSON_EXTRACT(in_frozen, '$.correlation')) AS BINARY), NULL),
            v_name = JSON_VALUE(in_frozen, '$.signal.name'),
            v_version = JSON_VALUE(in_frozen, '$.signal.payload_version');
        -- A count always answers: one that came back empty was cut short by an interrupt (see _weave_root_advance),
        -- and the wait would have slept to its deadline with an early signal PENDING for it.
        SELECT COUNT(*) INTO v_early FROM weave_signals
         WHERE instance_id = in_instance_id AND target_step_key = in_step_key AND target_activation_seq = in_seq
           AND status = 'PENDING';
        IF v_early IS NULL THEN
            CALL _weave_raise(50016, 'INTERRUPTED: the wait''s read of its early signals came back empty');
        END IF;
        SET v_due = IF(v_early > 0, in_now, v_end);
    END IF;
    INSERT INTO weave_waits (namespace_id, instance_id, activation_id, step_key, activation_seq, kind, status,
                             started_at, due_at, planned_due_at, deadline_at, signal_name, payload_version,
                             payload_type, correlation_key)
    VALUES (in_namespace_id, in_instance_id, in_activation_id, in_step_key, in_seq, in_type, 'WAITING', in_now,
            IF(v_signal, NULL, v_end), IF(v_signal, NULL, v_planned), IF(v_signal, v_end, NULL),
            v_name, v_version, IF(v_signal, COALESCE(JSON_VALUE(in_frozen, '$.signal.payload_type'), 'any'), NULL),
            v_corr);
    CALL _weave_checkpoint_set(in_namespace_id, in_instance_id, in_step_key, in_type, in_activation_id, v_due, in_now);
    SET out_action = NULL, out_audit_deadline = NULL;
    SET out_facts = IF(v_signal,
            JSON_OBJECT('type', 'SIGNAL', 'name', v_name, 'payload_version', v_version,
                        'correlation_key', CONVERT(v_corr USING utf8mb4), 'timeout_ms', v_ms + 0,
                        'deadline_at', DATE_FORMAT(v_end, '%Y-%m-%dT%H:%i:%s.%fZ'), 'truncated', v_end < v_planned),
            JSON_OBJECT('type', 'TIMER', 'delay_ms', v_ms + 0, 'due_at', DATE_FORMAT(v_end, '%Y-%m-%dT%H:%i:%s.%fZ'),
                        'planned_due_at', DATE_FORMAT(v_planned, '%Y-%m-%dT%H:%i:%s.%fZ'),
                        'truncated', v_end < v_planned));
END
