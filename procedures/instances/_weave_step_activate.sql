-- Activation creates the next generation of a step (R-7): it resolves the step's expressions once
-- against the instance context and freezes them into the activation row (input, business key, mutex
-- key, correlation, and the step's own contract: handler + version, priority, retry policy, result
-- classes), then hands over to the step type to create its wait, task or round and its checkpoint.
-- Callers have verified R-8 and hold the locks of _weave_instance_lock.
CREATE PROCEDURE _weave_step_activate(
        IN  in_namespace_id BIGINT UNSIGNED,
        IN  in_instance_id  BIGINT UNSIGNED,
        IN  in_step_id      BIGINT UNSIGNED,
        IN  in_now          DATETIME(6),
        OUT out_result      VARCHAR(256),
        OUT out_waits_for   BIGINT UNSIGNED)
    COMMENT 'Internal. Description: activates a PENDING step (R-7): activation row with frozen inputs, then the type''s
wait/task/round and checkpoint. out_result: ACTIVATED, REVIEW (the activation can never succeed: a review reason is open), or ''CODE: detail'' when quota or capacity is full
(nothing written), with out_waits_for the app or queue whose room it waits for (_weave_task_room).'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_key VARCHAR(64);
    DECLARE v_type VARCHAR(16);
    DECLARE v_seq INT UNSIGNED;
    DECLARE v_spec LONGTEXT;
    DECLARE v_compiled LONGTEXT;
    DECLARE v_deadline DATETIME(6);
    DECLARE v_instance_input LONGTEXT;  -- what expressions read: the input, and the outputs they name
    DECLARE v_sources LONGTEXT;  -- the source paths of the step's templates, as a JSON array
    DECLARE v_t_input LONGTEXT;  -- the compiled templates of its input, keys and correlation
    DECLARE v_t_business LONGTEXT;
    DECLARE v_t_mutex LONGTEXT;
    DECLARE v_t_correlation LONGTEXT;
    DECLARE v_input LONGTEXT;
    DECLARE v_business LONGTEXT;
    DECLARE v_mutex LONGTEXT;
    DECLARE v_correlation LONGTEXT;
    DECLARE v_frozen LONGTEXT;
    DECLARE v_activation BIGINT UNSIGNED;
    DECLARE v_why VARCHAR(256) DEFAULT NULL;
    DECLARE v_failed VARCHAR(1024);  -- why the resolved inputs can never be used (R-18), or NULL
    DECLARE v_app_released BIGINT UNSIGNED;  -- the slots given back to the app and the queue, as the room check read them
    DECLARE v_queue_released BIGINT UNSIGNED;
    DECLARE v_event_no INT UNSIGNED;  -- the number of the STEP_ACTIVATED event
    DECLARE v_facts LONGTEXT;  -- its data, its audit action and deadline: the step type's
    DECLARE v_action VARCHAR(48);
    DECLARE v_audit_deadline DATETIME(6);
    SET out_result = NULL;

    -- A reactivated step already carries its next sequence (C-4: it moves at once) and no activation row.
    -- The step row is locked; the definition's rows are read, not locked (the subqueries of a locking read are
    -- plain reads): they never change, and locks on them would queue every activation of the definition.
    SELECT s.step_key, s.type, IF(s.activation_id IS NULL, GREATEST(s.activation_seq, 1), s.activation_seq + 1),
           (SELECT IF(s.activation_override IS NULL, ds.spec, JSON_MERGE_PATCH(ds.spec, s.activation_override))
              FROM weave_definition_steps ds WHERE ds.definition_id = i.definition_id AND ds.step_key = s.step_key),
           (SELECT JSON_EXTRACT(d.compiled, CONCAT('$."', s.step_key, '"')) FROM weave_definitions d
             WHERE d.id = i.definition_id), i.deadline_at
      INTO v_key, v_type, v_seq, v_spec, v_compiled, v_deadline
      FROM weave_steps s
      JOIN weave_instances i ON i.id = s.instance_id
     WHERE s.id = in_step_id AND s.instance_id = in_instance_id FOR UPDATE;
    -- Every published step has its spec and its compiled expressions: one read back empty was cut short by an
    -- interrupt the server swallowed (a KILL QUERY that lands in a select list's subquery gives it no value and no
    -- error), and the step went to review as nesting too deep. Undone and tried again instead (_weave_root_advance).
    IF v_key IS NOT NULL AND (v_spec IS NULL OR v_compiled IS NULL) THEN
        CALL _weave_raise(50016, 'INTERRUPTED: the activation''s read of its step came back empty; nothing is changed');
    END IF;

    IF v_type IN ('TASK', 'POLL') THEN
        -- Its place in line is the ROOT checkpoint's: activation is ROOT's work.
        CALL _weave_task_room(in_namespace_id, in_instance_id, '', JSON_UNQUOTE(JSON_EXTRACT(v_spec, '$.queue')),
                              in_now, v_why, v_app_released, v_queue_released, out_waits_for);
    END IF;
    IF v_why LIKE 'QUEUE\_NOT\_FOUND:%' OR v_why LIKE 'APP\_NOT\_FOUND:%' THEN
        -- R-18: no retry can create the queue or app this step was published against; ask a person.
        CALL _weave_step_review(in_namespace_id, in_instance_id, in_step_id, v_key, v_seq,
                                SUBSTRING_INDEX(v_why, ':', 1), TRIM(SUBSTRING(v_why, LOCATE(':', v_why) + 1)), 1,
                                NULL, in_now);
        SET out_result = 'REVIEW';
    ELSEIF v_why IS NOT NULL THEN
        SET out_result = v_why;
    ELSE
        -- JSON is nested at most 32 levels deep on the server: a template may nest what it reads deeper than it
        -- was kept, and the frozen inputs nest it one level more, so values that are valid on their own can be
        -- too deep here. The server refuses such a value (4040) whatever is tried again; v_frozen stays NULL and
        -- the step goes to review (below) instead of failing its decision for good.
        resolving: BEGIN
            DECLARE EXIT HANDLER FOR 4040 SET v_frozen = NULL;
            -- Each template starts as its skeleton (NULL for a null template); one with bindings then gets the values
            -- its bindings read, one document at a time: the input, then each output read (_weave_template_resolve).
            SET v_t_input = JSON_EXTRACT(v_compiled, '$.input'),
                v_t_business = JSON_EXTRACT(v_compiled, '$.business_key'),
                v_t_mutex = JSON_EXTRACT(v_compiled, '$.mutex_key'),
                v_t_correlation = JSON_EXTRACT(v_compiled, '$.correlation');
            SET v_input = JSON_EXTRACT(v_t_input, '$.skeleton'),
                v_business = JSON_EXTRACT(v_t_business, '$.skeleton'),
                v_mutex = JSON_EXTRACT(v_t_mutex, '$.skeleton'),
                v_correlation = JSON_EXTRACT(v_t_correlation, '$.skeleton');
            -- What expressions read (04-polls "Expressions"): the instance's input and the outputs of its steps
            -- SUCCEEDED so far, and only what this step's templates name, so an output no template reads is never
            -- copied. Each source path starts "$.input" or "$.steps.<key>.output", the key quoted when it is not a
            -- plain name (procedures.definitions.paths); in the array of sources each one opens its string, and a
            -- quote inside one is escaped, so a match is a source's own head.
            SET v_sources = JSON_EXTRACT(v_compiled, '$.*.bindings[*][1]');
            IF LOCATE('"$.input', v_sources) > 0 THEN
                SELECT i.input INTO v_instance_input FROM weave_instances i WHERE i.id = in_instance_id;
                SET v_input = _weave_template_resolve(v_t_input, v_input, NULL, v_instance_input),
                    v_business = _weave_template_resolve(v_t_business, v_business, NULL, v_instance_input),
                    v_mutex = _weave_template_resolve(v_t_mutex, v_mutex, NULL, v_instance_input),
                    v_correlation = _weave_template_resolve(v_t_correlation, v_correlation, NULL, v_instance_input);
            END IF;
            IF LOCATE('"$.steps.', v_sources) > 0 THEN
                outputs: BEGIN
                    DECLARE v_done BOOLEAN DEFAULT FALSE;
                    DECLARE v_output_key VARCHAR(64);
                    DECLARE v_output LONGTEXT;
                    DECLARE v_outputs CURSOR FOR
                        SELECT s.step_key, COALESCE(s.output, 'null')
                          FROM weave_steps s FORCE INDEX (uq_step_key)
                         WHERE s.instance_id = in_instance_id AND s.status = 'SUCCEEDED'
                           AND (LOCATE(CONCAT('"$.steps.', s.step_key, '.output'), v_sources) > 0
                                OR LOCATE(CONCAT('"$.steps.\\"', s.step_key, '\\".output'), v_sources) > 0);
                    DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_done = TRUE;
                    OPEN v_outputs;
                    reading: LOOP
                        FETCH v_outputs INTO v_output_key, v_output;
                        IF v_done THEN
                            LEAVE reading;
                        END IF;
                        SET v_input = _weave_template_resolve(v_t_input, v_input, v_output_key, v_output),
                            v_business = _weave_template_resolve(v_t_business, v_business, v_output_key, v_output),
                            v_mutex = _weave_template_resolve(v_t_mutex, v_mutex, v_output_key, v_output),
                            v_correlation = _weave_template_resolve(v_t_correlation, v_correlation, v_output_key,
                                                                    v_output);
                    END LOOP;
                    CLOSE v_outputs;
                END outputs;
            END IF;
            SET v_frozen = JSON_SET(v_spec,
                '$.input', JSON_EXTRACT(COALESCE(v_input, 'null'), '$'),
                '$.business_key', JSON_EXTRACT(COALESCE(v_business, 'null'), '$'),
                '$.mutex_key', JSON_EXTRACT(COALESCE(v_mutex, 'null'), '$'),
                '$.correlation', JSON_EXTRACT(COALESCE(v_correlation, 'null'), '$'));
        END resolving;
        -- Resolved values must fit where they go, and the inputs they resolve from are frozen, so no retry can
        -- make them fit: the step goes to review with the value it got (R-18), and nothing else is written.
        -- A correlation must resolve to a string of 1-512 bytes (05-signals S-1); anything else would be a
        -- guess at the bytes a sender must match. A task's keys are compared as text (a string unquoted, any
        -- other value as its JSON text, as _pulse_task_create stores them) of at most 256 characters.
        -- Read from the resolved keys themselves (a few bytes), not from the frozen spec, which holds the input.
        IF v_frozen IS NOT NULL AND v_type IN ('TASK', 'POLL') THEN
            SET v_business = IF(JSON_TYPE(v_business) = 'STRING', JSON_UNQUOTE(v_business), v_business),
                v_mutex = IF(JSON_TYPE(v_mutex) = 'STRING', JSON_UNQUOTE(v_mutex), v_mutex);
        END IF;
        SET v_failed = CASE
            WHEN v_frozen IS NULL THEN
                'the values its expressions read, as resolved, nest deeper than the 32 levels JSON may have here'
            WHEN v_correlation IS NOT NULL AND (JSON_TYPE(JSON_EXTRACT(v_correlation, '$')) <> 'STRING'
                 OR OCTET_LENGTH(JSON_UNQUOTE(v_correlation)) NOT BETWEEN 1 AND 512) THEN
                CONCAT('correlation must resolve to a string of 1-512 bytes, got ',
                       CASE COALESCE(JSON_TYPE(JSON_EXTRACT(v_correlation, '$')), 'NOTHING')
                           WHEN 'STRING' THEN CONCAT('a string of ', OCTET_LENGTH(JSON_UNQUOTE(v_correlation)),
                                                     ' bytes: ', LEFT(v_correlation, 200))
                           WHEN 'NULL' THEN 'null (its expression found nothing there, or a null)'
                           ELSE CONCAT(LEFT(COALESCE(JSON_TYPE(JSON_EXTRACT(v_correlation, '$')), 'nothing'), 32),
                                       ' ', LEFT(v_correlation, 200))
                       END)
            WHEN v_type NOT IN ('TASK', 'POLL') THEN NULL
            WHEN CHAR_LENGTH(v_business) > 256 THEN
                CONCAT('business_key must resolve to at most 256 characters, got ', CHAR_LENGTH(v_business), ': ',
                       LEFT(v_business, 200))
            WHEN CHAR_LENGTH(v_mutex) > 256 THEN
                CONCAT('mutex_key must resolve to at most 256 characters, got ', CHAR_LENGTH(v_mutex), ': ',
                       LEFT(v_mutex, 200))
            END;
        IF v_failed IS NOT NULL THEN
            CALL _weave_step_review(in_namespace_id, in_instance_id, in_step_id, v_key, v_seq, 'ACTIVATION_FAILED',
                                    v_failed, 1, NULL, in_now);
            SET out_result = 'REVIEW';
        END IF;
    END IF;
    IF out_result IS NULL THEN
        INSERT INTO weave_activations (namespace_id, instance_id, step_id, step_key, seq, frozen, correlation_key,
                                       started_at, deadline_at)
        VALUES (in_namespace_id, in_instance_id, in_step_id, v_key, v_seq, v_frozen,
                IF(v_correlation IS NULL, NULL, CAST(JSON_UNQUOTE(v_correlation) AS BINARY)),
                in_now, v_deadline);
        SET v_activation = LAST_INSERT_ID();
        -- The step and the number of its STEP_ACTIVATED event in one statement (both rows are locked already):
        -- the instance row is written once for the activation, not again for its event, with one PENDING step
        -- fewer.
        UPDATE weave_steps s STRAIGHT_JOIN weave_instances i ON i.id = s.instance_id
           SET s.status = 'ACTIVE', s.activation_seq = v_seq, s.activation_id = v_activation,
               s.activation_override = NULL, s.updated_at = in_now,
               i.event_seq = LAST_INSERT_ID(i.event_seq + 1), i.updated_at = in_now, i.version = i.version + 1,
               i.pending_steps = i.pending_steps - 1
         WHERE s.id = in_step_id;
        SET v_event_no = LAST_INSERT_ID();
        -- No ELSE: a step type without an activation fails here (case not found), it is never taken for a wait.
        CASE
            WHEN v_type IN ('TIMER', 'SIGNAL') THEN
                CALL _weave_wait_activate(in_namespace_id, in_instance_id, v_activation, v_key, v_seq, v_type, v_frozen,
                                          in_now, v_deadline, v_facts, v_action, v_audit_deadline);
            WHEN v_type = 'TASK' THEN
                CALL _weave_task_activate(in_namespace_id, in_instance_id, v_activation, v_key, v_seq, v_frozen, in_now,
                                          v_deadline, v_facts, v_action, v_audit_deadline);
            WHEN v_type = 'POLL' THEN
                CALL _weave_poll_activate(in_namespace_id, in_instance_id, v_activation, v_key, v_seq, v_frozen, in_now,
                                          v_deadline, v_facts, v_action, v_audit_deadline);
        END CASE;
        -- Every activation's event and audit row are written here, as _weave_event writes them, with the facts
        -- the step type gave.
        INSERT INTO weave_events (instance_id, seq, namespace_id, type, step_key, activation_seq, occurred_at, data)
        VALUES (in_instance_id, v_event_no, in_namespace_id, 'STEP_ACTIVATED', v_key, v_seq, in_now, v_facts);
        IF v_action IS NOT NULL THEN
            INSERT INTO weave_audit (namespace_id, instance_id, credential_id, actor, action, accepted_at, deadline_at,
                                     details, created_at)
            VALUES (in_namespace_id, in_instance_id, 0, 'weave.orchestrator', v_action, in_now, v_audit_deadline,
                    v_facts, in_now);
        END IF;
        IF v_type IN ('TASK', 'POLL') THEN
            -- Room was seen before anything was written (above); the slot is taken last.
            CALL _pulse_slot_take(in_namespace_id, in_instance_id, JSON_VALUE(v_frozen, '$.queue'), v_app_released,
                                  v_queue_released);
        END IF;
        SET out_result = 'ACTIVATED';
    END IF;
END
