-- The page size of the lists that take 1..1000 a page, 100 unless asked (definitions, apps, queues, credentials,
-- an instance's signals): one rule for all.
CREATE FUNCTION _weave_page_limit(in_limit INT)
    RETURNS INT
    COMMENT 'Internal. Description: in_limit as a list''s page size: NULL is 100, 1..1000 itself.
Errors: 50121 LIMIT_INVALID (outside 1..1000).'
    NO SQL
    DETERMINISTIC
BEGIN
    IF in_limit < 1 OR in_limit > 1000 THEN
        CALL _weave_raise(50121, 'LIMIT_INVALID: limit must be 1..1000');
    END IF;
    RETURN COALESCE(in_limit, 100);
END
