-- C-4 resolve: the operator supplies the step's output (and optional evidence); the step becomes
-- SUCCEEDED and its successors follow once nothing is left in review.
CREATE PROCEDURE weave_step_resolve(
        IN in_token           VARCHAR(512),
        IN in_namespace       VARCHAR(200),
        IN in_workflow_id     VARCHAR(64),
        IN in_step_key        VARCHAR(200),
        IN in_output          LONGTEXT,
        IN in_evidence_ref    VARCHAR(2048),
        IN in_reason          VARCHAR(4096),
        IN in_idempotency_key VARCHAR(512),
        IN in_activation_sequence INT UNSIGNED)
    COMMENT 'Description: settles a step in NEEDS_REVIEW with an operator-supplied output; closes its review reasons
and a wait of its activation still open (CANCELLED; its PENDING signals REJECTED STEP_SETTLED); the instance reopens
(and successors activate) when no reason is left.
Parameters: in_token (workflows:review and every queue of the definition), in_namespace, in_workflow_id, in_step_key,
in_output (JSON, <= 256 KiB, no key twice in one object, no number beyond a double''s range), in_evidence_ref (optional, <= 512 chars, no whitespace),
in_reason, in_idempotency_key, in_activation_sequence (optional: the activation the action is meant for; another one
in review is refused INVALID_STATE, nothing changed).
Result set: workflow_id, step_key, status (of the instance), replayed.
Result sets 2-6: the instance as it is now, as weave_instance_get answers it (the action''s scope is enough).
Errors: 50001 UNAUTHENTICATED, 50002 FORBIDDEN, 50003 NOT_FOUND, 50005 IDEMPOTENCY_CONFLICT, 50007 INVALID_STATE,
50008 TASK_IN_FLIGHT, 50112 EVIDENCE_REF_INVALID, 50117 INPUT_INVALID, 50111 REASON_INVALID,
50113 IDEMPOTENCY_KEY_INVALID.
Rules: C-4, C-5, C-6, S-9, S-11.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_id BIGINT UNSIGNED;
    DECLARE v_replayed TINYINT;
    DECLARE v_status VARCHAR(16);
    -- The digest takes the output as given, as it always has; the same resolve with its output spelled otherwise is
    -- recognised by _weave_step_recover, which compares the two outputs by value.
    DECLARE v_digest CHAR(64) DEFAULT _weave_resolve_digest(in_step_key, in_activation_sequence, in_output,
                                                            in_evidence_ref, in_reason);
    DECLARE v_tx BOOLEAN DEFAULT FALSE;  -- TRUE once this routine has started its own transaction
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN IF v_tx THEN ROLLBACK; END IF; RESIGNAL; END;
    CALL _weave_transaction_begin('weave_step_resolve', v_tx);  -- refused inside a caller's transaction (R-1)
    CALL _weave_step_recover('resolve', in_token, in_namespace, in_workflow_id, in_step_key, NULL, NULL, NULL,
                             in_output, in_evidence_ref, in_reason, in_idempotency_key, v_digest,
                             in_activation_sequence, v_id, v_replayed);
    SELECT status INTO v_status FROM weave_instances WHERE id = v_id;
    COMMIT;
    SELECT in_workflow_id AS workflow_id, in_step_key AS step_key, v_status AS status, v_replayed AS replayed;
    -- The instance as it is now, for the credential that acted (its scope is enough, 07-api), in its own snapshot:
    -- REPEATABLE READ whatever the session's level, under which a snapshot would read uncommitted or later rows.
    SET TRANSACTION ISOLATION LEVEL REPEATABLE READ;
    START TRANSACTION WITH CONSISTENT SNAPSHOT;
    CALL _weave_instance_show(in_namespace, CAST(SUBSTRING(in_workflow_id, 4) AS UNSIGNED), NULL);
    COMMIT;
END
