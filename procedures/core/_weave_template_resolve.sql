-- Applies a compiled template (orchestrator.definitions): start from the skeleton, then put the value
-- found at each binding's source path into its target path. Runs once, at activation; the result is
-- frozen (R-7, P-5). A source path that finds nothing, spelled with characters or with escapes, resolves to
-- JSON null. A function: it reads no table, so resolving costs its caller no statement.
CREATE FUNCTION _weave_template_resolve(
        in_template LONGTEXT,
        in_context  LONGTEXT)
    RETURNS LONGTEXT
    COMMENT 'Internal. Description: resolves a compiled expression template against a context; NULL template = NULL.'
    DETERMINISTIC
    NO SQL
BEGIN
    DECLARE v_count INT;
    DECLARE v_i INT DEFAULT 0;
    DECLARE v_target VARCHAR(2048);
    DECLARE v_source VARCHAR(2048);
    DECLARE v_value LONGTEXT;
    DECLARE v_out LONGTEXT;
    IF in_template IS NULL OR JSON_TYPE(JSON_EXTRACT(in_template, '$')) = 'NULL' THEN
        SET v_out = NULL;
    ELSE
        SET v_out = JSON_EXTRACT(in_template, '$.skeleton');
        SET v_count = COALESCE(JSON_LENGTH(in_template, '$.bindings'), 0);
        WHILE v_i < v_count DO
            SET v_target = JSON_UNQUOTE(JSON_EXTRACT(in_template, CONCAT('$.bindings[', v_i, '][0]')));
            SET v_source = JSON_UNQUOTE(JSON_EXTRACT(in_template, CONCAT('$.bindings[', v_i, '][1]')));
            SET v_value = JSON_EXTRACT(in_context, v_source);
            IF v_value IS NULL AND CHAR_LENGTH(v_source) < OCTET_LENGTH(v_source) THEN
                -- A key outside ASCII that the document spells with \u escapes (a signal payload kept as it was
                -- sent, from an encoder that keeps to ASCII) is found only through the same escapes.
                SET v_value = COALESCE(JSON_EXTRACT(in_context, _weave_json_path_escaped(v_source, FALSE)),
                                       JSON_EXTRACT(in_context, _weave_json_path_escaped(v_source, TRUE)));
            END IF;
            SET v_value = COALESCE(v_value, 'null');
            IF v_target = '$' THEN
                SET v_out = v_value;
            ELSE
                SET v_out = JSON_SET(v_out, v_target, JSON_EXTRACT(v_value, '$'));
            END IF;
            SET v_i = v_i + 1;
        END WHILE;
    END IF;
    RETURN v_out;
END
