-- Whether the session is inside an open transaction. MariaDB says so in @@in_transaction; MySQL has no
-- such variable, so there a savepoint probes it: outside a transaction a savepoint is discarded at once
-- and ROLLBACK TO SAVEPOINT fails with 1305 (docs/portability.md). The branch not taken never runs.
CREATE PROCEDURE _weave_transaction_open(OUT out_open BOOLEAN)
    COMMENT 'Internal. Description: out_open = TRUE when the session is inside an open transaction (R-1).'
    NO SQL
BEGIN
    IF VERSION() LIKE '%MariaDB%' THEN
        SET out_open = (@@in_transaction = 1);
    ELSE
        BEGIN
            DECLARE CONTINUE HANDLER FOR 1305 SET out_open = FALSE;
            SET out_open = TRUE;
            SAVEPOINT weave_transaction_probe;
            ROLLBACK TO SAVEPOINT weave_transaction_probe;
        END;
    END IF;
END
