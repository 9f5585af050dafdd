-- MariaDB keeps a JSON string as the text it was written in, and JSON_EQUALS compares those texts: "Zoë" and
-- "Zo\u00eb", or "a/b" and "a\/b", are one JSON value that it calls different. Encoders differ exactly there
-- (Python's json.dumps writes \u escapes by default, PHP's json_encode also escapes "/"), so a worker and the
-- sender of a final signal can write one result two ways. This gives every string of a valid document one
-- spelling: each escape becomes the character it stands for, except those a string must escape (the quote,
-- the backslash and control characters), which take their short form (\" \\ \b \f \n \r \t) or else \u00xx in
-- lower case; a lone surrogate, which no character can stand for, keeps its escape in lower case. Outside
-- strings a valid document holds no backslash, so the text is scanned for backslashes alone.
CREATE FUNCTION _weave_json_escapes_canonical(in_doc LONGTEXT)
    RETURNS LONGTEXT
    COMMENT 'Internal. Description: in_doc (valid JSON) with every string escape in one canonical form: escapes of
characters that need none decoded (\/, \u00e9, surrogate pairs), the others as \" \\ \b \f \n \r \t or \u00xx.
Rules: F-5, F-6.'
    DETERMINISTIC
    NO SQL
BEGIN
    -- Bytes, not characters: a position in a utf8mb4 text is found by counting from its start, which made each
    -- step of the scan as long as the document. A backslash byte is never part of a multi-byte character. The
    -- output grows in a short buffer, moved to the whole only now and then, so that it is not copied per escape.
    -- Escapes come in stretches (text of another script written by an encoder that keeps to ASCII, a JSON text
    -- carried in a string), and a stretch of escapes and printable ASCII is taken whole, at most SPAN bytes at a
    -- time: decoded by the server's JSON reader, then the characters a string must escape written back in their
    -- short form. Only an escape that must be written otherwise (a control character, quote or backslash in \u
    -- form, a lone surrogate) is taken alone.
    DECLARE SPAN INT DEFAULT 1024;
    DECLARE v_doc LONGBLOB DEFAULT CAST(in_doc AS BINARY);
    DECLARE v_bs VARBINARY(1) DEFAULT UNHEX('5C');
    DECLARE v_out LONGBLOB DEFAULT '';
    DECLARE v_buf LONGBLOB DEFAULT '';
    DECLARE v_pos BIGINT DEFAULT 1;
    DECLARE v_at BIGINT;
    DECLARE v_cp BIGINT;
    DECLARE v_lo BIGINT;
    DECLARE v_run LONGBLOB;
    SET v_at = LOCATE(v_bs, v_doc);
    WHILE v_at > 0 DO
        SET v_buf = CONCAT(v_buf, SUBSTRING(v_doc, v_pos, v_at - v_pos)), v_run = '',
            v_cp = IF(SUBSTRING(v_doc, v_at + 1, 1) = 'u', CONV(SUBSTRING(v_doc, v_at + 2, 4), 16, 10), NULL);
        -- (A \u escape that must be written otherwise, or that ends its string, is taken alone at once.)
        IF v_cp IS NULL OR NOT (v_cp < 32 OR v_cp IN (34, 92) OR v_cp BETWEEN 56320 AND 57343
                                OR SUBSTRING(v_doc, v_at + 6, 1) = '"') THEN
            -- (Matched as latin1, a byte a character: MySQL takes no binary string in a regular expression.)
            SET v_run = REGEXP_SUBSTR(CONVERT(SUBSTRING(v_doc, v_at, SPAN) USING latin1) COLLATE latin1_bin,
                '^(?:[\\x20\\x21\\x23-\\x5b\\x5d-\\x7e]++|\\\\["\\\\/bfnrt]'
                '|\\\\u(?![dD][89a-fA-F]|00[01]|0022|005[cC])[0-9a-fA-F]{4}'
                '|\\\\u[dD][89abAB][0-9a-fA-F]{2}\\\\u[dD][c-fC-F][0-9a-fA-F]{2})*+');
        END IF;
        IF LENGTH(v_run) > 0 THEN
            SET v_buf = CONCAT(v_buf, REPLACE(REPLACE(REPLACE(REPLACE(REPLACE(REPLACE(REPLACE(
                    CAST(JSON_UNQUOTE(CONVERT(CONCAT('"', v_run, '"') USING utf8mb4)) AS BINARY),
                    v_bs, CONCAT(v_bs, v_bs)), '"', CONCAT(v_bs, '"')), CHAR(8), CONCAT(v_bs, 'b')),
                    CHAR(12), CONCAT(v_bs, 'f')), CHAR(10), CONCAT(v_bs, 'n')), CHAR(13), CONCAT(v_bs, 'r')),
                    CHAR(9), CONCAT(v_bs, 't'))),
                v_pos = v_at + LENGTH(v_run);
        ELSEIF v_cp IS NULL THEN  -- no escape of JSON's (the document is not valid): left as it is
            SET v_buf = CONCAT(v_buf, SUBSTRING(v_doc, v_at, 2)), v_pos = v_at + 2;
        ELSE
            SET v_pos = v_at + 6;
            IF v_cp BETWEEN 55296 AND 56319 AND SUBSTRING(v_doc, v_pos, 2) = CONCAT(v_bs, 'u') THEN
                SET v_lo = CONV(SUBSTRING(v_doc, v_pos + 2, 4), 16, 10);
                IF v_lo BETWEEN 56320 AND 57343 THEN  -- a surrogate pair: one character beyond the BMP
                    SET v_cp = 65536 + (v_cp - 55296) * 1024 + (v_lo - 56320), v_pos = v_pos + 6;
                END IF;
            END IF;
            SET v_buf = CONCAT(v_buf, CASE
                WHEN v_cp = 34 THEN CONCAT(v_bs, '"')
                WHEN v_cp = 92 THEN CONCAT(v_bs, v_bs)
                WHEN v_cp = 8 THEN CONCAT(v_bs, 'b')
                WHEN v_cp = 12 THEN CONCAT(v_bs, 'f')
                WHEN v_cp = 10 THEN CONCAT(v_bs, 'n')
                WHEN v_cp = 13 THEN CONCAT(v_bs, 'r')
                WHEN v_cp = 9 THEN CONCAT(v_bs, 't')
                WHEN v_cp < 32 OR v_cp BETWEEN 55296 AND 57343 THEN CONCAT(v_bs, 'u', LPAD(LOWER(HEX(v_cp)), 4, '0'))
                ELSE CAST(CONVERT(CHAR(v_cp USING utf32) USING utf8mb4) AS BINARY) END);
        END IF;
        IF LENGTH(v_buf) > 8192 THEN
            SET v_out = CONCAT(v_out, v_buf), v_buf = '';
        END IF;
        SET v_at = LOCATE(v_bs, v_doc, v_pos);
    END WHILE;
    RETURN CONVERT(CONCAT(v_out, v_buf, SUBSTRING(v_doc, v_pos)) USING utf8mb4);
END
