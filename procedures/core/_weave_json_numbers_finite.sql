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
-- text that holds neither, the usual case, is passed by one pattern, which walks the text token by token as
-- _weave_json_strict's does (strings whole: "3fe512" in an id is no exponent), so that nothing else runs for it;
-- the reading below materialises the document's values in a temporary table on disk. Otherwise the server's JSON
-- reader hands over
-- every value of the document, members and items at every depth (a string with its quotes, so that none is taken
-- for a number), and each number with a fraction or an exponent is read as a double, in one statement. A text is
-- never cut or rewritten here: MariaDB's REGEXP_REPLACE, SUBSTRING and LOCATE on a long text cost as much again
-- for every match or position, so that a document of many numbers took seconds.
CREATE FUNCTION _weave_json_numbers_finite(in_text LONGTEXT)
    RETURNS BOOLEAN
    COMMENT 'Internal. Description: TRUE when every number of in_text (valid JSON) written with a fraction or an
exponent is within the range of a double (as Python reads it, it is finite); FALSE otherwise. On MySQL always TRUE:
its reader refuses such a number itself.'
    DETERMINISTIC
    READS SQL DATA
BEGIN
    DECLARE v_read INT;
    DECLARE v_beyond BOOLEAN DEFAULT FALSE;
    -- The server's reading of a number past the largest double: an error under the engine's strict sql_mode, a
    -- warning under another.
    DECLARE CONTINUE HANDLER FOR 1292 SET v_beyond = TRUE;
    IF in_text IS NULL OR VERSION() NOT LIKE '%MariaDB%' OR NOT JSON_VALID(in_text)
       OR in_text REGEXP CONCAT('^(?:[^"0-9]++|"(?:[^"\\\\]++|\\\\.)*+"',
                                '|(?![0-9]{100}|[0-9]++(?:\\.[0-9]++)?[eE]\\+?0*+[1-9][0-9]{2})[0-9][0-9.eE+-]*+)*+\\z') THEN
        RETURN TRUE;  -- no number that large: the pattern walked the whole text
    END IF;
    SELECT COUNT(CASE WHEN v REGEXP '^-?[0-9]++(?:\\.[0-9]++)?[eE.]' THEN CAST(v AS DOUBLE) END) INTO v_read
      FROM (SELECT m.v FROM JSON_TABLE(in_text, '$**.*' COLUMNS (v JSON PATH '$')) AS m
            UNION ALL
            SELECT i.v FROM JSON_TABLE(in_text, '$**[*]' COLUMNS (v JSON PATH '$')) AS i
            UNION ALL
            SELECT in_text) AS value_of;
    RETURN NOT v_beyond;
END
