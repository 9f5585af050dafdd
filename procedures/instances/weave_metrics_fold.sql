-- The sums behind /metrics (weave_metrics) brought up to date: the waits settled, the signals made final and the
-- rounds decided since the last fold, up to a horizon two minutes before now, are added to the weave_metric_* sums
-- and the horizon becomes the next fold's start. A row never changes once final, so each is added once.
-- The engine's own transactions commit well within two minutes of the time they stamp. A row stamped before the
-- horizon and not committed yet (a signal stored as rejected at its acceptance inside a caller's transaction,
-- weave_signal_send_in_tx, which the caller may hold open) holds its lock: the fold asks for the locks of its
-- range's rows and, when one is held, fails with the lock wait (1205) and folds nothing; weave_metrics counts those
-- rows from the rows until a later fold adds them. The API calls it before each read with the session's lock wait
-- at 0, so that a fold never waits: for another fold (the fold row's lock), nor for a caller's transaction. A fold
-- adds at most 50,000 rows of each kind, so that the first folds after an upgrade take the history kept so far
-- over several scrapes. A read-only server (a replica, a primary fenced for a failover) folds nothing: an owner
-- that holds SUPER or READ_ONLY ADMIN writes past read_only, and a fold on a replica wrote sums that its primary's
-- next fold wrote again, which stopped the replication.
CREATE PROCEDURE weave_metrics_fold()
    COMMENT 'Description: adds what became final since the last fold (waits settled, signals consumed, rejected or
expired, rounds decided), up to two minutes ago and at most 50,000 rows of each kind, to the sums weave_metrics
answers.
Result set: folded_until (the sums now count every row final before it), caught_up (1 when the fold reached its
horizon, two minutes ago; 0 when its 50,000 rows of a kind stopped it short, or a lock of its range was held).
Errors: 50013 IN_TRANSACTION (inside a caller''s transaction), 1205 (a lock of the range is held: nothing folded),
1290 (the server is read-only: nothing folded; weave_metrics counts from the rows).
Rules: R-11, R-1.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_now DATETIME(6);
    DECLARE v_from DATETIME(6);
    DECLARE v_to DATETIME(6);
    DECLARE v_cut DATETIME(6);
    DECLARE v_horizon DATETIME(6);
    DECLARE v_rows BIGINT;
    DECLARE v_tx BOOLEAN DEFAULT FALSE;  -- TRUE once this routine has started its own transaction
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN IF v_tx THEN ROLLBACK; END IF; RESIGNAL; END;
    CALL _weave_transaction_begin('weave_metrics_fold', v_tx);
    IF @@GLOBAL.read_only THEN  -- as the server refuses a user without the right to write past it
        SIGNAL SQLSTATE 'HY000' SET MYSQL_ERRNO = 1290,
            MESSAGE_TEXT = 'The server is running with the --read-only option: weave_metrics_fold folds nothing';
    END IF;
    SELECT folded_until INTO v_from FROM weave_metric_folds WHERE id = 1 FOR UPDATE;
    IF v_from IS NULL THEN  -- a database emptied by hand: the sums start again from nothing
        INSERT IGNORE INTO weave_metric_folds (id, folded_until, folded_at) VALUES (1, '1000-01-01', '1000-01-01');
        IF ROW_COUNT() = 1 THEN
            DELETE FROM weave_metric_decisions;
            DELETE FROM weave_metric_signals;
            DELETE FROM weave_metric_rounds;
        END IF;
        SELECT folded_until INTO v_from FROM weave_metric_folds WHERE id = 1 FOR UPDATE;
    END IF;
    CALL _weave_now(v_now);
    SET v_to = v_now - INTERVAL 2 MINUTE, v_horizon = v_to;
    -- At most 50,000 rows of each kind: the time of the 50,001st of each, when there is one, ends the fold.
    SET v_cut = NULL;
    SELECT settled_at INTO v_cut FROM weave_waits FORCE INDEX (ix_wait_settled)
     WHERE kind = 'TIMER' AND settled_at >= v_from AND settled_at < v_to
     ORDER BY settled_at LIMIT 1 OFFSET 50000;
    SET v_to = LEAST(v_to, COALESCE(v_cut, v_to)), v_cut = NULL;
    SELECT settled_at INTO v_cut FROM weave_waits FORCE INDEX (ix_wait_settled)
     WHERE kind = 'SIGNAL' AND settled_at >= v_from AND settled_at < v_to
     ORDER BY settled_at LIMIT 1 OFFSET 50000;
    SET v_to = LEAST(v_to, COALESCE(v_cut, v_to)), v_cut = NULL;
    SELECT settled_at INTO v_cut FROM weave_waits FORCE INDEX (ix_wait_settled)
     WHERE kind = 'POLL_FINAL' AND settled_at >= v_from AND settled_at < v_to
     ORDER BY settled_at LIMIT 1 OFFSET 50000;
    SET v_to = LEAST(v_to, COALESCE(v_cut, v_to)), v_cut = NULL;
    SELECT consumed_at INTO v_cut FROM weave_signals FORCE INDEX (ix_signal_final)
     WHERE consumed_at >= v_from AND consumed_at < v_to ORDER BY consumed_at LIMIT 1 OFFSET 50000;
    SET v_to = LEAST(v_to, COALESCE(v_cut, v_to)), v_cut = NULL;
    SELECT decided_at INTO v_cut FROM weave_poll_rounds FORCE INDEX (ix_round_decided)
     WHERE decided_at >= v_from AND decided_at < v_to ORDER BY decided_at LIMIT 1 OFFSET 50000;
    SET v_to = LEAST(v_to, COALESCE(v_cut, v_to));
    IF v_to > v_from THEN
        -- The range's rows locked without waiting: a row not committed yet stops the fold here.
        SELECT COUNT(*) INTO v_rows FROM weave_waits FORCE INDEX (ix_wait_settled)
         WHERE kind IN ('TIMER', 'SIGNAL', 'POLL_FINAL') AND settled_at >= v_from AND settled_at < v_to
           FOR UPDATE;
        SELECT COUNT(*) INTO v_rows FROM weave_signals FORCE INDEX (ix_signal_final)
         WHERE consumed_at >= v_from AND consumed_at < v_to FOR UPDATE;
        SELECT COUNT(*) INTO v_rows FROM weave_poll_rounds FORCE INDEX (ix_round_decided)
         WHERE decided_at >= v_from AND decided_at < v_to FOR UPDATE;
        -- In whole microseconds until the end: a division would round to 4 decimals
        -- (div_precision_increment), putting a wait 100.04 ms late into the 0.1 s bucket.
        INSERT INTO weave_metric_decisions (kind, result, decisions, latency_us, le_0_1, le_0_5, le_1, le_5,
                                            le_30, le_300)
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
                   AND w.settled_at < v_to AND w.status IN ('SATISFIED', 'EXPIRED')) AS d
         GROUP BY kind, result
        ON DUPLICATE KEY UPDATE decisions = decisions + VALUES(decisions),
            latency_us = latency_us + VALUES(latency_us), le_0_1 = le_0_1 + VALUES(le_0_1),
            le_0_5 = le_0_5 + VALUES(le_0_5), le_1 = le_1 + VALUES(le_1), le_5 = le_5 + VALUES(le_5),
            le_30 = le_30 + VALUES(le_30), le_300 = le_300 + VALUES(le_300);
        INSERT INTO weave_metric_signals (status, disposition, signals)
        SELECT status, COALESCE(disposition, ''), COUNT(*) FROM weave_signals FORCE INDEX (ix_signal_final)
         WHERE consumed_at >= v_from AND consumed_at < v_to
         GROUP BY status, COALESCE(disposition, '')
        ON DUPLICATE KEY UPDATE signals = signals + VALUES(signals);
        INSERT INTO weave_metric_rounds (outcome, rounds)
        SELECT outcome, COUNT(*) FROM weave_poll_rounds FORCE INDEX (ix_round_decided)
         WHERE decided_at >= v_from AND decided_at < v_to
         GROUP BY outcome
        ON DUPLICATE KEY UPDATE rounds = rounds + VALUES(rounds);
        UPDATE weave_metric_folds SET folded_until = v_to, folded_at = v_now WHERE id = 1;
    END IF;
    COMMIT;
    SELECT folded_until, folded_until >= v_horizon AS caught_up FROM weave_metric_folds WHERE id = 1;
    IF @@autocommit = 0 THEN
        COMMIT;  -- the answer's read opened a transaction there: the session is left as the call found it
    END IF;
END
