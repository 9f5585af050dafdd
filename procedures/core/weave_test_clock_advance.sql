-- Moves the test clock forward. It exists in every install so that the routine set is the same,
-- but only a --test-clock install accepts it: a production clock is never moved (R-2).
CREATE PROCEDURE weave_test_clock_advance(IN in_ms BIGINT)
    COMMENT 'Description: advances the engine test clock by in_ms milliseconds (R-2); the offset never shrinks.
Parameters: in_ms - milliseconds to add, >= 0 (the engine time stays before 9999-12-31).
Result set: now_at - the engine time after the move.
Errors: 50010 TEST_CLOCK_DISABLED on a production install; 50100 INVALID_ARGUMENT for a negative or NULL in_ms,
or one that would move the clock past 9999-12-31.
Rules: R-2.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_mode VARCHAR(16);
    DECLARE v_now DATETIME(6);
    DECLARE v_tx BOOLEAN DEFAULT FALSE;  -- TRUE once this routine has started its own transaction
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN IF v_tx THEN ROLLBACK; END IF; RESIGNAL; END;
    CALL _weave_transaction_claim('weave_test_clock_advance', v_tx);
    SELECT clock_mode INTO v_mode FROM weave_install WHERE id = 1 FOR UPDATE;
    IF v_mode IS NULL OR v_mode <> 'TEST' THEN
        CALL _weave_raise(50010, 'TEST_CLOCK_DISABLED: this is a production install; the clock cannot be moved');
    END IF;
    IF in_ms IS NULL OR in_ms < 0 THEN
        CALL _weave_raise(50100, 'INVALID_ARGUMENT: in_ms must be >= 0; the test clock never goes back');
    END IF;
    -- The room left is compared as a span: past the last representable time every reading of the clock would fail
    -- (1441), and the product overflows before that (1690).
    CALL _weave_now(v_now);
    IF in_ms > TIMESTAMPDIFF(MICROSECOND, v_now, TIMESTAMP'9999-12-31 00:00:00') DIV 1000 THEN
        CALL _weave_raise(50100, 'INVALID_ARGUMENT: in_ms would move the test clock past 9999-12-31');
    END IF;
    UPDATE weave_install SET clock_offset_us = clock_offset_us + in_ms * 1000 WHERE id = 1;
    COMMIT;
    SELECT v_now + INTERVAL in_ms * 1000 MICROSECOND AS now_at;
END
