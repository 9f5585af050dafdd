-- One definition of the S-4 request digest, used at acceptance (idempotency identity, audit row) and at
-- consumption (acceptance proof, S-12), so the two can never drift apart. Every field is preceded by
-- its byte length as 8 bytes big-endian, so no two different requests can share one byte stream; an
-- absent evidence_ref is a length of all ones with no bytes, which no present value can produce.
CREATE PROCEDURE _weave_signal_digest(
        IN  in_name                  LONGTEXT,
        IN  in_payload_version       LONGTEXT,
        IN  in_target_step_key       LONGTEXT,
        IN  in_target_activation_seq BIGINT,
        IN  in_correlation_key       LONGBLOB,
        IN  in_payload               LONGBLOB,
        IN  in_reason                LONGTEXT,
        IN  in_evidence_ref          LONGTEXT,
        OUT out_digest               CHAR(64))
    COMMENT 'Internal. Description: the S-4 request digest: SHA-256, lowercase hex, over name, payload_version,
target_step_key, target_activation_sequence (decimal ASCII), correlation_key, payload, reason, evidence_ref, each
preceded by its byte length as 8 bytes big-endian (absent evidence_ref: eight 0xFF bytes, no bytes follow).
Rules: S-4, S-12.'
    NO SQL
BEGIN
    DECLARE v_seq VARCHAR(20) DEFAULT CAST(in_target_activation_seq AS CHAR);
    SET out_digest = SHA2(CONCAT(
        UNHEX(LPAD(HEX(OCTET_LENGTH(in_name)), 16, '0')), in_name,
        UNHEX(LPAD(HEX(OCTET_LENGTH(in_payload_version)), 16, '0')), in_payload_version,
        UNHEX(LPAD(HEX(OCTET_LENGTH(in_target_step_key)), 16, '0')), in_target_step_key,
        UNHEX(LPAD(HEX(OCTET_LENGTH(v_seq)), 16, '0')), v_seq,
        UNHEX(LPAD(HEX(OCTET_LENGTH(in_correlation_key)), 16, '0')), in_correlation_key,
        UNHEX(LPAD(HEX(OCTET_LENGTH(in_payload)), 16, '0')), in_payload,
        UNHEX(LPAD(HEX(OCTET_LENGTH(in_reason)), 16, '0')), in_reason,
        IF(in_evidence_ref IS NULL, UNHEX('FFFFFFFFFFFFFFFF'),
           CONCAT(UNHEX(LPAD(HEX(OCTET_LENGTH(in_evidence_ref)), 16, '0')), in_evidence_ref))), 256);
END
