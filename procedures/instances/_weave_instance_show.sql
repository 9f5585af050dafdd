-- Inlined: installed as a block in each routine that calls it, not called (procedures/inlining.py).
-- The instance as the API shows it, one definition for every routine that answers it (weave_instance_get,
-- and weave_instance_start answering the instance it started). The caller has authorised the read and
-- chosen the transaction the sets are read in. Every set is in the order of an index it reads, so none needs a
-- temporary table to sort (a sort by a joined table's column does: about 0.25 ms each, even for no rows). The
-- steps are sorted by position before their joins and the rounds are read in index order, so the joins are
-- forced to keyed lookups: on small tables the optimizer prefers a scan through a join buffer, which loses that
-- order, and the rows were sorted again in a temporary table, on disk for their JSON columns (a file created and
-- removed by the server on every read, twice the time of the read). Five
-- plain keyed reads: folding the review reasons, checkpoints and rounds into JSON arrays of the first two makes
-- two statements, but each aggregate costs more than the read it replaces (measured: 0.7-0.9 ms against
-- 0.35-0.45 ms for the instance row with its reasons and checkpoints).
CREATE PROCEDURE _weave_instance_show(
        IN in_namespace   VARCHAR(200),
        IN in_instance_id BIGINT UNSIGNED,
        IN in_created     BOOLEAN)
    COMMENT 'Internal. Description: the five result sets of weave_instance_get for one instance (in_namespace is
answered as its namespace, in_created as its created column), read in the caller''s transaction.'
    READS SQL DATA
BEGIN
    SELECT CONCAT('wf_', i.id) AS workflow_id, in_namespace AS namespace, a.name AS app,
           i.definition_name, i.definition_version, i.status, i.control, i.gate, i.deadline_at,
           i.business_key, i.input, i.created_at, i.updated_at, i.finished_at, in_created AS created
      FROM weave_instances i JOIN weave_apps a ON a.id = i.app_id
     WHERE i.id = in_instance_id;
    SELECT s.step_key, s.type, s.status, s.activation_seq, s.output, act.started_at,
           w.kind AS wait_kind, w.status AS wait_status, w.due_at, w.deadline_at AS wait_deadline_at,
           IF(w.winner_signal_id IS NULL, NULL, CONCAT('sig_', w.winner_signal_id)) AS winner_signal_id,
           w.settled_at, p.rounds_used, p.max_rounds, p.next_poll_at, p.poll_deadline,
           IF(p.current_task_id IS NULL, NULL, CONCAT('tsk_', p.current_task_id)) AS current_task_id,
           p.state AS poll_state
      FROM weave_steps s FORCE INDEX (uq_step_key)
      LEFT JOIN weave_activations act FORCE INDEX (PRIMARY) ON act.id = s.activation_id
      LEFT JOIN weave_waits w FORCE INDEX (uq_wait_activation) ON w.activation_id = s.activation_id
      LEFT JOIN weave_poll_states p FORCE INDEX (PRIMARY) ON p.activation_id = s.activation_id
     WHERE s.instance_id = in_instance_id
     ORDER BY s.position;
    -- The latest 50 rounds of each current activation (weave_step_rounds pages through all of them): a poll may run
    -- 10,000 rounds of up to 1 MiB each. The rounds' keys are read in index order and joined to their poll state
    -- first, so only the rounds shown are read whole and looked up as their step's current ones.
    SELECT s.step_key, r.round_no, CONCAT('tsk_', r.task_id) AS task_id, r.outcome, r.result, r.result_at
      FROM weave_poll_rounds k FORCE INDEX (ix_round_instance)
      STRAIGHT_JOIN weave_poll_states p FORCE INDEX (PRIMARY) ON p.activation_id = k.activation_id
      STRAIGHT_JOIN weave_steps s FORCE INDEX (uq_step_key)
        ON s.instance_id = k.instance_id AND s.step_key = p.step_key AND s.activation_id = k.activation_id
      STRAIGHT_JOIN weave_poll_rounds r FORCE INDEX (PRIMARY) ON r.id = k.id
     WHERE k.instance_id = in_instance_id AND k.round_no + 50 > p.rounds_used
     ORDER BY k.activation_id, k.round_no;
    SELECT code, NULLIF(step_key, '') AS step_key, NULLIF(activation_seq, 0) AS activation_seq, detail, opened_at
      FROM weave_review_reasons WHERE instance_id = in_instance_id AND closed_at IS NULL ORDER BY id;
    SELECT step_key, kind, due_at, available_at, attempts, last_error, deferred_reason, deferred_since, deferrals
      FROM weave_pending_advances WHERE instance_id = in_instance_id ORDER BY step_key;
END
