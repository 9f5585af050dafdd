CREATE PROCEDURE pulse_task_expire(IN in_id BIGINT UNSIGNED)
    COMMENT 'Description: placeholder; advances one candidate of its class.
Result set: outcome.'
    READS SQL DATA
BEGIN
    SELECT 'NOOP' AS outcome;
END
