-- The engine's only clock (R-2): server UTC with microseconds, plus the test offset of a --test-clock
-- install (0 in production). A procedure with an OUT parameter rather than a function, because MySQL 8
-- with binary logging refuses CREATE FUNCTION without log_bin_trust_function_creators. The scan, the idle
-- probe and the candidate opening spell the same expression inline, to save a nested CALL on the hottest
-- paths; a contract test keeps every reading of the clock this one expression.
CREATE PROCEDURE _weave_now(OUT out_now DATETIME(6))
    COMMENT 'Internal. Description: reads the database clock once (R-2).
Parameters: out_now - current engine time, UTC, microseconds.'
    READS SQL DATA
BEGIN
    SELECT UTC_TIMESTAMP(6) + INTERVAL clock_offset_us MICROSECOND INTO out_now
      FROM weave_install WHERE id = 1;
END
