-- One definition of a start's request digest, taken by the start that stores it and by a replay that compares
-- against it. Each field is preceded by its length, so no two different requests share one text. The deadline comes
-- as its text, formatted by the caller: a date that is no time (0000-00-00, which a session without NO_ZERO_DATE
-- passes) would fail as a DATETIME parameter here before the start could refuse it as DEADLINE_INVALID.
CREATE FUNCTION _weave_start_digest(
        in_definition  VARCHAR(200),
        in_version     BIGINT,
        in_app         VARCHAR(200),
        in_input       LONGTEXT,
        in_deadline_at VARCHAR(32),
        in_deadline_ms BIGINT,
        in_business_key VARCHAR(1024))
    RETURNS CHAR(64)
    COMMENT 'Internal. Description: the request digest of weave_instance_start: SHA-256, lowercase hex, over the
definition, version, app, input text, deadline_at (as DATE_FORMAT %Y-%m-%dT%H:%i:%s.%f writes it), deadline_ms
and business key of the request.
Rules: R-4.'
    DETERMINISTIC
    NO SQL
BEGIN
    RETURN SHA2(CONCAT_WS('|',
        CONCAT(LENGTH(in_definition), ':', in_definition), COALESCE(in_version, '-'),
        CONCAT(LENGTH(in_app), ':', in_app), CONCAT(LENGTH(in_input), ':', in_input),
        COALESCE(in_deadline_at, '-'), COALESCE(in_deadline_ms, '-'),
        COALESCE(CONCAT(LENGTH(in_business_key), ':', in_business_key), '-')), 256);
END
