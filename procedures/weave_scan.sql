-- Proposals only (R-6): a plain read per candidate class over its own index (R-10, R-11), so the cost
-- follows what is due, not how much history the tables hold. The engine time comes back with them so
-- that the caller never needs a clock of its own (R-13, R-14).
CREATE PROCEDURE weave_scan(IN in_limit INT)
    COMMENT 'Description: due candidates of every class, each capped at in_limit, earliest first.
Parameters: in_limit - cap per class (1..10000).
Result set 1: class (CHECKPOINT), id, version, due_at - checkpoints with available_at <= now.
Result set 2: now_at - engine time of the scan; next_at - earliest future check time of any class (NULL if none).
Rules: R-10, R-11, R-14.'
    READS SQL DATA
BEGIN
    DECLARE v_now DATETIME(6);
    DECLARE v_limit INT DEFAULT LEAST(GREATEST(COALESCE(in_limit, 100), 1), 10000);
    CALL _weave_now(v_now);
    SELECT 'CHECKPOINT' AS class, id, version, available_at AS due_at
      FROM weave_pending_advances FORCE INDEX (ix_checkpoint_available)
     WHERE available_at <= v_now ORDER BY available_at LIMIT v_limit;
    SELECT v_now AS now_at,
           (SELECT MIN(available_at) FROM weave_pending_advances WHERE available_at > v_now) AS next_at;
END
