-- Applies a compiled template (orchestrator.definitions): start from the skeleton, then put the value
-- found at each binding's source path into its target path. Runs once, at activation; the result is
-- frozen (R-7, P-5). A source path that finds nothing resolves to JSON null.
CREATE PROCEDURE _weave_template_resolve(
        IN  in_template LONGTEXT,
        IN  in_context  LONGTEXT,
        OUT out_value   LONGTEXT)
    COMMENT 'Internal. Description: resolves a compiled expression template against a context; NULL template = NULL.'
    NO SQL
BEGIN
    DECLARE v_count INT;
    DECLARE v_i INT DEFAULT 0;
    DECLARE v_target VARCHAR(2048);
    DECLARE v_source VARCHAR(2048);
    DECLARE v_value LONGTEXT;
    IF in_template IS NULL OR JSON_TYPE(JSON_EXTRACT(in_template, '$')) = 'NULL' THEN
        SET out_value = NULL;
    ELSE
        SET out_value = JSON_EXTRACT(in_template, '$.skeleton');
        SET v_count = COALESCE(JSON_LENGTH(in_template, '$.bindings'), 0);
        WHILE v_i < v_count DO
            SET v_target = JSON_UNQUOTE(JSON_EXTRACT(in_template, CONCAT('$.bindings[', v_i, '][0]')));
            SET v_source = JSON_UNQUOTE(JSON_EXTRACT(in_template, CONCAT('$.bindings[', v_i, '][1]')));
            SET v_value = COALESCE(JSON_EXTRACT(in_context, v_source), 'null');
            IF v_target = '$' THEN
                SET out_value = v_value;
            ELSE
                SET out_value = JSON_SET(out_value, v_target, JSON_EXTRACT(v_value, '$'));
            END IF;
            SET v_i = v_i + 1;
        END WHILE;
    END IF;
END
