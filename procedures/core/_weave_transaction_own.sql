-- A public routine that owns its transaction must never run inside a caller's: its START TRANSACTION
-- would silently commit the caller's pending work, and its error handler's ROLLBACK would destroy it.
-- Called first, before the routine reads any table (under autocommit off, a read opens a transaction); the
-- hot routines' opener, _weave_transaction_begin, probes by itself and calls this only to refuse.
CREATE PROCEDURE _weave_transaction_own(IN in_routine VARCHAR(64))
    COMMENT 'Internal. Description: refuses IN_TRANSACTION (R-1) when the session is inside an open transaction, naming in_routine; the caller''s transaction is left exactly as it was.'
    NO SQL
BEGIN
    DECLARE v_open BOOLEAN;
    CALL _weave_transaction_open(v_open);
    IF v_open THEN
        IF in_routine = 'weave_signal_send' THEN
            CALL _weave_raise(50013, 'IN_TRANSACTION: weave_signal_send owns its transaction; inside yours, call weave_signal_send_in_tx');
        END IF;
        CALL _weave_raise(50013, CONCAT('IN_TRANSACTION: ', in_routine, ' owns its transaction; commit or roll back yours first'));
    END IF;
END
