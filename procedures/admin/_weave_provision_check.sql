-- Apps and queues are provisioned alike (create-or-update by name, with one bounded number): the same name
-- rule and the same bound, checked in the same order.
CREATE PROCEDURE _weave_provision_check(
        IN in_kind       VARCHAR(16),
        IN in_name       VARCHAR(200),
        IN in_limit_name VARCHAR(32),
        IN in_limit      BIGINT)
    COMMENT 'Internal. Description: checks the name of an app or queue (in_kind) and its bound in_limit (in_limit_name).
Errors: 50116 NAME_INVALID, 50121 LIMIT_INVALID.'
    NO SQL
BEGIN
    IF in_name IS NULL OR NOT (in_name REGEXP '^[A-Za-z0-9_.:-]{1,64}\\z') THEN
        CALL _weave_raise(50116, CONCAT('NAME_INVALID: ', in_kind, ' name must be 1-64 chars of A-Z a-z 0-9 _ . : -'));
    END IF;
    IF in_limit IS NULL OR in_limit < 0 OR in_limit > 1000000 THEN
        CALL _weave_raise(50121, CONCAT('LIMIT_INVALID: ', in_limit_name, ' must be 0..1000000'));
    END IF;
END
