CREATE PROCEDURE weave_clock_now()
    COMMENT 'Description: the engine time (R-2), test offset included.
Result set: now_at, clock_mode.
Rules: R-2.'
    READS SQL DATA
BEGIN
    DECLARE v_now DATETIME(6);
    CALL _weave_now(v_now);
    SELECT v_now AS now_at, clock_mode FROM weave_install WHERE id = 1;
END
