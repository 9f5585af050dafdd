-- Inlined: installed as a block in each routine that calls it, not called (procedures/inlining.py).
-- The opening of a read that answers from one snapshot (an instance with all its parts, the counters of /metrics):
-- inside a caller's open transaction it reads in that transaction and never ends it (R-1); otherwise it starts a
-- read transaction of its own, REPEATABLE READ whatever the session's level (under READ COMMITTED each read would
-- see a later state, under READ UNCOMMITTED rows no one has committed), and marks it as its own.
CREATE PROCEDURE _weave_snapshot_open(OUT out_owned BOOLEAN)
    COMMENT 'Internal. Description: out_owned = FALSE inside a caller''s open transaction (read in it); otherwise TRUE,
with a consistent-snapshot REPEATABLE READ transaction started: the routine''s own, to commit.'
    NO SQL
BEGIN
    DECLARE v_joined BOOLEAN;
    CALL _weave_transaction_open(v_joined);
    SET out_owned = NOT v_joined;
    IF out_owned THEN
        SET TRANSACTION ISOLATION LEVEL REPEATABLE READ;
        START TRANSACTION WITH CONSISTENT SNAPSHOT;
    END IF;
END
