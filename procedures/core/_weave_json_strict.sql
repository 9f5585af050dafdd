-- MariaDB's JSON_VALID also takes text that no JSON reader takes back: numbers such as 1. 1.e5 1e+ or a lone - in an
-- array, and escapes such as \x. Every JSON value the engine keeps from a caller (an instance's input, a signal's
-- payload, a task's result, an operator's output) passes this pattern as well, which walks the text, strings whole,
-- and lets a - or . through only before a digit and an e only before an exponent or at the end of true and false.
-- Nor does any object of it hold one key twice, which MariaDB and Python would read as two different values
-- (_weave_json_keys_unique), nor any number that Python reads as infinity (_weave_json_numbers_finite). The usual
-- document is answered without either function: a call costs more than the check it makes there.
CREATE FUNCTION _weave_json_strict(in_text LONGTEXT)
    RETURNS BOOLEAN
    COMMENT 'Internal. Description: TRUE when in_text is one JSON value that every JSON reader takes back, and reads
as one value (no object holding a key twice, no number beyond a double''s range); FALSE otherwise, NULL included.'
    DETERMINISTIC
    READS SQL DATA
BEGIN
    RETURN COALESCE(JSON_VALID(in_text) AND in_text REGEXP
                    '^(?:[^"\\\\.eE-]++|"(?:[^"\\\\]++|\\\\["\\\\/bfnrtu])*+"'
                    '|[.-](?=[0-9])|[eE](?=[-+]?[0-9])|(?<=tru|fals)e)*+\\z'
                    -- One object of at most 64 scalars, with no escape and no empty string, the usual input, payload
                    -- and result, has its keys counted here (JSON_KEYS counts a key twice once); another document
                    -- is read by the function.
                    AND IF(in_text REGEXP '^\\{(?:[^{\\[\\\\"]++|"(?!"))*+\\z' AND JSON_LENGTH(in_text) <= 64,
                           JSON_LENGTH(in_text) = JSON_LENGTH(JSON_KEYS(in_text)), _weave_json_keys_unique(in_text))
                    -- Only a text with 100 digits in a row, or an e before a positive exponent of three digits, can
                    -- hold a number that large (a string may hold either: the function reads the text as JSON).
                    AND (in_text NOT REGEXP '[0-9]{100}|[eE]\\+?0*+[1-9][0-9]{2}'
                         OR _weave_json_numbers_finite(in_text)), FALSE);
END
