-- "Same final result" (05-signals) compares outputs as JSON values: key order and whitespace ignored,
-- numbers by value. The two servers spell that differently, and each spelling is a syntax or runtime
-- error on the other, so the routine branches on the server it runs on (docs/portability.md):
-- MariaDB has JSON_EQUALS, which compares strings as written, so their escapes are given one spelling
-- first where there are any (_weave_json_escapes_canonical); MySQL compares two values of its JSON type by
-- value, escapes decoded, which JSON_EXTRACT(x, '$') returns there (on MariaDB the same expression would
-- compare text).
CREATE PROCEDURE _weave_json_equal(
        IN  in_a     LONGTEXT,
        IN  in_b     LONGTEXT,
        OUT out_same TINYINT)
    COMMENT 'Internal. Description: out_same = 1 when in_a and in_b are equal JSON values (objects compared without key
order, numbers by value, strings by their characters whatever their escapes, arrays in order), or both SQL NULL
(absent); else 0. Invalid JSON is never equal.'
    NO SQL
BEGIN
    IF in_a IS NULL OR in_b IS NULL THEN
        SET out_same = (in_a IS NULL AND in_b IS NULL);
    ELSEIF NOT JSON_VALID(in_a) OR NOT JSON_VALID(in_b) THEN
        SET out_same = 0;
    ELSEIF VERSION() LIKE '%MariaDB%' THEN
        SET out_same = COALESCE(JSON_EQUALS(in_a, in_b), 0);
        -- Its strings are compared as written: one escape in either (a backslash, which only a string holds) and
        -- both are compared again with one spelling of every string.
        IF out_same = 0
           AND (LOCATE(CHAR(92 USING utf8mb4), in_a) > 0 OR LOCATE(CHAR(92 USING utf8mb4), in_b) > 0) THEN
            SET out_same = COALESCE(JSON_EQUALS(_weave_json_escapes_canonical(in_a),
                                                _weave_json_escapes_canonical(in_b)), 0);
        END IF;
    ELSE
        SET out_same = COALESCE(JSON_EXTRACT(in_a, '$') = JSON_EXTRACT(in_b, '$'), 0);
    END IF;
END
