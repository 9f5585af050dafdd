-- A credential acts only on its queues (S-2): every queue a definition uses must be in the credential's list,
-- unless that list is * (every queue). Matched exactly (FIND_IN_SET), as the lists are stored: comma lists of
-- names, without spaces. A list of queues asked for as * (a credential for every queue) is granted only by *.
CREATE FUNCTION _weave_queue_refused(
        in_queues  VARCHAR(4096),
        in_allowed VARCHAR(2048))
    RETURNS VARCHAR(64)
    COMMENT 'Internal. Description: the first queue of in_queues (a comma list, or *; NULL or empty = none) that
in_allowed (a credential''s comma list, or *) does not hold, or NULL when it holds them all.'
    DETERMINISTIC
    NO SQL
BEGIN
    DECLARE v_rest VARCHAR(4096) DEFAULT COALESCE(in_queues, '');
    DECLARE v_queue VARCHAR(64);
    IF in_allowed = '*' THEN
        RETURN NULL;
    END IF;
    WHILE v_rest <> '' DO
        SET v_queue = SUBSTRING_INDEX(v_rest, ',', 1);
        SET v_rest = IF(LOCATE(',', v_rest) > 0, SUBSTRING(v_rest, LOCATE(',', v_rest) + 1), '');
        IF FIND_IN_SET(v_queue, in_allowed) = 0 THEN
            RETURN v_queue;
        END IF;
    END WHILE;
    RETURN NULL;
END
