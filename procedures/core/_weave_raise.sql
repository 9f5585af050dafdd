-- One place that raises a stable error: SQLSTATE 45000, a documented errno, a message that starts
-- with the stable code. MESSAGE_TEXT is capped at 128 characters on MySQL, hence the LEFT().
CREATE PROCEDURE _weave_raise(IN in_errno INT, IN in_message VARCHAR(512))
    COMMENT 'Internal. Description: raises SQLSTATE 45000 with in_errno and in_message (CODE: detail).'
    NO SQL
BEGIN
    DECLARE v_message VARCHAR(128) DEFAULT LEFT(in_message, 128);
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = in_errno, MESSAGE_TEXT = v_message;
END
