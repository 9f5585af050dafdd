-- The opening of every public routine that owns a READ COMMITTED transaction, as one call: refuse a
-- caller's open transaction (R-1), then make the transaction the routine starts next READ COMMITTED and
-- mark it as the routine's own, so that its exit handler rolls back exactly that one. The caller starts
-- it right after (or after checks that read no table). The probe is _weave_transaction_open's, spelt
-- here again so that a routine that is not refused pays one nested call, not three.
CREATE PROCEDURE _weave_transaction_begin(IN in_routine VARCHAR(64), OUT out_owned BOOLEAN)
    COMMENT 'Internal. Description: refuses IN_TRANSACTION (R-1) inside a caller''s open transaction, naming in_routine;
otherwise makes the next transaction READ COMMITTED and sets out_owned = TRUE: the transaction the routine starts
next is its own.'
    NO SQL
BEGIN
    DECLARE v_open BOOLEAN;
    IF VERSION() LIKE '%MariaDB%' THEN
        SET v_open = (@@in_transaction = 1);
    ELSE
        BEGIN
            DECLARE CONTINUE HANDLER FOR 1305 SET v_open = FALSE;
            SET v_open = TRUE;
            SAVEPOINT weave_transaction_probe;
            ROLLBACK TO SAVEPOINT weave_transaction_probe;
        END;
    END IF;
    IF v_open THEN
        CALL _weave_transaction_own(in_routine);
    END IF;
    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
    SET out_owned = TRUE;
END
