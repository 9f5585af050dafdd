-- The settled-history figures behind /metrics (the live ones are weave_status's), read from the database so
-- that every API process answers the same values. They only grow while the rows are kept.
CREATE PROCEDURE weave_metrics()
    COMMENT 'Description: engine-wide counts for /metrics, across namespaces.
Result set 1 (settled waits, the decisions of TIMER, SIGNAL and POLL_FINAL waits): kind, result, decisions,
latency_seconds_sum, le_0_1, le_0_5, le_1, le_5, le_30, le_300 (cumulative counts; latency is settled - due for
a timer, settled - the winner''s acceptance for a signal, settled - deadline for an expired wait).
Result set 2: status, disposition, signals.
Result set 3: outcome, rounds (poll rounds by outcome).
Rules: R-11, T-8, S-17.'
    READS SQL DATA
BEGIN
    -- In whole microseconds until the end: a division would round to 4 decimals (div_precision_increment), putting
    -- a wait 100.04 ms late into the 0.1 s bucket and losing up to 50 us of each latency from the sum.
    SELECT kind, result, COUNT(*) AS decisions, COALESCE(SUM(latency_us), 0) * 0.000001 AS latency_seconds_sum,
           SUM(latency_us <= 100000) AS le_0_1, SUM(latency_us <= 500000) AS le_0_5,
           SUM(latency_us <= 1000000) AS le_1, SUM(latency_us <= 5000000) AS le_5,
           SUM(latency_us <= 30000000) AS le_30, SUM(latency_us <= 300000000) AS le_300
      FROM (SELECT w.kind, w.status AS result,
                   GREATEST(0, TIMESTAMPDIFF(MICROSECOND,
                       CASE WHEN w.kind = 'TIMER' THEN w.due_at
                            WHEN s.accepted_at IS NOT NULL THEN s.accepted_at
                            ELSE COALESCE(w.deadline_at, w.started_at) END, w.settled_at)) AS latency_us
              FROM weave_waits w LEFT JOIN weave_signals s ON s.id = w.winner_signal_id
             WHERE w.status IN ('SATISFIED', 'EXPIRED') AND w.settled_at IS NOT NULL) AS d
     GROUP BY kind, result ORDER BY kind, result;
    SELECT status, COALESCE(disposition, '') AS disposition, COUNT(*) AS signals
      FROM weave_signals GROUP BY status, disposition ORDER BY status, disposition;
    SELECT outcome, COUNT(*) AS rounds FROM weave_poll_rounds GROUP BY outcome ORDER BY outcome;
END
