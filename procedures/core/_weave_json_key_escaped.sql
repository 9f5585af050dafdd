-- Whether a key of a JSON text is written with an escape: a backslash is only ever in a string, so a string that
-- holds one and is followed by a colon is a key. Where such a key may be, a document must be read with its escapes
-- in one spelling ("a" and "\u0061" are one key); where none is, its text can be read as written.
CREATE FUNCTION _weave_json_key_escaped(in_doc LONGTEXT)
    RETURNS BOOLEAN
    COMMENT 'Internal. Description: TRUE when a key of in_doc (valid JSON) holds an escape; FALSE otherwise.'
    DETERMINISTIC
    NO SQL
BEGIN
    RETURN COALESCE(LOCATE(CHAR(92 USING utf8mb4), in_doc) > 0
                    AND in_doc REGEXP '"[^"\\\\]*+\\\\.(?:[^"\\\\]++|\\\\.)*+"\\s*+:', FALSE);
END
