-- Where two byte strings (correlation keys, at most 512 bytes) first differ: the length of their common prefix, found
-- by halving it (ten prefix comparisons at most), with no table of positions to join each pair against.
CREATE FUNCTION _weave_bytes_differ_at(
        in_a VARBINARY(512),
        in_b VARBINARY(512))
    RETURNS INT
    COMMENT 'Internal. Description: the offset (from 0) of the first byte where in_a and in_b differ: the length of the
shorter one when it is a prefix of the other; NULL when either is NULL.'
    DETERMINISTIC
    NO SQL
BEGIN
    DECLARE v_same INT DEFAULT 0;  -- a prefix this long is known to be equal
    DECLARE v_most INT DEFAULT LEAST(OCTET_LENGTH(in_a), OCTET_LENGTH(in_b));  -- and none longer than this can be
    DECLARE v_mid INT;
    IF in_a IS NULL OR in_b IS NULL THEN
        RETURN NULL;
    END IF;
    WHILE v_same < v_most DO
        SET v_mid = (v_same + v_most + 1) DIV 2;
        IF LEFT(in_a, v_mid) = LEFT(in_b, v_mid) THEN
            SET v_same = v_mid;
        ELSE
            SET v_most = v_mid - 1;
        END IF;
    END WHILE;
    RETURN v_same;
END
