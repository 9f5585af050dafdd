-- Inlined: installed as a block in each routine that calls it, not called (procedures/inlining.py).
-- The opening of every public routine that owns a READ COMMITTED transaction, as one call: refuse a
-- caller's open transaction (R-1), then start the routine's READ COMMITTED transaction and mark it as
-- the routine's own, so that its exit handler rolls back exactly that one. On MariaDB the probe is one
-- variable read, so a routine that is not refused pays this one nested call; elsewhere
-- _weave_transaction_open probes.
CREATE PROCEDURE _weave_transaction_begin(IN in_routine VARCHAR(64), OUT out_owned BOOLEAN)
    COMMENT 'Internal. Description: refuses IN_TRANSACTION (R-1) inside a caller''s open transaction, naming in_routine,
and CLOCK_FIXED in a session whose timestamp is set (R-2); otherwise sets out_owned = TRUE and starts a READ
COMMITTED transaction: the routine''s own.'
    NO SQL
BEGIN
    IF VERSION() LIKE '%MariaDB%' THEN
        IF @@in_transaction = 1 THEN
            CALL _weave_transaction_own(in_routine);
        END IF;
    ELSE
        CALL _weave_transaction_own(in_routine);  -- MySQL has no @@in_transaction: probed there by a savepoint
    END IF;
    CALL _weave_clock_own();
    SET out_owned = TRUE;
    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
    START TRANSACTION;
END
