-- The document expressions are evaluated against (04-polls "Expressions"):
-- {"input": <instance input>, "steps": {<key>: {"output": ...}}} over the steps SUCCEEDED so far.
CREATE PROCEDURE _weave_instance_context(IN in_instance_id BIGINT UNSIGNED, OUT out_context LONGTEXT)
    COMMENT 'Internal. Description: builds the expression context of an instance.'
    READS SQL DATA
BEGIN
    DECLARE v_steps LONGTEXT;
    SELECT JSON_OBJECTAGG(step_key, JSON_OBJECT('output', JSON_EXTRACT(COALESCE(output, 'null'), '$')))
      INTO v_steps FROM weave_steps WHERE instance_id = in_instance_id AND status = 'SUCCEEDED';
    SELECT JSON_OBJECT('input', JSON_EXTRACT(input, '$'), 'steps', JSON_EXTRACT(COALESCE(v_steps, '{}'), '$'))
      INTO out_context FROM weave_instances WHERE id = in_instance_id;
END
