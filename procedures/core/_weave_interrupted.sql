-- A read whose subquery came back empty where it cannot be, said from inside the statement that made it: written as
-- COALESCE((SELECT ...), _weave_interrupted('...')), it raises only when the subquery gave no value. A KILL QUERY
-- that lands in a subquery of a select list leaves it so, with no error, and the server forgets the kill
-- (MariaDB 10.11; see _weave_root_advance); where no variable holds the value for a check after the statement
-- (an aggregate over many rows), this is where it is seen.
CREATE FUNCTION _weave_interrupted(in_what VARCHAR(64))
    RETURNS BOOLEAN
    COMMENT 'Internal. Description: raises 50016 INTERRUPTED naming in_what (what came back empty); never returns.'
    DETERMINISTIC
    NO SQL
BEGIN
    CALL _weave_raise(50016, CONCAT('INTERRUPTED: ', in_what, ' came back empty; nothing is changed'));
    RETURN NULL;
END
