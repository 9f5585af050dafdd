-- JSON puts no bound on a number, but Python reads one with a fraction or an exponent as a double, and one beyond a
-- double's range (1e400) as infinity, which no JSON writer writes back: the HTTP API refuses such a body, and a
-- worker refuses a task input that holds one (a non-retryable failure). MariaDB keeps the text as written, so a
-- value that reached the engine through SQL (a signal's payload from an outbox, an instance's input) passed, was
-- frozen into a successor's task input, and failed there. Every JSON value the engine keeps from a caller passes
-- this check as well (_weave_json_strict), with the bound Python reads by: the server's own reading of the number,
-- which fails past the largest double exactly where Python's gives infinity. An integer (no fraction, no exponent)
-- is an integer to Python at any length; a number too small for a double is zero to both.
--
-- Only a number of at least 100 digits before its point or an exponent of at least 100 can be that large, and a
-- text that holds neither, the usual case, is passed by one pattern; otherwise its strings are taken out, and each
-- such number is read.
CREATE FUNCTION _weave_json_numbers_finite(in_text LONGTEXT)
    RETURNS BOOLEAN
    COMMENT 'Internal. Description: TRUE when every number of in_text (valid JSON) written with a fraction or an
exponent is within the range of a double (as Python reads it, it is finite); FALSE otherwise.'
    DETERMINISTIC
    NO SQL
BEGIN
    DECLARE v_large VARCHAR(128) DEFAULT
        '[0-9]{100,}+(?:\\.[0-9]++(?:[eE][-+]?[0-9]++)?|[eE][-+]?[0-9]++)|[0-9]++(?:\\.[0-9]++)?[eE]\\+?0*+[1-9][0-9]{2,}+';
    DECLARE v_text LONGTEXT;
    DECLARE v_number LONGTEXT;
    DECLARE v_at BIGINT DEFAULT 1;
    DECLARE v_value DOUBLE;
    DECLARE v_beyond BOOLEAN DEFAULT FALSE;
    -- The server's reading of a number past the largest double: an error under the engine's strict sql_mode, a
    -- warning under another.
    DECLARE CONTINUE HANDLER FOR 1292 SET v_beyond = TRUE;
    IF in_text IS NULL OR NOT in_text REGEXP v_large THEN
        RETURN TRUE;
    END IF;
    SET v_text = REGEXP_REPLACE(in_text, '"(?:[^"\\\\]++|\\\\.)*+"', '""');
    WHILE NOT v_beyond DO
        SET v_number = REGEXP_SUBSTR(SUBSTRING(v_text, v_at), v_large);
        IF COALESCE(v_number, '') = '' THEN
            RETURN TRUE;
        END IF;
        SET v_value = CAST(v_number AS DOUBLE);
        SET v_at = LOCATE(v_number, v_text, v_at) + LENGTH(v_number);
    END WHILE;
    RETURN FALSE;
END
