-- A key that a document spells with \uXXXX escapes (Python's json.dumps by default, and every encoder told to keep to
-- ASCII) is found by MariaDB's JSON_EXTRACT only through the same escapes, never through its characters: a path to
-- it is written here with each character outside ASCII escaped as that encoder writes it (UTF-16 code units, a
-- character beyond the Basic Multilingual Plane as its two surrogates), with hex digits in lower or upper case.
CREATE FUNCTION _weave_json_path_escaped(
        in_path  VARCHAR(2048),
        in_upper BOOLEAN)
    RETURNS VARCHAR(12288)
    COMMENT 'Internal. Description: in_path with each character outside ASCII as its JSON escape of four hex digits
per UTF-16 unit (in upper case when in_upper).'
    DETERMINISTIC
    NO SQL
BEGIN
    DECLARE v_out VARCHAR(12288) DEFAULT '';
    DECLARE v_i INT DEFAULT 1;
    DECLARE v_char VARCHAR(1);
    DECLARE v_hex VARCHAR(8);
    WHILE v_i <= CHAR_LENGTH(in_path) DO
        SET v_char = SUBSTRING(in_path, v_i, 1);
        IF OCTET_LENGTH(v_char) = 1 THEN
            SET v_out = CONCAT(v_out, v_char);
        ELSE
            SET v_hex = HEX(CONVERT(v_char USING utf16));
            SET v_hex = IF(in_upper, v_hex, LOWER(v_hex));
            SET v_out = CONCAT(v_out, CHAR(92 USING utf8mb4), 'u', LEFT(v_hex, 4),
                               IF(LENGTH(v_hex) > 4, CONCAT(CHAR(92 USING utf8mb4), 'u', SUBSTRING(v_hex, 5)), ''));
        END IF;
        SET v_i = v_i + 1;
    END WHILE;
    RETURN v_out;
END
