-- Inlined: installed as a block in each routine that calls it, not called (procedures/inlining.py).
-- The engine's clock is the server's (R-2), read in the caller's session: and a session may fix its own clock
-- with SET timestamp, which needs no privilege. UTC_TIMESTAMP() and NOW() follow it; SYSDATE() reads the server's
-- clock whatever the session set. So a decision in such a session would be dated, and decided, at a time the
-- caller chose: a signal accepted after its deadline, or refused LATE days before it. Every routine that decides
-- refuses it instead, before it reads or writes anything. The two clocks are compared in the session's own zone,
-- which both are read in: a caller's fixed time passes only when it stands for the same local time as the real one
-- (within a second), which in a zone that moves its clocks back is the hour read twice, one hour off at most.
CREATE PROCEDURE _weave_clock_own()
    COMMENT 'Internal. Description: refuses CLOCK_FIXED when the session''s timestamp is set (SET timestamp) more
than a second away from the server''s clock: the engine decides by the server''s clock only (R-2).'
    NO SQL
BEGIN
    -- NOW(6) is the time this instruction started, or the session's fixed time; SYSDATE(6) the server's clock.
    IF ABS(TIMESTAMPDIFF(MICROSECOND, NOW(6), SYSDATE(6))) > 1000000 THEN
        CALL _weave_raise(50017, 'CLOCK_FIXED: the session''s timestamp is set; the engine reads the server''s clock (SET timestamp = DEFAULT)');
    END IF;
END
