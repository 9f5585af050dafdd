-- The idle loop's question, between scans: is anything due yet, and if not, when? One indexed MIN per
-- candidate class (each reads the first entry of the class's scan index), so a probe costs the same
-- with an empty history as with millions of settled rows (R-11), and far less than a scan that
-- returns six result sets of nothing. One statement, the clock read in it as _weave_now reads it.
CREATE PROCEDURE weave_scan_probe()
    COMMENT 'Description: engine time and the earliest check time of any candidate class, due or not.
Result set: now_at - engine time; next_at - earliest available_at (or lease end, or task deadline) of any class,
possibly <= now_at (then a scan finds work); NULL when no class has anything.
Rules: R-11, R-14.'
    READS SQL DATA
BEGIN
    SELECT c.now_at, NULLIF(LEAST(
        COALESCE((SELECT MIN(available_at) FROM pulse_inbox WHERE state = 'PENDING'), TIMESTAMP'9999-12-31 00:00:00'),
        COALESCE((SELECT MIN(available_at) FROM weave_pending_advances), TIMESTAMP'9999-12-31 00:00:00'),
        COALESCE((SELECT MIN(available_at) FROM weave_signals WHERE status = 'PENDING'),
                 TIMESTAMP'9999-12-31 00:00:00'),
        COALESCE((SELECT MIN(lease_expires_at) FROM pulse_attempts WHERE status = 'RUNNING'),
                 TIMESTAMP'9999-12-31 00:00:00'),
        COALESCE((SELECT MIN(deadline_at) FROM pulse_tasks WHERE status = 'QUEUED'),
                 TIMESTAMP'9999-12-31 00:00:00')), TIMESTAMP'9999-12-31 00:00:00') AS next_at
      FROM (SELECT UTC_TIMESTAMP(6) + INTERVAL clock_offset_us MICROSECOND AS now_at FROM weave_install WHERE id = 1) c;
END
