-- Proposals only (R-6): a plain read per candidate class over its own index (R-10, R-11), so the cost
-- follows what is due, not how much history the tables hold. The engine time comes back with them so
-- that the caller never needs a clock of its own (R-13, R-14).
CREATE PROCEDURE weave_scan(IN in_limit INT)
    COMMENT 'Description: due candidates of every class, each capped at in_limit, earliest first.
Parameters: in_limit - cap per class (1..10000; a value outside is taken as the nearest bound, NULL as 100).
Result set 1: class, id, version, due_at, class by class in this order, each class earliest first: INBOX
(unconsumed task outcomes, available_at <= now), CHECKPOINT (available_at <= now), SIGNAL (PENDING signals,
available_at <= now), LEASE (RUNNING attempts whose lease expired), TASK_EXPIRY (QUEUED tasks at or past their
deadline).
Result set 2: now_at - engine time of the scan; next_at - earliest future check time of any class (NULL if none).
Rules: R-10, R-11, R-14, K-4, K-6.'
    READS SQL DATA
BEGIN
    DECLARE v_now DATETIME(6);
    DECLARE v_limit INT DEFAULT LEAST(GREATEST(COALESCE(in_limit, 100), 1), 10000);
    -- The clock as _weave_now reads it, without the nested CALL (the scan runs between every batch).
    SELECT UTC_TIMESTAMP(6) + INTERVAL clock_offset_us MICROSECOND INTO v_now FROM weave_install WHERE id = 1;
    -- One result set for every class (each part its own index range, its own order and cap), so a scan
    -- is one read however many classes there are.
    (SELECT 'INBOX' AS class, id, version, available_at AS due_at
       FROM pulse_inbox FORCE INDEX (ix_inbox_pending)
      WHERE state = 'PENDING' AND available_at <= v_now ORDER BY available_at LIMIT v_limit)
    UNION ALL
    (SELECT 'CHECKPOINT' AS class, id, version, available_at AS due_at
       FROM weave_pending_advances FORCE INDEX (ix_checkpoint_available)
      WHERE available_at <= v_now ORDER BY available_at LIMIT v_limit)
    UNION ALL
    (SELECT 'SIGNAL' AS class, id, version, available_at AS due_at
       FROM weave_signals FORCE INDEX (ix_signal_pending)
      WHERE status = 'PENDING' AND available_at <= v_now ORDER BY available_at LIMIT v_limit)
    UNION ALL
    (SELECT 'LEASE' AS class, id, 0 AS version, lease_expires_at AS due_at
       FROM pulse_attempts FORCE INDEX (ix_attempt_lease)
      WHERE status = 'RUNNING' AND lease_expires_at <= v_now ORDER BY lease_expires_at LIMIT v_limit)
    UNION ALL
    (SELECT 'TASK_EXPIRY' AS class, id, 0 AS version, deadline_at AS due_at
       FROM pulse_tasks FORCE INDEX (ix_task_deadline)
      WHERE status = 'QUEUED' AND deadline_at <= v_now ORDER BY deadline_at LIMIT v_limit);
    -- Typed sentinels: with a string literal LEAST() answers a string inside a routine, and callers need a time.
    SELECT v_now AS now_at, NULLIF(LEAST(
        COALESCE((SELECT MIN(available_at) FROM pulse_inbox WHERE state = 'PENDING' AND available_at > v_now),
                 TIMESTAMP'9999-12-31 00:00:00'),
        COALESCE((SELECT MIN(available_at) FROM weave_pending_advances WHERE available_at > v_now),
                 TIMESTAMP'9999-12-31 00:00:00'),
        COALESCE((SELECT MIN(available_at) FROM weave_signals WHERE status = 'PENDING' AND available_at > v_now),
                 TIMESTAMP'9999-12-31 00:00:00'),
        COALESCE((SELECT MIN(lease_expires_at) FROM pulse_attempts WHERE status = 'RUNNING' AND lease_expires_at > v_now),
                 TIMESTAMP'9999-12-31 00:00:00'),
        COALESCE((SELECT MIN(deadline_at) FROM pulse_tasks WHERE status = 'QUEUED' AND deadline_at > v_now),
                 TIMESTAMP'9999-12-31 00:00:00')), TIMESTAMP'9999-12-31 00:00:00') AS next_at;
END
