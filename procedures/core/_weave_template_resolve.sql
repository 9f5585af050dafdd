-- Applies a compiled template (procedures.definitions): start from the skeleton, then put the value found at each
-- binding's source path into its target path. Runs at activation; the result is frozen (R-7, P-5). A source
-- path that finds nothing resolves to JSON null. A function: it reads no table, so resolving costs its caller no
-- statement.
--
-- A document is kept as it was written, and MariaDB's JSON_EXTRACT finds a key only as the document spells it: a
-- key written with escapes of characters that need none ("\u0061mount", "psp\/ref" from PHP's json_encode, or
-- "\u5ba1\u6279" from any encoder that keeps to ASCII) was not found through its characters, and its value was
-- frozen as null. A path that finds nothing in a document with an escape in a key is therefore read again in the
-- document with every escape in one spelling (_weave_json_escapes_canonical), made once per call and only then,
-- in which each such key is written as its characters.
--
-- The context of 04-polls, {"input": ..., "steps": {<key>: {"output": ...}}}, is never built as one document:
-- that would nest the input one level and each output three deeper than they are kept, and the server reads no
-- JSON deeper than 32 levels, so a shallow read of a deep value would fail. Each source path is read where its
-- value is kept instead: "$.input<rest>" in the input, "$.steps.<key>.output<rest>" in that step's output (the
-- key quoted when it is not a plain name, as procedures.definitions.paths writes it), both at "$<rest>".
--
-- One call applies the bindings that read one document: the input (in_key NULL) or one step's output, on the
-- template as the calls before left it (in_base; NULL for the skeleton). The caller hands each document over once,
-- as it reads it: a join reading a field of each of many large outputs parses each output once, not all of them
-- for every binding. A binding whose document is never handed over (its step has not SUCCEEDED) keeps the
-- skeleton's null at its place.
CREATE FUNCTION _weave_template_resolve(
        in_template LONGTEXT,
        in_base     LONGTEXT,
        in_key      VARCHAR(64),
        in_document LONGTEXT)
    RETURNS LONGTEXT
    COMMENT 'Internal. Description: applies to in_base (NULL: the template''s skeleton) the bindings of a compiled
expression template that read in_document: the instance''s input when in_key is NULL, else the output of step in_key.
NULL template = NULL.'
    DETERMINISTIC
    NO SQL
BEGIN
    DECLARE v_count INT;
    DECLARE v_i INT DEFAULT 0;
    DECLARE v_target VARCHAR(2048);
    DECLARE v_source VARCHAR(2048);
    DECLARE v_key VARCHAR(64);
    DECLARE v_path VARCHAR(2048);  -- the source path within the document that keeps its value
    DECLARE v_value LONGTEXT;
    DECLARE v_out LONGTEXT;
    DECLARE v_binding LONGTEXT;  -- [target, source] or [target, source, the places that must hold arrays]
    DECLARE v_arrays LONGTEXT;  -- the places a source indexes, which must hold arrays
    DECLARE v_at VARCHAR(2048);
    DECLARE v_j INT;
    DECLARE v_escaped BOOLEAN;  -- whether a key of in_document holds an escape, looked at when a path first misses
    DECLARE v_canonical LONGTEXT;  -- in_document with its escapes in one spelling, made only then
    IF in_template IS NULL OR JSON_TYPE(JSON_EXTRACT(in_template, '$')) = 'NULL' THEN
        SET v_out = NULL;
    ELSE
        SET v_out = COALESCE(in_base, JSON_EXTRACT(in_template, '$.skeleton'));
        -- None of its bindings can read a document its text never names (a step key is plain ASCII, as its
        -- sources write it): the template is left as it is without looking at them.
        SET v_count = IF(LOCATE(IF(in_key IS NULL, '"$.input', in_key), in_template) = 0, 0,
                         COALESCE(JSON_LENGTH(in_template, '$.bindings'), 0));
        bindings: WHILE v_i < v_count DO
            SET v_binding = JSON_EXTRACT(in_template, CONCAT('$.bindings[', v_i, ']'));  -- the template read once each
            SET v_target = JSON_UNQUOTE(JSON_EXTRACT(v_binding, '$[0]')),
                v_source = JSON_UNQUOTE(JSON_EXTRACT(v_binding, '$[1]')),
                v_arrays = JSON_EXTRACT(v_binding, '$[2]');
            IF v_source LIKE '$.input%' THEN
                SET v_key = NULL, v_path = CONCAT('$', SUBSTRING(v_source, 8));
            ELSE
                -- '$.steps.' (8 characters), the key, plain up to the next '.' or quoted, '.output' (7), the rest.
                SET v_key = IF(SUBSTRING(v_source, 9, 1) = '"', SUBSTRING_INDEX(SUBSTRING(v_source, 10), '"', 1),
                               SUBSTRING_INDEX(SUBSTRING(v_source, 9), '.', 1));
                SET v_path = CONCAT('$', SUBSTRING(v_source, 16 + CHAR_LENGTH(v_key)
                                                             + 2 * (SUBSTRING(v_source, 9, 1) = '"')));
            END IF;
            IF NOT (v_key <=> in_key) THEN
                SET v_i = v_i + 1;
                ITERATE bindings;  -- another document's: applied by the call that hands that one over
            END IF;
            SET v_value = JSON_EXTRACT(in_document, v_path);
            IF v_value IS NULL AND v_escaped IS NULL THEN
                -- (A document whose keys hold no escape, however many its values hold, is not written again for a
                -- path it lacks.)
                SET v_escaped = _weave_json_key_escaped(in_document);
                SET v_canonical = IF(v_escaped, _weave_json_escapes_canonical(in_document), NULL);
            END IF;
            IF v_value IS NULL AND v_escaped THEN
                SET v_value = JSON_EXTRACT(v_canonical, v_path);
            END IF;
            -- The server's paths are lax: an index of a value that is no array ('$[0]' of "abc") finds the value
            -- itself. A source that reads an item finds something only where each place it indexes holds an array
            -- (the binding's third member names them; bindings compiled before it have none, and stay lax).
            SET v_j = 0;
            WHILE v_value IS NOT NULL AND v_j < COALESCE(JSON_LENGTH(v_arrays), 0) DO
                SET v_at = JSON_UNQUOTE(JSON_EXTRACT(v_arrays, CONCAT('$[', v_j, ']'))), v_j = v_j + 1;
                IF COALESCE(JSON_TYPE(JSON_EXTRACT(in_document, v_at)),
                            IF(v_escaped, JSON_TYPE(JSON_EXTRACT(v_canonical, v_at)), NULL), '') <> 'ARRAY' THEN
                    SET v_value = NULL;
                END IF;
            END WHILE;
            SET v_value = COALESCE(v_value, 'null');
            IF v_target = '$' THEN
                SET v_out = v_value;
            ELSE
                SET v_out = JSON_SET(v_out, v_target, JSON_EXTRACT(v_value, '$'));
            END IF;
            SET v_i = v_i + 1;
        END WHILE bindings;
    END IF;
    RETURN v_out;
END
