-- Round n+1 of a POLL waiting between rounds, once its time has come: the POLL checkpoint handler calls
-- this when next_poll_at is reached, and so does the consumer of a PENDING answer whose interval is
-- already over when it is consumed (the checkpoint would be due at once; starting the round in the
-- result's own transaction saves a transaction and changes no fact). Either way, nothing is created
-- before it verifies, under lock, that the rounds are 1..n without a gap, round n answered PENDING,
-- nothing of the activation is in flight, the budget has room and round 1 carries the contract reused
-- here (P-4), and that new work may start (R-8). The task, its quota, the round record, the poll state,
-- the checkpoint at the poll deadline, the event and the audit row are the caller's one transaction
-- (P-5). When only pause, gate, identity, app, quota or capacity is in the way, the checkpoint's next
-- check time moves and nothing else does (P-6).
CREATE PROCEDURE _weave_poll_round_start(
        IN  in_namespace_id  BIGINT UNSIGNED,
        IN  in_instance_id   BIGINT UNSIGNED,
        IN  in_step_key      VARCHAR(64),
        IN  in_seq           INT UNSIGNED,
        IN  in_activation_id BIGINT UNSIGNED,
        IN  in_frozen        LONGTEXT,
        IN  in_state         VARCHAR(16),
        IN  in_rounds_used   INT UNSIGNED,
        IN  in_max_rounds    INT UNSIGNED,
        IN  in_poll_deadline DATETIME(6),
        IN  in_current_task  BIGINT UNSIGNED,
        IN  in_next_poll_at  DATETIME(6),
        IN  in_now           DATETIME(6),
        OUT out_outcome      VARCHAR(16))
    COMMENT 'Internal. Description: creates round n+1 of a WAITING poll whose next_poll_at has come (task from the frozen
inputs with deadline min(now + task_timeout_ms, poll deadline, instance deadline); round record IN_FLIGHT; rounds
used n+1; current task; state IN_FLIGHT; checkpoint at the poll deadline; event POLL_ROUND_STARTED; audit
poll.round). in_state .. in_next_poll_at: the poll state row as the caller read it under its lock (and, for a
PENDING answer consumed now, as it has just written it). out_outcome: ROUND, DEFERRED (checkpoint deferred,
nothing consumed) or REVIEW (INSTANCE_DEADLINE).
Errors: 50007 INVALID_STATE when the rounds do not verify (P-4).
Rules: P-4, P-5, P-6, R-8, M-4.3, M-4.4.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_event_no INT UNSIGNED;  -- the number of the round's event
    DECLARE v_state VARCHAR(16) DEFAULT in_state;
    DECLARE v_rounds_used INT UNSIGNED DEFAULT in_rounds_used;
    DECLARE v_max_rounds INT UNSIGNED DEFAULT in_max_rounds;
    DECLARE v_poll_deadline DATETIME(6) DEFAULT in_poll_deadline;
    DECLARE v_current_task BIGINT UNSIGNED DEFAULT in_current_task;
    DECLARE v_next DATETIME(6) DEFAULT in_next_poll_at;
    DECLARE v_later INT UNSIGNED;  -- rounds numbered after the rounds used: none may be
    DECLARE v_top INT UNSIGNED;
    DECLARE v_last_outcome VARCHAR(24) DEFAULT NULL;
    DECLARE v_unsettled INT UNSIGNED;
    DECLARE v_first_handler VARCHAR(128) DEFAULT NULL;
    DECLARE v_first_version VARCHAR(32);
    DECLARE v_first_input LONGTEXT;
    DECLARE v_inst_status VARCHAR(16);
    DECLARE v_control VARCHAR(16);
    DECLARE v_gate VARCHAR(16);
    DECLARE v_inst_deadline DATETIME(6);
    DECLARE v_cred_status VARCHAR(16);
    DECLARE v_app_status VARCHAR(16);
    DECLARE v_cred BIGINT UNSIGNED;  -- the instance's identity and app: what a deferral for them waits for
    DECLARE v_app BIGINT UNSIGNED;
    DECLARE v_why VARCHAR(256) DEFAULT NULL;
    DECLARE v_task_deadline DATETIME(6);
    DECLARE v_task BIGINT UNSIGNED;
    DECLARE v_app_released BIGINT UNSIGNED;
    DECLARE v_queue_released BIGINT UNSIGNED;
    DECLARE v_quota INT UNSIGNED;
    DECLARE v_app_taken BIGINT UNSIGNED;
    DECLARE v_capacity INT UNSIGNED;
    DECLARE v_queue_taken BIGINT UNSIGNED;
    DECLARE v_facts LONGTEXT;
    DECLARE v_lines BOOLEAN;  -- whether any work waits in line for the app's room or the queue's
    DECLARE v_waits_for BIGINT UNSIGNED DEFAULT NULL;  -- the app or queue whose room the round waits for

    SET out_outcome = NULL;
    -- Round n and round 1 with its task, locked, by key: a poll of thousands of rounds reads as much at its last round
    -- as at its second. Rounds are only ever added, as n + 1 after round n under the instance's lock, and numbers
    -- are unique per activation, so round n being there with none after it is what makes 1..n; a gap below n, which
    -- no routine can make, is left to invariant M-4.4 (`weave status --check`), as counting every round would cost
    -- a read of each. The activation's tasks in flight are counted among the instance's tasks in flight, by that
    -- index: a few rows, however many rounds have run (a plain read, as a subquery of a locking read is). One row
    -- always, found or not (MAX): a missing round fails the check below.
    SELECT MAX(r.round_no), MAX(r.outcome), MAX(t.handler), MAX(t.handler_version), MAX(t.input),
           (SELECT COUNT(*) FROM weave_poll_rounds x FORCE INDEX (uq_round_no)
             WHERE x.activation_id = in_activation_id AND x.round_no > v_rounds_used),
           (SELECT COUNT(*) FROM pulse_tasks u FORCE INDEX (ix_task_instance)
             WHERE u.instance_id = in_instance_id AND u.status IN ('QUEUED', 'RUNNING')
               AND u.activation_id = in_activation_id)
      INTO v_top, v_last_outcome, v_first_handler, v_first_version, v_first_input, v_later, v_unsettled
      FROM weave_poll_rounds r FORCE INDEX (uq_round_no)
      JOIN weave_poll_rounds f FORCE INDEX (uq_round_no) ON f.activation_id = r.activation_id AND f.round_no = 1
      LEFT JOIN pulse_tasks t ON t.id = f.task_id
     WHERE r.activation_id = in_activation_id AND r.round_no = v_rounds_used FOR UPDATE;
    IF v_later IS NULL OR v_unsettled IS NULL THEN  -- counts always answer: cut short (see _weave_root_advance)
        CALL _weave_raise(50016, 'INTERRUPTED: the round''s check of its poll came back empty; nothing is changed');
    END IF;
    IF NOT (v_state <=> 'WAITING') OR v_next IS NULL OR in_now < v_next OR in_now >= v_poll_deadline
       OR v_later <> 0 OR NOT (v_top <=> v_rounds_used) OR NOT (v_last_outcome <=> 'POLL_PENDING')
       OR v_current_task IS NOT NULL OR v_unsettled <> 0 OR v_rounds_used >= v_max_rounds
       OR NOT (v_first_handler <=> JSON_VALUE(in_frozen, '$.handler'))
       OR NOT (v_first_version <=> JSON_VALUE(in_frozen, '$.handler_version'))
       OR NOT (v_first_input <=> COALESCE(JSON_EXTRACT(in_frozen, '$.input'), '{}')) THEN
        CALL _weave_raise(50007, 'INVALID_STATE: the poll''s rounds do not verify (P-4); left for an operator');
    END IF;

    -- R-8 for the new round, with the room its app and queue have left (a plain read: the slot is taken as the
    -- round's last write, _pulse_slot_take), the slots they have been given back (their release stripes, read here
    -- without a lock for that take), and whether work waits in line for that room.
    SELECT i.status, i.control, i.gate, i.deadline_at, c.status, a.status, i.credential_id, i.app_id, a.max_in_flight,
           a.slots_taken,
           (SELECT SUM(r.released) FROM pulse_slot_releases r WHERE r.owner_kind = 'APP' AND r.owner_id = a.id),
           q.capacity, q.slots_taken,
           (SELECT SUM(r.released) FROM pulse_slot_releases r WHERE r.owner_kind = 'QUEUE' AND r.owner_id = q.id),
           EXISTS (SELECT 1 FROM weave_pending_advances w WHERE w.deferred_reason = 'QUOTA_FULL'
                      AND w.deferred_for = a.id)
           OR EXISTS (SELECT 1 FROM weave_pending_advances w WHERE w.deferred_reason = 'QUEUE_FULL'
                         AND w.deferred_for = q.id)
      INTO v_inst_status, v_control, v_gate, v_inst_deadline, v_cred_status, v_app_status, v_cred, v_app, v_quota,
           v_app_taken,
           v_app_released, v_capacity, v_queue_taken, v_queue_released, v_lines
      FROM weave_instances i
      JOIN weave_credentials c ON c.id = i.credential_id
      JOIN weave_apps a ON a.id = i.app_id
      LEFT JOIN weave_queues q ON q.namespace_id = in_namespace_id AND q.name = JSON_VALUE(in_frozen, '$.queue')
     WHERE i.id = in_instance_id;
    IF v_inst_status = 'RUNNING' AND in_now >= v_inst_deadline THEN
        CALL _weave_review_open(in_namespace_id, in_instance_id, 'INSTANCE_DEADLINE', '', 0,
             JSON_OBJECT('deadline_at', DATE_FORMAT(v_inst_deadline, '%Y-%m-%dT%H:%i:%s.%fZ'),
                         'checked_at', DATE_FORMAT(in_now, '%Y-%m-%dT%H:%i:%s.%fZ'),
                         'step_key', in_step_key, 'next_round', v_rounds_used + 1), in_now);
        CALL _weave_audit(in_namespace_id, in_instance_id, 0, 'weave.orchestrator', 'poll.review', NULL, NULL,
                          in_now, v_inst_deadline, NULL,
                          JSON_OBJECT('code', 'INSTANCE_DEADLINE', 'step_key', in_step_key), NULL);
        SET v_why = 'INSTANCE_DEADLINE: instance deadline passed';
        SET out_outcome = 'REVIEW';
    ELSE
        SET v_why = _weave_work_blocker(in_instance_id, v_inst_status, v_control, v_gate, v_cred_status,
                                        v_app_status);
    END IF;
    -- Room as _weave_task_room sees it, from the read above (asking it here would be two statements more on every
    -- round); NULL when the queue or a stripe is missing.
    IF v_why IS NULL AND ((v_queue_taken - v_queue_released < v_capacity AND v_app_taken - v_app_released < v_quota)
                          IS NOT TRUE OR v_lines) THEN
        -- No room (or no queue), or work waiting in line for it: whether this round may have it and why not, as every
        -- creator tells it (R-8), its place in line being its POLL checkpoint's; room again since the read above,
        -- with the slots given back as this look read them.
        CALL _weave_task_room(in_namespace_id, in_instance_id, in_step_key, JSON_VALUE(in_frozen, '$.queue'), in_now,
                              v_why, v_app_released, v_queue_released, v_waits_for);
    END IF;
    IF v_why IS NOT NULL THEN
        SET v_waits_for = COALESCE(v_waits_for, _weave_blocker_owner(v_why, v_cred, v_app));
        -- P-6: the checkpoint stays due at next_poll_at; only its next check time moves, never past the poll
        -- deadline (which must still be seen on time). Resume makes an overdue checkpoint due at once (C-1),
        -- so a pause can wait longer; a round waiting for room waits in line (_weave_checkpoint_defer).
        CALL _weave_checkpoint_set(in_namespace_id, in_instance_id, in_step_key, 'POLL', in_activation_id, v_next,
                                   in_now);
        CALL _weave_checkpoint_defer(in_namespace_id, in_instance_id, in_step_key, 'POLL', in_activation_id,
             LEAST(in_now + INTERVAL IF(v_control = 'PAUSED', 60, IF(v_waits_for IS NULL, 1, 10)) SECOND,
                   v_poll_deadline), in_now, v_why, v_waits_for);
        SET out_outcome = COALESCE(out_outcome, 'DEFERRED');
    ELSE
        -- P-4, P-5: round n+1 from the activation's frozen inputs, never re-evaluated.
        SET v_task_deadline = LEAST(in_now + INTERVAL COALESCE(CAST(JSON_VALUE(in_frozen, '$.task_timeout_ms')
                                                                    AS UNSIGNED), 30000) * 1000 MICROSECOND,
                                    v_poll_deadline, v_inst_deadline);
        CALL _pulse_task_create(in_namespace_id, in_instance_id, in_step_key, in_activation_id, v_rounds_used + 1,
                                in_frozen, v_task_deadline, in_now, v_task);
        INSERT INTO weave_poll_rounds (namespace_id, instance_id, activation_id, round_no, task_id, outcome,
                                       created_at)
        VALUES (in_namespace_id, in_instance_id, in_activation_id, v_rounds_used + 1, v_task, 'IN_FLIGHT', in_now);
        -- The poll's state and the number of the round's event in one statement (the instance row is locked
        -- already): two rows changed, or the state was no longer the one verified above.
        UPDATE weave_poll_states p STRAIGHT_JOIN weave_instances i ON i.id = in_instance_id
           SET p.rounds_used = p.rounds_used + 1, p.current_task_id = v_task, p.state = 'IN_FLIGHT',
               p.next_poll_at = NULL, p.updated_at = in_now,
               i.event_seq = LAST_INSERT_ID(i.event_seq + 1), i.updated_at = in_now, i.version = i.version + 1
         WHERE p.activation_id = in_activation_id AND p.rounds_used = v_rounds_used AND p.state = 'WAITING';
        IF ROW_COUNT() <> 2 THEN
            CALL _weave_raise(50007, 'INVALID_STATE: the poll state changed under its lock');
        END IF;
        SET v_event_no = LAST_INSERT_ID();
        CALL _weave_checkpoint_set(in_namespace_id, in_instance_id, in_step_key, 'POLL', in_activation_id,
                                   v_poll_deadline, in_now);
        SET v_facts = JSON_OBJECT('round', v_rounds_used + 1, 'task_id', CONCAT('tsk_', v_task),
                                  'due_at', DATE_FORMAT(v_next, '%Y-%m-%dT%H:%i:%s.%fZ'),
                                  'lateness_ms', TIMESTAMPDIFF(MICROSECOND, v_next, in_now) / 1000,
                                  'task_deadline_at', DATE_FORMAT(v_task_deadline, '%Y-%m-%dT%H:%i:%s.%fZ'),
                                  'rounds_used', v_rounds_used + 1, 'max_rounds', v_max_rounds + 0,
                                  'poll_deadline', DATE_FORMAT(v_poll_deadline, '%Y-%m-%dT%H:%i:%s.%fZ'));
        CALL _weave_event(in_namespace_id, in_instance_id, 'POLL_ROUND_STARTED', in_step_key, in_seq, in_now, v_facts,
                          'poll.round', v_poll_deadline, v_event_no);
        -- Room was seen before anything was written; the slot is taken last.
        CALL _pulse_slot_take(in_namespace_id, in_instance_id, JSON_VALUE(in_frozen, '$.queue'), v_app_released,
                              v_queue_released);
        SET out_outcome = 'ROUND';
    END IF;
END
