CREATE PROCEDURE weave_instance_get(
        IN in_token       VARCHAR(512),
        IN in_namespace   VARCHAR(200),
        IN in_workflow_id VARCHAR(64))
    COMMENT 'Description: an instance with its steps, current activations, waits, poll state, rounds and open review
reasons. A consistent snapshot: all result sets are read in one read transaction of its own (REPEATABLE READ,
whatever the session''s level), or, called inside an open transaction of the caller, in that transaction, which it
neither commits nor rolls back (R-1).
Parameters: in_token (workflows:read and every queue of the definition), in_namespace, in_workflow_id (wf_...).
Result set 1: workflow_id, namespace, app, definition_name, definition_version, status, control, gate, deadline_at,
business_key, input, created_at, updated_at, finished_at, created (NULL here; weave_instance_start answers 1 or 0).
Result set 2 (steps, by position; a step with two waits has a row for each): step_key, type, status, activation_seq,
output, started_at, wait_kind, wait_status, due_at, wait_deadline_at, winner_signal_id, settled_at, rounds_used,
max_rounds, next_poll_at, poll_deadline, current_task_id, poll_state.
Result set 3 (the latest 50 rounds of each current activation, by activation, then round; weave_step_rounds pages
through all of them): step_key, round_no, task_id, outcome, result, result_at.
Result set 4 (open review reasons): code, step_key, activation_seq, detail, opened_at.
Result set 5 (checkpoints: when the engine looks again): step_key ('' for ROOT), kind, due_at, available_at,
attempts (failed advances in a row), last_error, and for a deferred check (R-18) deferred_reason, deferred_since and
deferrals (checks deferred in a row; for room, QUOTA_FULL and QUEUE_FULL, deferred_since is when it began to wait
for room and deferrals counts both reasons: its place in line holds across them).
Errors: 50001 UNAUTHENTICATED, 50002 FORBIDDEN, 50003 NOT_FOUND.
Rules: C-3, M-3.'
    READS SQL DATA
BEGIN
    DECLARE v_ns BIGINT UNSIGNED;
    DECLARE v_id BIGINT UNSIGNED;
    DECLARE v_tx BOOLEAN DEFAULT FALSE;  -- TRUE once this routine has started its own transaction
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN IF v_tx THEN ROLLBACK; END IF; RESIGNAL; END;
    CALL _weave_snapshot_open(v_tx);  -- its own snapshot, or the caller's open transaction (R-1)
    CALL _weave_instance_find(in_token, in_namespace, in_workflow_id, v_ns, v_id);
    CALL _weave_instance_show(in_namespace, v_id, NULL);
    IF v_tx THEN
        COMMIT;
    END IF;
END
