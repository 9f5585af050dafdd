-- Inlined: installed as a block in each routine that calls it, not called (procedures/inlining.py).
-- The closing every successful step shares (TIMER, SIGNAL, POLL, TASK): the step SUCCEEDED with its
-- output, its activation ended, the wait the handler names SATISFIED (a TIMER's), its event, the successors
-- (bounded by R-7, R-9 when it was the last step) and the audit row that lists them, all in the caller's
-- transaction (R-4). The caller holds the instance lock and has settled its other rows (a SIGNAL wait with its
-- winner, a POLL's round and state).
CREATE PROCEDURE _weave_step_close(
        IN  in_namespace_id  BIGINT UNSIGNED,
        IN  in_instance_id   BIGINT UNSIGNED,
        IN  in_step_key      VARCHAR(64),
        IN  in_seq           INT UNSIGNED,
        IN  in_activation_id BIGINT UNSIGNED,
        IN  in_wait_id       BIGINT UNSIGNED,
        IN  in_output        LONGTEXT,
        IN  in_event         VARCHAR(48),
        IN  in_action        VARCHAR(48),
        IN  in_deadline_at   DATETIME(6),
        IN  in_facts         LONGTEXT,
        IN  in_now           DATETIME(6),
        OUT out_successors   VARCHAR(16))
    COMMENT 'Internal. Description: settles a step SUCCEEDED with in_output, its activation ended and its wait
in_wait_id SATISFIED (NULL: none, or settled by the handler itself, as a SIGNAL wait with its winner), writes its
in_event event, follows its successors (R-7..R-9) and writes the in_action audit row with the successors'' outcome.
out_successors: the ROOT walk''s outcome (IDLE, ACTIVATED, MORE, DEFERRED, REVIEW or SUCCEEDED).
Rules: R-4, R-7, R-9.'
    MODIFIES SQL DATA
BEGIN
    -- The step, the instance's count of open steps, the step's activation and the wait it names in one statement,
    -- in R-3 order after the instance, which the caller holds locked (the join reads the step first: the first
    -- table is written as it is read, the others through an in-memory table of their new values, which the step's
    -- output, a LONGTEXT, would put on disk); a NULL in_wait_id joins no wait row, and none is written. The
    -- caller's opening found the step ACTIVE under its lock: it was open until now.
    -- The same statement takes the number of the step's event, which the walk writes. When this was the running
    -- instance's last open step, it ends the instance too (R-9: every step SUCCEEDED; the count is of the steps
    -- not SUCCEEDED, M-4.9b) and takes the number of INSTANCE_SUCCEEDED after the step's. The instance's columns
    -- are assigned with the count last, so that each test reads the count as it was, whether the server assigns
    -- them in order or all from the old row.
    UPDATE weave_steps s STRAIGHT_JOIN weave_instances i ON i.id = s.instance_id
      STRAIGHT_JOIN weave_activations a ON a.id = in_activation_id
      LEFT JOIN weave_waits w ON w.id = in_wait_id
       SET s.status = 'SUCCEEDED', s.output = in_output, s.updated_at = in_now,
           i.event_seq = i.event_seq + IF(i.status = 'RUNNING' AND i.open_steps = 1, 2, 1),
           i.finished_at = IF(i.status = 'RUNNING' AND i.open_steps = 1, in_now, i.finished_at),
           i.status = IF(i.status = 'RUNNING' AND i.open_steps = 1, 'SUCCEEDED', i.status),
           i.open_steps = i.open_steps - 1, i.updated_at = in_now, i.version = i.version + 1,
           a.ended_at = in_now, w.status = 'SATISFIED', w.settled_at = in_now
     WHERE s.instance_id = in_instance_id AND s.step_key = in_step_key;
    -- The step's event is the walk's first (with the instance's own when this step was the last).
    CALL _weave_root_advance(in_namespace_id, in_instance_id, in_now, 31, TRUE, in_event, in_step_key, in_seq, in_facts,
                             out_successors);
    -- The engine's audit row (as _weave_event writes one), here without a nested call: every step settles here.
    INSERT INTO weave_audit (namespace_id, instance_id, credential_id, actor, action, accepted_at, deadline_at,
                             details, created_at)
    VALUES (in_namespace_id, in_instance_id, 0, 'weave.orchestrator', in_action, in_now, in_deadline_at,
            JSON_SET(in_facts, '$.successors', out_successors), in_now);
END
