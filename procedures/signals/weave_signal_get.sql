-- Get (S-5, M-3): the current state of one signal, never the frozen receipt (which stays as accepted).
-- The signal is looked up inside the authorised instance only, so a signal of another instance or
-- namespace answers exactly like a missing one (S-2).
CREATE PROCEDURE weave_signal_get(
        IN in_token       VARCHAR(512),
        IN in_namespace   VARCHAR(200),
        IN in_workflow_id VARCHAR(64),
        IN in_signal_id   VARCHAR(64))
    COMMENT 'Description: one signal of an instance in its current state.
Parameters: in_token (workflows:read, ACTIVE, of the namespace, every queue of the pinned definition), in_namespace,
in_workflow_id (wf_...), in_signal_id (sig_...).
Result set: signal_id, workflow_id, idempotency_key, name, payload_version, target_step_key,
target_activation_sequence, correlation_key (the exact bytes as UTF-8 text), correlation_key_hex, payload (JSON text
exactly as received), reason, evidence_ref, actor, status, disposition, accepted_at, expires_at, consumed_at,
request_digest.
Errors: 50001 UNAUTHENTICATED, 50002 FORBIDDEN, 50003 NOT_FOUND.
Rules: S-2, S-5, M-3.'
    READS SQL DATA
BEGIN
    DECLARE v_ns BIGINT UNSIGNED;
    DECLARE v_inst BIGINT UNSIGNED;
    DECLARE v_sid BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_found BIGINT UNSIGNED DEFAULT NULL;
    CALL _weave_instance_find(in_token, in_namespace, in_workflow_id, v_ns, v_inst);
    IF in_signal_id REGEXP '^sig_[0-9]{1,19}\\z' THEN
        SET v_sid = CAST(SUBSTRING(in_signal_id, 5) AS UNSIGNED);
    END IF;
    SELECT id INTO v_found FROM weave_signals WHERE id = v_sid AND instance_id = v_inst AND namespace_id = v_ns;
    IF v_found IS NULL THEN
        CALL _weave_raise(50003, 'NOT_FOUND: no such object in this namespace');
    END IF;
    SELECT CONCAT('sig_', id) AS signal_id, CONCAT('wf_', instance_id) AS workflow_id, idempotency_key, name,
           payload_version, target_step_key, target_activation_seq AS target_activation_sequence,
           CONVERT(correlation_key USING utf8mb4) AS correlation_key, LOWER(HEX(correlation_key)) AS correlation_key_hex,
           CONVERT(payload USING utf8mb4) AS payload, reason, evidence_ref, actor, status, disposition, accepted_at,
           expires_at, consumed_at, request_digest
      FROM weave_signals WHERE id = v_found;
END
