-- MariaDB keeps an object as it was written, one key twice included, and its JSON functions read the first of the
-- two; Python's reader, and so every worker, SDK and HTTP answer, keeps the last (MySQL's JSON type keeps the last
-- as well). A caller's document with a key twice would be one value to the engine (a mutex key, a correlation, a
-- template's path) and another to the handler it reaches, so every JSON value the engine keeps from a caller passes
-- this check (_weave_json_strict), as the HTTP API refuses such a body before it reaches the engine.
--
-- One object of a few scalars, the usual payload, has its keys counted (JSON_KEYS counts a key twice once, except
-- the empty key: it lists "" as often as it comes, so a text that holds "" is never counted). Otherwise
-- JSON_NORMALIZE writes each object's members sorted by key, so a key twice is two neighbours: a member followed by a
-- comma and the same key. Strings are given one spelling first where a key holds an escape ("a" and "\u0061" are
-- one key), in a document of up to 16 KiB; past it, where that costs about 1.6 us a byte, each object of up to 2048
-- members that holds an escape has its keys read decoded, one by one, besides, and a document with a wider object
-- that holds one is given one spelling after all (once, then walked again). One pattern finds such neighbours in
-- the whole text, matching each member's value whole; its work grows with the text times its depth, so past 16 KiB,
-- or when the server's match limit stops it, the objects are taken one by one instead (a recursive walk of the
-- document), each by a pattern over its own members only.
CREATE FUNCTION _weave_json_keys_unique(in_doc LONGTEXT)
    RETURNS BOOLEAN
    COMMENT 'Internal. Description: TRUE when no object of in_doc (valid JSON) holds one key twice (escapes decoded);
FALSE when one does, or when the check could not finish. On MySQL always TRUE: its reader keeps the last of two keys,
as Python''s does.'
    DETERMINISTIC
    READS SQL DATA
