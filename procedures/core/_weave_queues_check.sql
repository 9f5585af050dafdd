-- Inlined: installed as a block in each routine that calls it, not called (procedures/inlining.py).
-- The refusal of a credential's queues (S-2): a decision about queues the credential does not hold is FORBIDDEN,
-- naming the first of them. The queues are those of an instance's pinned definition, of a definition published,
-- of a credential created, disabled or enabled, or a queue whose capacity is set. Inlined: the authorisation of every
-- decision asks it for a credential restricted to some queues, without a nested call.
CREATE PROCEDURE _weave_queues_check(
        IN in_queues  VARCHAR(4096),
        IN in_allowed VARCHAR(2048))
    COMMENT 'Internal. Description: raises 50002 FORBIDDEN when in_allowed (a credential''s comma list, or *) does not
hold every queue of in_queues (a comma list, or *; NULL or empty = none).
Errors: 50002 FORBIDDEN.'
    NO SQL
BEGIN
    DECLARE v_queue VARCHAR(64) DEFAULT _weave_queue_refused(in_queues, in_allowed);
    IF v_queue IS NOT NULL THEN
        CALL _weave_raise(50002, CONCAT('FORBIDDEN: queue not allowed: ', v_queue));
    END IF;
END
