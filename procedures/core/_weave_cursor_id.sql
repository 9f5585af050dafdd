-- The id a cursor of prefixed ids names (a page's next_cursor: wf_7, sig_12, cred_3), one rule for every list that
-- pages by id: the prefix and at most 19 digits, within BIGINT UNSIGNED.
CREATE FUNCTION _weave_cursor_id(in_cursor VARCHAR(200), in_prefix VARCHAR(8), in_refusal VARCHAR(128))
    RETURNS BIGINT UNSIGNED
    COMMENT 'Internal. Description: the id in_cursor names after in_prefix; 0 for NULL (from the first).
Errors: 50100 with in_refusal (''INVALID_ARGUMENT: ...'') for any other cursor.'
    NO SQL
    DETERMINISTIC
BEGIN
    IF in_cursor IS NULL THEN
        RETURN 0;
    END IF;
    IF NOT in_cursor REGEXP CONCAT('^', in_prefix, '[0-9]{1,19}\\z') THEN
        CALL _weave_raise(50100, in_refusal);
    END IF;
    RETURN CAST(SUBSTRING(in_cursor, CHAR_LENGTH(in_prefix) + 1) AS UNSIGNED);
END