BEGIN
    DECLARE v_doc LONGTEXT;
    DECLARE v_escaped BOOLEAN;  -- a key is spelled with an escape
    DECLARE v_twice BOOLEAN DEFAULT NULL;
    DECLARE v_depth INT;  -- the deepest level of containers the walk reached (the document itself is level 1)
    DECLARE v_as_written BOOLEAN;  -- keys with an escape left as written (a larger document): decoded key by key
    DECLARE v_wide BOOLEAN;  -- the walk met an object too wide to read its keys decoded that holds an escape
    -- The grammar both patterns below match members with: a string whole (s), and a value whole (v).
    DECLARE v_grammar VARCHAR(255) DEFAULT CONCAT('(?(DEFINE)(?<s>"(?:[^"\\\\]++|\\\\.)*+")',
        '(?<v>(?&s)|[^,{}\\[\\]"]++|\\{(?:(?&s):(?&v)(?:,(?&s):(?&v))*+)?\\}|\\[(?:(?&v)(?:,(?&v))*+)?\\]))');
    DECLARE CONTINUE HANDLER FOR 1139 SET v_twice = NULL;  -- the pattern gave up (the server's match limit)
    IF in_doc IS NULL THEN
        RETURN FALSE;
    ELSEIF LOCATE('{', in_doc) = 0 OR LOCATE(',', in_doc) = 0 OR VERSION() NOT LIKE '%MariaDB%' THEN
        RETURN TRUE;  -- no object, or none of two members
    END IF;
    SET v_escaped = _weave_json_key_escaped(in_doc);
    IF NOT v_escaped AND LOCATE('{', in_doc, 2) = 0 AND LOCATE('[', in_doc) = 0 AND LOCATE('""', in_doc) = 0
       AND JSON_LENGTH(in_doc) <= 64 THEN
        RETURN JSON_LENGTH(in_doc) = JSON_LENGTH(JSON_KEYS(in_doc));  -- one object of scalars: a key twice counts once
    END IF;
    -- One spelling for every string costs about 1.6 us a byte where escapes are dense (a Python encoder's default for
    -- text beyond ASCII), so a larger document keeps its text as written, and each of its objects that holds an escape
    -- has its keys read decoded instead (below): JSON_TABLE decodes what it reads, and the keys are a small part.
    SET v_as_written = v_escaped AND LENGTH(in_doc) > 16384;
    SET v_doc = JSON_NORMALIZE(IF(v_escaped AND NOT v_as_written, _weave_json_escapes_canonical(in_doc), in_doc));
    -- The pattern compares keys as spelled: never on a text kept as written (whitespace taken out, its normal form may
    -- be 16 KiB or less with keys in two spellings).
    IF NOT v_as_written AND LENGTH(v_doc) <= 16384 THEN
        -- Tokens whole (strings as one), and at each { or , a member whose next neighbour has its key.
        SET v_twice = v_doc REGEXP CONCAT('^(?:[^",{]++|"(?:[^"\\\\]++|\\\\.)*+"|[,{])*?',
                                          '[{,]("(?:[^"\\\\]++|\\\\.)*+"):(?&v),\\1:',
                                          v_grammar);
        IF v_twice IS NOT NULL THEN
            RETURN NOT v_twice;
        END IF;
    END IF;
    -- The containers of the document, each once; an object of a few members is checked by counting its keys (a
    -- key twice is counted once), a longer one by the pattern over its own members (counting is quadratic there),
    -- and so is one that holds an escape (JSON_KEYS counts a key with an escaped quote twice when it comes twice) or
    -- an empty string (JSON_KEYS counts the empty key twice when it comes twice).
    walk: LOOP
        WITH RECURSIVE node(v, depth) AS (
            SELECT v_doc, 1
            UNION ALL
            SELECT m.v, node.depth + 1 FROM node, JSON_TABLE(node.v, '$.*' COLUMNS (v JSON PATH '$')) m
             WHERE node.v LIKE '{%' AND (m.v LIKE '{%' OR m.v LIKE '[%')
            UNION ALL
            SELECT e.v, node.depth + 1 FROM node, JSON_TABLE(node.v, '$[*]' COLUMNS (v JSON PATH '$')) e
             WHERE node.v LIKE '[%' AND (e.v LIKE '{%' OR e.v LIKE '[%'))
        SELECT COALESCE(MAX(IF(v NOT LIKE '{%,%', NULL,
                            IF(JSON_LENGTH(v) <= 64 AND LOCATE(CHAR(92 USING utf8mb4), v) = 0 AND LOCATE('""', v) = 0,
                               JSON_LENGTH(v) <> JSON_LENGTH(JSON_KEYS(v)),
                               v REGEXP CONCAT('^\\{(?:(?&s):(?&v),)*?((?&s)):(?&v),\\1:',
                                               v_grammar)
                               -- keys as written: two spellings of one key are one key once decoded ("a", "\u0061");
                               -- JSON_KEYS takes time quadratic in an object's members, so past 2048 of them keys are
                               -- compared as written only (one encoder spells one key one way)
                               OR v_as_written AND LOCATE(CHAR(92 USING utf8mb4), v) > 0 AND JSON_LENGTH(v) <= 2048
                                  -- (an answer a KILL QUERY took away is the interrupt it is: such a subquery of
                                  -- a select list comes back with no value and no error, see _weave_interrupted)
                                  AND COALESCE((SELECT COUNT(*) <> COUNT(DISTINCT HEX(k.name))
                                                  FROM JSON_TABLE(JSON_KEYS(v), '$[*]'
                                                                  COLUMNS (name LONGTEXT PATH '$')) AS k),
                                               _weave_interrupted('a count of an object''s keys'))))),
                        FALSE), MAX(depth),
               -- an object past 2048 members whose keys may hold an escape: they were compared as written only
               COALESCE(MAX(v_as_written AND v LIKE '{%,%' AND LOCATE(CHAR(92 USING utf8mb4), v) > 0
                            AND JSON_LENGTH(v) > 2048), FALSE)
          INTO v_twice, v_depth, v_wide
          FROM node;
        -- Then the document is given one spelling after all and walked again (once): about 0.6 s for 1 MiB of dense
        -- escapes, paid by this shape only; as written, {"approved": false, ..., "\u0061pproved": true} would pass.
        IF v_wide AND NOT COALESCE(v_twice, FALSE) THEN  -- v_wide: only where the text is kept as written
            SET v_as_written = FALSE;
            SET v_doc = JSON_NORMALIZE(_weave_json_escapes_canonical(in_doc));
            ITERATE walk;
        END IF;
        LEAVE walk;
    END LOOP;
    -- The session's max_recursive_iterations ends a recursive query early, and silently: the objects below the level
    -- it reached were never read. A container with a member is at most one level above the document's depth.
    IF v_depth < JSON_DEPTH(v_doc) - 1 THEN
        RETURN FALSE;
    END IF;
    RETURN COALESCE(NOT v_twice, FALSE);
END
