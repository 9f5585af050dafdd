-- One text for every spelling of a JSON value, where a signal's payload is compared as a value (S-4): strings
-- with minimal escapes (_weave_json_escapes_canonical, only when the text holds a backslash, which outside strings
-- valid JSON never does), keys sorted, no insignificant whitespace, and numbers as parsed (MariaDB: JSON_NORMALIZE;
-- MySQL: the text of its JSON type, which JSON_EXTRACT(x, '$') is there).
CREATE FUNCTION _weave_json_canonical(in_doc LONGTEXT, in_escapes BOOLEAN)
    RETURNS LONGTEXT
    COMMENT 'Internal. Description: the canonical text of the JSON value in_doc: keys sorted, no insignificant
whitespace, numbers as parsed, and (in_escapes TRUE) every string escape in one form; NULL when in_doc is not
valid JSON (or NULL).'
    DETERMINISTIC
    NO SQL
BEGIN
    DECLARE v_doc LONGTEXT DEFAULT in_doc;
    IF NOT (JSON_VALID(in_doc) <=> 1) THEN
        RETURN NULL;
    END IF;
    -- Escapes first, so that keys are sorted as the characters they stand for.
    IF in_escapes AND LOCATE(CHAR(92 USING utf8mb4), v_doc) > 0 THEN
        SET v_doc = _weave_json_escapes_canonical(v_doc);
    END IF;
    IF VERSION() LIKE '%MariaDB%' THEN
        RETURN JSON_NORMALIZE(v_doc);
    END IF;
    -- CAST ... AS JSON does not parse on MariaDB, and the routine must install on both.
    RETURN CAST(JSON_EXTRACT(v_doc, '$') AS CHAR);
END
