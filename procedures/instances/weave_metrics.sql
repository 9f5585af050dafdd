-- The settled-history figures behind /metrics (the live ones are weave_status's), read from the database so
-- that every API process answers the same values. They only grow: a row folded into the sums stays counted when
-- it is deleted later.
-- A wait, a signal and a round never change once final, so each is counted once: weave_metrics_fold adds the rows
-- that became final since its last fold to the sums of the weave_metric_* tables, and this answers those sums with
-- the rows final since the fold, counted from the rows. What it reads is what became final in the last minutes,
-- however long the history kept (R-11): the sums are a few rows, the rows since the fold are read on the indexes of
-- the time each became final (ix_wait_settled, ix_signal_final, ix_round_decided). The sums and the rows after
-- them are read in one snapshot, so a fold committed meanwhile is counted once either way.
CREATE PROCEDURE weave_metrics()
    COMMENT 'Description: engine-wide counts for /metrics, across namespaces.
Result set 1 (settled waits, the decisions of TIMER, SIGNAL and POLL_FINAL waits): kind, result, decisions,
latency_seconds_sum, le_0_1, le_0_5, le_1, le_5, le_30, le_300 (cumulative counts; latency is settled - due for
a timer, settled - the winner''s acceptance for a signal, settled - deadline for an expired wait).
Result set 2: status, disposition, signals.
Result set 3: outcome, rounds (poll rounds by outcome).
Read in one snapshot of its own (REPEATABLE READ), or, called inside an open transaction, in that transaction,
which it neither commits nor rolls back (R-1). Call weave_metrics_fold first to keep what this reads small.
Rules: R-11, T-8, S-17.'
    READS SQL DATA
BEGIN
    DECLARE v_from DATETIME(6);
    DECLARE v_tx BOOLEAN DEFAULT FALSE;  -- TRUE once this routine has started its own transaction
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN IF v_tx THEN ROLLBACK; END IF; RESIGNAL; END;
    CALL _weave_snapshot_open(v_tx);  -- its own snapshot, or the caller's open transaction (R-1)
    SELECT folded_until INTO v_from FROM weave_metric_folds WHERE id = 1;
    SET v_from = COALESCE(v_from, '1000-01-01');
    SELECT kind, result, SUM(decisions) AS decisions, SUM(latency_us) * 0.000001 AS latency_seconds_sum,
           SUM(le_0_1) AS le_0_1, SUM(le_0_5) AS le_0_5, SUM(le_1) AS le_1, SUM(le_5) AS le_5, SUM(le_30) AS le_30,
           SUM(le_300) AS le_300
      FROM (SELECT kind, result, decisions, latency_us, le_0_1, le_0_5, le_1, le_5, le_30, le_300
              FROM weave_metric_decisions
            UNION ALL
            SELECT kind, result, COUNT(*), SUM(latency_us), SUM(latency_us <= 100000), SUM(latency_us <= 500000),
                   SUM(latency_us <= 1000000), SUM(latency_us <= 5000000), SUM(latency_us <= 30000000),
                   SUM(latency_us <= 300000000)
              FROM (SELECT w.kind, w.status AS result,
                           GREATEST(0, TIMESTAMPDIFF(MICROSECOND,
                               CASE WHEN w.kind = 'TIMER' THEN w.due_at
                                    WHEN s.accepted_at IS NOT NULL THEN s.accepted_at
                                    ELSE COALESCE(w.deadline_at, w.started_at) END, w.settled_at)) AS latency_us
                      FROM weave_waits w FORCE INDEX (ix_wait_settled)
                      LEFT JOIN weave_signals s ON s.id = w.winner_signal_id
                     WHERE w.kind IN ('TIMER', 'SIGNAL', 'POLL_FINAL') AND w.settled_at >= v_from
                       AND w.status IN ('SATISFIED', 'EXPIRED')) AS d
             GROUP BY kind, result) AS sums
     GROUP BY kind, result ORDER BY kind, result;
    SELECT status, disposition, SUM(signals) AS signals
      FROM (SELECT status, disposition, signals FROM weave_metric_signals
            UNION ALL
            SELECT status, COALESCE(disposition, ''), COUNT(*) FROM weave_signals FORCE INDEX (ix_signal_final)
             WHERE consumed_at >= v_from GROUP BY status, COALESCE(disposition, '')
            UNION ALL
            SELECT 'PENDING', '', COUNT(*) FROM weave_signals FORCE INDEX (ix_signal_pending)
             WHERE status = 'PENDING' HAVING COUNT(*) > 0) AS sums
     GROUP BY status, disposition ORDER BY status, disposition;
    SELECT outcome, SUM(rounds) AS rounds
      FROM (SELECT outcome, rounds FROM weave_metric_rounds
            UNION ALL
            SELECT outcome, COUNT(*) FROM weave_poll_rounds FORCE INDEX (ix_round_decided)
             WHERE decided_at >= v_from GROUP BY outcome
            UNION ALL
            SELECT 'IN_FLIGHT', COUNT(*) FROM weave_poll_rounds FORCE INDEX (ix_round_decided)
             WHERE decided_at IS NULL HAVING COUNT(*) > 0) AS sums
     GROUP BY outcome ORDER BY outcome;
    IF v_tx THEN
        COMMIT;
    END IF;
END
