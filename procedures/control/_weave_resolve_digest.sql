-- One definition of a resolve's request digest, taken by the resolve that stores it and by a replay that compares
-- against it.
-- The evidence_ref is length-prefixed as the output is: '-' is a valid evidence_ref, and one may hold '|', so
-- neither an absent one nor a field boundary may be spelled by the bytes of another request. The activation, when
-- given, follows the step key ('@k', where no other field can start so; absent, the digest is the one a request
-- without it always had).
CREATE FUNCTION _weave_resolve_digest(
        in_step_key            VARCHAR(200),
        in_activation_sequence INT UNSIGNED,
        in_output              LONGTEXT,
        in_evidence_ref        VARCHAR(2048),
        in_reason              VARCHAR(4096))
    RETURNS CHAR(64)
    COMMENT 'Internal. Description: the request digest of weave_step_resolve: SHA-256, lowercase hex, over the step
key, the activation (when given), the output text as given, the evidence_ref and the reason.
Rules: C-4, R-4.'
    DETERMINISTIC
    NO SQL
BEGIN
    RETURN SHA2(CONCAT_WS('|', 'resolve', COALESCE(in_step_key, ''), CONCAT('@', in_activation_sequence),
        CONCAT(LENGTH(in_output), ':', COALESCE(in_output, '')),
        COALESCE(CONCAT(LENGTH(in_evidence_ref), ':', in_evidence_ref), '-'), COALESCE(in_reason, '')), 256);
END
