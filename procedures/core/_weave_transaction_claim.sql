-- The opening of every public routine that owns a transaction at the session's own isolation level, as
-- one call: refuse a caller's open transaction (R-1), and only then mark the transaction it starts as the
-- routine's own, so that its exit handler rolls back exactly that one. When the refusal is raised
-- out_owned stays unset, nothing is started, and the caller's transaction is left exactly as it was.
CREATE PROCEDURE _weave_transaction_claim(IN in_routine VARCHAR(64), OUT out_owned BOOLEAN)
    COMMENT 'Internal. Description: refuses IN_TRANSACTION (R-1) inside a caller''s open transaction, naming in_routine,
and CLOCK_FIXED in a session whose timestamp is set (R-2); otherwise sets out_owned = TRUE and starts a transaction:
the routine''s own.'
    NO SQL
BEGIN
    CALL _weave_transaction_own(in_routine);
    CALL _weave_clock_own();
    SET out_owned = TRUE;
    START TRANSACTION;
END
