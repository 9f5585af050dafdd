-- Send (S-1..S-9) as its own transaction: safe to call from any SQL client (R-1). The body is shared
-- with weave_signal_send_in_tx; this entry point owns the transaction and, when the signal's wait is
-- open, settles it in that same transaction (settle at Send: no scan, no second decision).
CREATE PROCEDURE weave_signal_send(
        IN in_token                 VARCHAR(512),
        IN in_namespace             VARCHAR(200),
        IN in_workflow_id           VARCHAR(64),
        IN in_idempotency_key       LONGTEXT,
        IN in_name                  LONGTEXT,
        IN in_payload_version       LONGTEXT,
        IN in_target_step_key       LONGTEXT,
        IN in_target_activation_seq BIGINT,
        IN in_correlation_key       LONGBLOB,
        IN in_payload               LONGBLOB,
        IN in_reason                LONGTEXT,
        IN in_evidence_ref          LONGTEXT)
    COMMENT 'Description: accepts an external signal for a SIGNAL step (or a POLL final signal), idempotently: the
first acceptance stores the signal (PENDING, or REJECTED with its S-9 disposition), its event, its audit row and a
frozen receipt in one transaction; the same key with the same request answers that receipt byte-identical. When
the target SIGNAL wait is WAITING, the same transaction consumes the first match (S-11) and follows the successors;
the receipt still says PENDING (S-5).
Parameters: in_token (workflows:signal, ACTIVE, of the namespace, every queue of the pinned definition),
in_namespace, in_workflow_id (wf_...), in_idempotency_key (1-128 printable ASCII, no space), in_name (1-128 printable ASCII),
in_payload_version (1-32 printable ASCII), in_target_step_key (1-64 chars), in_target_activation_seq (>= 1),
in_correlation_key (1-512 bytes of UTF-8, exact), in_payload (JSON text as received, <= 256 KiB, nested at most 31 levels, no key twice in one
object, no number past a double; SQL NULL = missing, the text null = JSON null), in_reason (1-1024 chars), in_evidence_ref (NULL or 1-512
chars, no whitespace or control characters).
Result set: signal_id, workflow_id, idempotency_key, status, disposition, accepted_at, expires_at, request_digest
(the receipt fields), receipt (the frozen receipt JSON text), replayed (1 when answered from a first acceptance).
Errors: 50001 UNAUTHENTICATED, 50002 FORBIDDEN, 50003 NOT_FOUND, 50005 IDEMPOTENCY_CONFLICT, 50006
SIGNAL_LIMIT_REACHED, 50101 NAME_TOO_LONG, 50102 PAYLOAD_VERSION_INVALID, 50103 TARGET_STEP_INVALID, 50104
ACTIVATION_SEQUENCE_INVALID, 50105 CORRELATION_KEY_TOO_LONG, 50106 CORRELATION_KEY_MISSING, 50107 PAYLOAD_TOO_LARGE,
50108 PAYLOAD_MISSING, 50109 PAYLOAD_INVALID, 50110 PAYLOAD_TYPE_MISMATCH, 50111 REASON_INVALID, 50112
EVIDENCE_REF_INVALID, 50113 IDEMPOTENCY_KEY_INVALID, 50114 CONTRACT_MISMATCH, 50115 FUTURE_ACTIVATION, 50116
NAME_INVALID, 50130 CORRELATION_KEY_INVALID.
Rules: S-1, S-2, S-3, S-4, S-5, S-6, S-7, S-8, S-9, S-10, S-11, S-14, R-1, R-3, R-4, R-8, M-4.10, M-4.14, M-4.15.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_receipt LONGTEXT;
    DECLARE v_replayed TINYINT;
    DECLARE v_tx BOOLEAN DEFAULT FALSE;  -- TRUE once this routine has started its own transaction
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN IF v_tx THEN ROLLBACK; END IF; RESIGNAL; END;
    CALL _weave_transaction_begin('weave_signal_send', v_tx);  -- refused inside a caller's transaction (R-1)
    CALL _weave_signal_accept(in_token, in_namespace, in_workflow_id, in_idempotency_key, in_name,
                              in_payload_version, in_target_step_key, in_target_activation_seq, in_correlation_key,
                              in_payload, in_reason, in_evidence_ref, 1, v_receipt, v_replayed);
    COMMIT;
    SELECT JSON_VALUE(v_receipt, '$.signal_id') AS signal_id, JSON_VALUE(v_receipt, '$.workflow_id') AS workflow_id,
           JSON_VALUE(v_receipt, '$.idempotency_key') AS idempotency_key, JSON_VALUE(v_receipt, '$.status') AS status,
           JSON_VALUE(v_receipt, '$.disposition') AS disposition, JSON_VALUE(v_receipt, '$.accepted_at') AS accepted_at,
           JSON_VALUE(v_receipt, '$.expires_at') AS expires_at,
           JSON_VALUE(v_receipt, '$.request_digest') AS request_digest, v_receipt AS receipt,
           v_replayed AS replayed;
END
