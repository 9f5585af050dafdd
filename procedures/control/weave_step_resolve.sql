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
        IN in_idempotency_key VARCHAR(512))
    COMMENT 'Description: settles a step in NEEDS_REVIEW with an operator-supplied output; closes its review reasons;
the instance reopens (and successors activate) when no reason is left.
Parameters: in_token (workflows:review and every queue of the definition), in_namespace, in_workflow_id, in_step_key,
in_output (JSON, <= 256 KiB), in_evidence_ref (optional, <= 512 chars, no whitespace), in_reason, in_idempotency_key.
Result set: workflow_id, step_key, status (of the instance), replayed.
Errors: 50001 UNAUTHENTICATED, 50002 FORBIDDEN, 50003 NOT_FOUND, 50005 IDEMPOTENCY_CONFLICT, 50007 INVALID_STATE,
50008 TASK_IN_FLIGHT, 50112 EVIDENCE_REF_INVALID, 50117 INPUT_INVALID, 50111 REASON_INVALID,
50113 IDEMPOTENCY_KEY_INVALID.
Rules: C-4, C-5, C-6.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_now DATETIME(6);
    DECLARE v_ns BIGINT UNSIGNED;
    DECLARE v_cred BIGINT UNSIGNED;
    DECLARE v_actor VARCHAR(128);
    DECLARE v_id BIGINT UNSIGNED;
    DECLARE v_replayed TINYINT;
    DECLARE v_step BIGINT UNSIGNED;
    DECLARE v_type VARCHAR(16);
    DECLARE v_seq INT UNSIGNED;
    DECLARE v_activation BIGINT UNSIGNED;
    DECLARE v_reopened TINYINT DEFAULT 0;
    DECLARE v_status VARCHAR(16);
    DECLARE v_digest CHAR(64) DEFAULT SHA2(CONCAT_WS('|', 'resolve', COALESCE(in_step_key, ''),
        CONCAT(LENGTH(in_output), ':', COALESCE(in_output, '')), COALESCE(in_evidence_ref, '-'),
        COALESCE(in_reason, '')), 256);
    DECLARE v_tx BOOLEAN DEFAULT FALSE;  -- TRUE once this routine has started its own transaction
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN IF v_tx THEN ROLLBACK; END IF; RESIGNAL; END;
    CALL _weave_transaction_claim('weave_step_resolve', v_tx);
    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
    START TRANSACTION;
    CALL _weave_control_begin(in_token, in_namespace, in_workflow_id, 'workflows:review', 'step.resolve',
                              in_reason, in_idempotency_key, v_digest, v_ns, v_cred, v_actor, v_id, v_replayed, v_now);
    IF v_replayed = 0 THEN
        IF in_output IS NULL OR NOT JSON_VALID(in_output) OR LENGTH(in_output) > 262144 THEN
            CALL _weave_raise(50117, 'INPUT_INVALID: output must be JSON of at most 256 KiB');
        END IF;
        IF in_evidence_ref IS NOT NULL AND (CHAR_LENGTH(in_evidence_ref) NOT BETWEEN 1 AND 512
                                            OR in_evidence_ref REGEXP '[[:space:][:cntrl:]]') THEN
            CALL _weave_raise(50112, 'EVIDENCE_REF_INVALID: 1-512 characters, no whitespace or control characters');
        END IF;
        CALL _weave_recovery_begin(v_id, in_step_key, v_step, v_type, v_seq, v_activation);
        UPDATE weave_steps SET status = 'SUCCEEDED', output = in_output, updated_at = v_now WHERE id = v_step;
        UPDATE weave_activations SET ended_at = COALESCE(ended_at, v_now) WHERE id = v_activation;
        DELETE FROM weave_pending_advances WHERE instance_id = v_id AND step_key = in_step_key;
        UPDATE weave_review_reasons SET closed_at = v_now, closed_by = 'resolve'
         WHERE instance_id = v_id AND step_key = in_step_key AND closed_at IS NULL;
        CALL _weave_event(v_ns, v_id, 'STEP_RESOLVED', in_step_key, v_seq, v_now,
             JSON_OBJECT('output', JSON_EXTRACT(in_output, '$'), 'evidence_ref', in_evidence_ref, 'actor', v_actor,
                         'reason', in_reason));
        CALL _weave_review_reopen(v_ns, v_id, v_now, v_reopened);
        CALL _weave_audit(v_ns, v_id, v_cred, v_actor, 'step.resolve', in_idempotency_key, v_digest, v_now, NULL,
                          in_reason, JSON_OBJECT('step_key', in_step_key, 'evidence_ref', in_evidence_ref,
                                                 'reopened', v_reopened = 1), NULL);
    END IF;
    SELECT status INTO v_status FROM weave_instances WHERE id = v_id;
    COMMIT;
    SELECT in_workflow_id AS workflow_id, in_step_key AS step_key, v_status AS status, v_replayed AS replayed;
END
