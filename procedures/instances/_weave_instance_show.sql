-- The instance as the API shows it, one definition for every routine that answers it (weave_instance_get,
-- and weave_instance_start answering the instance it started). The caller has authorised the read and
-- chosen the transaction the sets are read in. Two reads: the instance with its open review reasons and its
-- checkpoints (each a JSON array of one keyed lookup), and its steps, each with its rounds.
CREATE PROCEDURE _weave_instance_show(
        IN in_namespace   VARCHAR(200),
        IN in_instance_id BIGINT UNSIGNED,
        IN in_created     BOOLEAN)
    COMMENT 'Internal. Description: the two result sets of weave_instance_get for one instance (in_namespace is
answered as its namespace, in_created as its created column), read in the caller''s transaction.'
    READS SQL DATA
BEGIN
    SELECT CONCAT('wf_', i.id) AS workflow_id, in_namespace AS namespace, a.name AS app,
           i.definition_name, i.definition_version, i.status, i.control, i.gate, i.deadline_at,
           i.business_key, i.input, i.created_at, i.updated_at, i.finished_at, in_created AS created,
           (SELECT JSON_ARRAYAGG(JSON_OBJECT(
                       'code', r.code, 'step_key', NULLIF(r.step_key, ''),
                       'activation_seq', NULLIF(r.activation_seq, 0), 'detail', r.detail,
                       'opened_at', DATE_FORMAT(r.opened_at, '%Y-%m-%dT%H:%i:%s.%fZ')) ORDER BY r.id)
              FROM weave_review_reasons r
             WHERE r.instance_id = i.id AND r.closed_at IS NULL) AS review_reasons,
           (SELECT JSON_ARRAYAGG(JSON_OBJECT(
                       'step_key', c.step_key, 'kind', c.kind,
                       'due_at', DATE_FORMAT(c.due_at, '%Y-%m-%dT%H:%i:%s.%fZ'),
                       'available_at', DATE_FORMAT(c.available_at, '%Y-%m-%dT%H:%i:%s.%fZ'),
                       'attempts', c.attempts, 'last_error', c.last_error, 'deferred_reason', c.deferred_reason,
                       'deferred_since', DATE_FORMAT(c.deferred_since, '%Y-%m-%dT%H:%i:%s.%fZ'),
                       'deferrals', c.deferrals) ORDER BY c.step_key)
              FROM weave_pending_advances c WHERE c.instance_id = i.id) AS checkpoints
      FROM weave_instances i JOIN weave_apps a ON a.id = i.app_id
     WHERE i.id = in_instance_id;
    SELECT s.step_key, s.type, s.status, s.activation_seq, s.output, act.started_at,
           w.kind AS wait_kind, w.status AS wait_status, w.due_at, w.deadline_at AS wait_deadline_at,
           IF(w.winner_signal_id IS NULL, NULL, CONCAT('sig_', w.winner_signal_id)) AS winner_signal_id,
           w.settled_at, p.rounds_used, p.max_rounds, p.next_poll_at, p.poll_deadline,
           IF(p.current_task_id IS NULL, NULL, CONCAT('tsk_', p.current_task_id)) AS current_task_id,
           p.state AS poll_state,
           (SELECT JSON_ARRAYAGG(JSON_OBJECT(
                       'round_no', r.round_no, 'task_id', CONCAT('tsk_', r.task_id), 'outcome', r.outcome,
                       'result', r.result, 'result_at', DATE_FORMAT(r.result_at, '%Y-%m-%dT%H:%i:%s.%fZ'))
                       ORDER BY r.round_no)
              FROM weave_poll_rounds r WHERE r.activation_id = s.activation_id) AS rounds
      FROM weave_steps s
      LEFT JOIN weave_activations act ON act.id = s.activation_id
      LEFT JOIN weave_waits w ON w.activation_id = s.activation_id
      LEFT JOIN weave_poll_states p ON p.activation_id = s.activation_id
     WHERE s.instance_id = in_instance_id
     ORDER BY s.position, w.kind;
END
