CREATE PROCEDURE _weave_step_next_ready(
        IN  in_instance_id   BIGINT UNSIGNED,
        IN  in_definition_id BIGINT UNSIGNED,
        OUT out_step_id      BIGINT UNSIGNED)
    COMMENT 'Internal. Description: the first PENDING step (by position) whose after-steps are all SUCCEEDED, or NULL.'
    READS SQL DATA
BEGIN
    SET out_step_id = NULL;
    SELECT s.id INTO out_step_id FROM weave_steps s
     WHERE s.instance_id = in_instance_id AND s.status = 'PENDING'
       AND NOT EXISTS (SELECT 1 FROM weave_definition_edges e
                         JOIN weave_steps p ON p.instance_id = s.instance_id AND p.step_key = e.after_key
                        WHERE e.definition_id = in_definition_id AND e.step_key = s.step_key
                          AND p.status <> 'SUCCEEDED')
     ORDER BY s.position LIMIT 1;
END
