-- MariaDB's JSON_VALID also takes text that no JSON reader takes back: numbers such as 1. 1.e5 1e+ or a lone - in an
-- array, and escapes such as \x. Every JSON value the engine keeps from a caller (an instance's input, a signal's
-- payload, a task's result, an operator's output) passes this pattern as well, which walks the text, strings whole,
-- and lets a - or . through only before a digit and an e only before an exponent or at the end of true and false.
CREATE FUNCTION _weave_json_strict(in_text LONGTEXT)
    RETURNS BOOLEAN
    COMMENT 'Internal. Description: TRUE when in_text is one JSON value that every JSON reader takes back; FALSE
otherwise, NULL included.'
    DETERMINISTIC
    NO SQL
BEGIN
    RETURN COALESCE(JSON_VALID(in_text) AND in_text REGEXP
                    '^(?:[^"\\\\.eE-]++|"(?:[^"\\\\]++|\\\\["\\\\/bfnrtu])*+"'
                    '|[.-](?=[0-9])|[eE](?=[-+]?[0-9])|(?<=tru|fals)e)*+\\z', FALSE);
END
