-- C-4 continue: a POLL that stopped on its round budget or its poll deadline, with a last round that
-- answered PENDING, goes on in the same activation with extra rounds and/or a later poll deadline. Its
-- frozen inputs, rounds and results stay; the next round is due at max(now, next_poll_at). The
-- final-signal wait's deadline follows the poll deadline (05-signals).
CREATE PROCEDURE weave_step_continue(
        IN in_token            VARCHAR(512),
        IN in_namespace        VARCHAR(200),
        IN in_workflow_id      VARCHAR(64),
        IN in_step_key         VARCHAR(200),
        IN in_extra_rounds     BIGINT,
        IN in_poll_deadline_ms BIGINT,
        IN in_reason           VARCHAR(4096),
        IN in_idempotency_key  VARCHAR(512),
        IN in_activation_sequence INT UNSIGNED)
    COMMENT 'Description: continues a POLL stopped in review on POLL_ROUNDS_EXHAUSTED, POLL_DEADLINE or
POLL_DEADLINE_IN_FLIGHT (last round POLL_PENDING) in the same activation; closes its review reasons; the instance reopens when no reason is left.
Parameters: in_token (workflows:review and every queue of the definition), in_namespace, in_workflow_id, in_step_key,
in_extra_rounds (1..10000, optional), in_poll_deadline_ms (new poll deadline = now + ms, later than the current one
and <= instance deadline, optional; at least one of the two), in_reason, in_idempotency_key, in_activation_sequence (optional: the
activation the action is meant for; another one in review is refused INVALID_STATE, nothing changed).
Result set: workflow_id, step_key, max_rounds, poll_deadline, status (of the instance), replayed.
Result sets 2-6: the instance as it is now, as weave_instance_get answers it (the action''s scope is enough).
Errors: 50001 UNAUTHENTICATED, 50002 FORBIDDEN, 50003 NOT_FOUND, 50005 IDEMPOTENCY_CONFLICT, 50007 INVALID_STATE,
50008 TASK_IN_FLIGHT, 50100 INVALID_ARGUMENT, 50118 DEADLINE_INVALID, 50111 REASON_INVALID,
50113 IDEMPOTENCY_KEY_INVALID.
Rules: C-4, C-5, C-6, P-4.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_id BIGINT UNSIGNED;
    DECLARE v_replayed TINYINT;
    DECLARE v_max INT UNSIGNED;
    DECLARE v_deadline DATETIME(6);
    DECLARE v_status VARCHAR(16);
    -- The activation, when given, follows the step key ('@k', where no other field can start so; absent, the
    -- digest is the one a request without it always had).
    DECLARE v_digest CHAR(64) DEFAULT SHA2(CONCAT_WS('|', 'continue', COALESCE(in_step_key, ''),
        CONCAT('@', in_activation_sequence),
        COALESCE(in_extra_rounds, '-'), COALESCE(in_poll_deadline_ms, '-'), COALESCE(in_reason, '')), 256);
    DECLARE v_tx BOOLEAN DEFAULT FALSE;  -- TRUE once this routine has started its own transaction
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN IF v_tx THEN ROLLBACK; END IF; RESIGNAL; END;
    CALL _weave_transaction_begin('weave_step_continue', v_tx);  -- refused inside a caller's transaction (R-1)
    CALL _weave_step_recover('continue', in_token, in_namespace, in_workflow_id, in_step_key, in_extra_rounds,
                             in_poll_deadline_ms, NULL, NULL, NULL, in_reason, in_idempotency_key, v_digest,
                             in_activation_sequence, v_id, v_replayed);
    SELECT s.status, p.max_rounds, p.poll_deadline INTO v_status, v_max, v_deadline
      FROM weave_instances s JOIN weave_steps st ON st.instance_id = s.id AND st.step_key = in_step_key
      JOIN weave_poll_states p ON p.activation_id = st.activation_id
     WHERE s.id = v_id;
    COMMIT;
    SELECT in_workflow_id AS workflow_id, in_step_key AS step_key, v_max AS max_rounds, v_deadline AS poll_deadline,
           v_status AS status, v_replayed AS replayed;
    -- The instance as it is now, for the credential that acted (its scope is enough, 07-api), in its own snapshot:
    -- REPEATABLE READ whatever the session's level, under which a snapshot would read uncommitted or later rows.
    SET TRANSACTION ISOLATION LEVEL REPEATABLE READ;
    START TRANSACTION WITH CONSISTENT SNAPSHOT;
    CALL _weave_instance_show(in_namespace, CAST(SUBSTRING(in_workflow_id, 4) AS UNSIGNED), NULL);
    COMMIT;
END
