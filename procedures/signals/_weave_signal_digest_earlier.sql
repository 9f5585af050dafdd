-- Whether a stored request digest is the one an earlier release computed for the same request: the canonical
-- text with strings' escapes as sent (ESCAPES, before escapes were made minimal) or the payload's exact bytes
-- (BYTES, before digests were canonical). The replay check, the acceptance proof (S-12) and M-4.10 ask it only
-- after the current form did not match, so that an upgrade never rejects a signal already in flight.
CREATE FUNCTION _weave_signal_digest_earlier(
        in_name                  LONGTEXT,
        in_payload_version       LONGTEXT,
        in_target_step_key       LONGTEXT,
        in_target_activation_seq BIGINT,
        in_correlation_key       LONGBLOB,
        in_payload               LONGBLOB,
        in_reason                LONGTEXT,
        in_evidence_ref          LONGTEXT,
        in_digest                CHAR(64))
    RETURNS BOOLEAN
    COMMENT 'Internal. Description: TRUE when in_digest is the request''s S-4 digest in an earlier form (ESCAPES or
BYTES of _weave_signal_digest). Rules: S-4, S-12.'
    DETERMINISTIC
    NO SQL
BEGIN
    RETURN in_digest IN (
        _weave_signal_digest(in_name, in_payload_version, in_target_step_key, in_target_activation_seq,
                             in_correlation_key, in_payload, in_reason, in_evidence_ref, 'ESCAPES'),
        _weave_signal_digest(in_name, in_payload_version, in_target_step_key, in_target_activation_seq,
                             in_correlation_key, in_payload, in_reason, in_evidence_ref, 'BYTES'));
END
