-- GROUP_CONCAT (on both servers) and MariaDB's JSON_ARRAYAGG stop at the session's group_concat_max_len: past it a
-- list is cut short, mid-value for a JSON one (1260, and a JSON text no function can read), and a caller's session
-- may hold MySQL's 1024. A routine that builds a list raises the session's cap to what the list may need before
-- it builds it, and sets the session's own value back when it ends: IF out_cap IS NOT NULL THEN SET SESSION
-- group_concat_max_len = out_cap; END IF (also in its exit handler).
CREATE PROCEDURE _weave_concat_room(
        IN  in_bytes BIGINT UNSIGNED,
        OUT out_cap  BIGINT UNSIGNED)
    COMMENT 'Internal. Description: raises the session''s group_concat_max_len to in_bytes when it is less; out_cap is
the session''s own value to set back then, NULL when nothing changed.'
    NO SQL
BEGIN
    SET out_cap = NULL;
    IF @@group_concat_max_len < in_bytes THEN
        SET out_cap = @@group_concat_max_len;
        SET SESSION group_concat_max_len = in_bytes;
    END IF;
END
