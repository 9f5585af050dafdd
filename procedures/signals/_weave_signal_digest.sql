-- One definition of the S-4 request digest, used at acceptance (idempotency identity, audit row), at
-- consumption (acceptance proof, S-12) and by the M-4.10 invariant, so they can never drift apart. A
-- function, so that the invariant's plain query can recompute it from the stored row.
-- The payload counts as a JSON value, not as bytes: two clients that send {"approved":true} and
-- {"approved": true}, or "Zoë" and "Zo\u00eb", make one logical request: its canonical text
-- (_weave_json_canonical) is hashed.
-- The stored payload and the receipt stay the exact bytes received. Every field is preceded by its byte length
-- as 8 bytes big-endian, so no two different requests share one byte stream; an absent evidence_ref is a length
-- of all ones with no bytes, which no present value can produce.
-- Earlier forms, still recognised so that an upgrade never rejects a signal already in flight: ESCAPES, the
-- canonical text with strings' escapes as sent (signals accepted before escapes were made minimal), and BYTES,
-- the payload's exact bytes (accepted before digests were canonical).
CREATE FUNCTION _weave_signal_digest(
        in_name                  LONGTEXT,
        in_payload_version       LONGTEXT,
        in_target_step_key       LONGTEXT,
        in_target_activation_seq BIGINT,
        in_correlation_key       LONGBLOB,
        in_payload               LONGBLOB,
        in_reason                LONGTEXT,
        in_evidence_ref          LONGTEXT,
        in_payload_form          VARCHAR(9))
    RETURNS CHAR(64)
    COMMENT 'Internal. Description: the S-4 request digest: SHA-256, lowercase hex, over name, payload_version,
target_step_key, target_activation_sequence (decimal ASCII), correlation_key, the payload''s canonical JSON text
(in_payload_form CANONICAL; ESCAPES: with strings'' escapes as sent) or its bytes (BYTES), reason, evidence_ref,
each preceded by its byte length as 8 bytes
big-endian (absent evidence_ref: eight 0xFF bytes, no bytes follow). NULL when the payload is not valid JSON.
Rules: S-4, S-12.'
    DETERMINISTIC
    NO SQL
BEGIN
    DECLARE v_seq VARCHAR(20) DEFAULT CAST(in_target_activation_seq AS CHAR);
    DECLARE v_payload LONGBLOB DEFAULT in_payload;
    IF in_payload_form IN ('CANONICAL', 'ESCAPES') THEN
        SET v_payload = CAST(_weave_json_canonical(CONVERT(in_payload USING utf8mb4), in_payload_form = 'CANONICAL')
                             AS BINARY);
    END IF;
    RETURN SHA2(CONCAT(
        UNHEX(LPAD(HEX(OCTET_LENGTH(in_name)), 16, '0')), in_name,
        UNHEX(LPAD(HEX(OCTET_LENGTH(in_payload_version)), 16, '0')), in_payload_version,
        UNHEX(LPAD(HEX(OCTET_LENGTH(in_target_step_key)), 16, '0')), in_target_step_key,
        UNHEX(LPAD(HEX(OCTET_LENGTH(v_seq)), 16, '0')), v_seq,
        UNHEX(LPAD(HEX(OCTET_LENGTH(in_correlation_key)), 16, '0')), in_correlation_key,
        UNHEX(LPAD(HEX(OCTET_LENGTH(v_payload)), 16, '0')), v_payload,
        UNHEX(LPAD(HEX(OCTET_LENGTH(in_reason)), 16, '0')), in_reason,
        IF(in_evidence_ref IS NULL, UNHEX('FFFFFFFFFFFFFFFF'),
           CONCAT(UNHEX(LPAD(HEX(OCTET_LENGTH(in_evidence_ref)), 16, '0')), in_evidence_ref))), 256);
END
