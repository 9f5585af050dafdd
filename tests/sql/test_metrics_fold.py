"""The counters of /metrics (R-11, T-8): weave_metrics_fold adds what became final up to two minutes ago to sums kept
apart, and weave_metrics answers the sums with the rows final since. Every figure must equal the count of the rows
themselves (the query weave_metrics ran over the whole history before), across any number of folds, with a fold
that may not take a lock left for later, and a row committed after the time it stamps counted all the same."""

from __future__ import annotations

import datetime as dt

from procedures import db as dbmod
from procedures import routines
from tests.sql.test_polls import answer_rounds, poll_flow, started
from tests.support import signals as signal_support

TIMER = {"name": "cool-off", "steps": [{"key": "wait", "type": "TIMER", "delay_ms": 60_000}]}
SIGNAL = signal_support.signal_flow("approve", timeout_ms=120_000)
LATER = signal_support.signal_flow("approve-later", before_timer_ms=3_600_000)  # its wait opens in an hour

# What the figures must be: each counted from its rows, over the whole history.
COUNTED = (
    """SELECT kind, result, COUNT(*) AS decisions, COALESCE(SUM(latency_us), 0) * 0.000001 AS latency_seconds_sum,
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
        GROUP BY kind, result ORDER BY kind, result""",
    """SELECT status, COALESCE(disposition, '') AS disposition, COUNT(*) AS signals
         FROM weave_signals GROUP BY status, disposition ORDER BY status, disposition""",
    "SELECT outcome, COUNT(*) AS rounds FROM weave_poll_rounds GROUP BY outcome ORDER BY outcome",
)


def counted(db) -> dict:
    """The figures as engine_metrics shapes them, counted from the rows."""
    decisions, sigs, rounds = (db.rows(sql) for sql in COUNTED)
    columns = ("le_0_1", "le_0_5", "le_1", "le_5", "le_30", "le_300")
    return {
        "decisions": [{"kind": r["kind"], "result": r["result"], "count": int(r["decisions"]),
                       "sum": float(r["latency_seconds_sum"]),
                       "buckets": [(le, int(r[c] or 0)) for le, c in zip(routines.LATENCY_BUCKETS, columns,
                                                                         strict=True)]} for r in decisions],
        "signals": [(r["status"], r["disposition"], int(r["signals"])) for r in sigs],
        "rounds": {r["outcome"]: int(r["rounds"]) for r in rounds},
    }


def folded_until(db):
    return db.scalar("SELECT folded_until FROM weave_metric_folds WHERE id = 1")


def some_of_everything(world, orch, tag: str) -> None:
    """Timers settled late, a signal consumed, one rejected (its instance settled), one early and PENDING, a poll
    with a PENDING round and a DONE one, and one left IN_FLIGHT."""
    timers = [world.start("cool-off") for _ in range(3)]
    approved = world.start("approve", {"order_id": f"{tag}-1"})
    signal_support.send(world, approved, correlation_key=f"{tag}-1")
    signal_support.send(world, approved, correlation_key=f"{tag}-1", reason="once more")  # REJECTED: settled
    early = world.start("approve-later", {"order_id": f"{tag}-2"})
    assert signal_support.send(world, early, correlation_key=f"{tag}-2")["status"] == "PENDING"  # early
    orch.drain()
    world.db.advance(61_500)
    orch.drain()
    assert {world.instance(wf)["status"] for wf in timers} == {"SUCCEEDED"}
    done = started(world, orch, input={"order_id": f"{tag}-3"})
    answer_rounds(world, orch, "PENDING", "DONE")
    assert world.instance(done)["status"] == "SUCCEEDED"
    started(world, orch, input={"order_id": f"{tag}-4"})  # its round stays IN_FLIGHT


def test_R11_T8_every_figure_counts_each_row_once_across_folds(world, orch):
    for flow in (TIMER, SIGNAL, LATER, poll_flow()):
        world.publish(flow)
    conn = world.db.conn
    some_of_everything(world, orch, "a")
    first = routines.engine_metrics(conn)
    assert first == counted(world.db) and first["rounds"] == {"DONE": 1, "POLL_PENDING": 1, "IN_FLIGHT": 1}
    assert {s[0] for s in first["signals"]} == {"CONSUMED", "REJECTED", "PENDING"}
    assert {d["kind"] for d in first["decisions"]} == {"TIMER", "SIGNAL"}
    assert world.db.scalar("SELECT COUNT(*) FROM weave_metric_decisions") == 0  # all newer than the horizon
    world.db.advance(180_000)  # all of it past the horizon: the next call folds it
    assert routines.engine_metrics(conn) == counted(world.db)
    reached = folded_until(world.db)
    assert reached > world.db.now() - dt.timedelta(minutes=3)
    assert world.db.scalar("SELECT SUM(decisions) FROM weave_metric_decisions") > 0
    assert world.db.scalar("SELECT SUM(rounds) FROM weave_metric_rounds") == 2
    some_of_everything(world, orch, "b")  # new rows after the fold, counted from the rows
    assert routines.engine_metrics(conn) == counted(world.db) == routines.engine_metrics(conn)
    world.db.advance(180_000)
    assert routines.engine_metrics(conn) == counted(world.db) == routines.engine_metrics(conn)
    assert folded_until(world.db) > reached


def test_R11_a_fold_waits_for_no_lock_and_a_row_committed_late_is_counted(world, orch):
    """A signal stored REJECTED inside a caller's open transaction (S-16) stamps its time before the caller commits:
    a fold whose range holds it folds nothing and waits for nothing, and the figures count it once committed. A
    fold in progress elsewhere (the fold row locked) leaves the next call's fold out, not its figures."""
    for flow in (TIMER, SIGNAL):
        world.publish(flow)
    wf = world.start("approve", {"order_id": "o-1"})
    signal_support.send(world, wf, correlation_key="o-1")
    assert world.instance(wf)["status"] == "SUCCEEDED"
    conn = world.db.conn
    caller = dbmod.connect(world.db.dsn, autocommit=False)
    try:
        caller.begin()
        receipt = signal_support.send(world, wf, conn=caller, in_tx=True, correlation_key="o-1", reason="again")
        assert receipt["status"] == "REJECTED"
        world.db.advance(180_000)  # the rejection is older than the horizon, and not committed
        assert routines.metrics_fold(conn) is False
        assert routines.engine_metrics(conn) == counted(world.db)  # without the uncommitted row
        caller.commit()
    finally:
        caller.close()
    figures = routines.engine_metrics(conn)
    assert figures == counted(world.db) and any(s[0] == "REJECTED" for s in figures["signals"])
    assert world.db.scalar("SELECT SUM(signals) FROM weave_metric_signals WHERE status = 'REJECTED'") == 1

    holder = dbmod.connect(world.db.dsn, autocommit=False)
    try:
        holder.begin()
        with holder.cursor() as cur:
            cur.execute("SELECT folded_until FROM weave_metric_folds WHERE id = 1 FOR UPDATE")
        world.db.advance(180_000)
        wf2 = world.start("cool-off")
        orch.drain()
        world.db.advance(61_000)
        orch.drain()
        assert world.instance(wf2)["status"] == "SUCCEEDED"
        assert routines.metrics_fold(conn) is False
        assert routines.engine_metrics(conn) == counted(world.db)
    finally:
        holder.rollback()
        holder.close()
    world.db.advance(180_000)
    assert routines.metrics_fold(conn) is True
    assert routines.engine_metrics(conn) == counted(world.db)
    assert world.db.scalar("SELECT @@SESSION.innodb_lock_wait_timeout") == world.db.scalar(
        "SELECT @@GLOBAL.innodb_lock_wait_timeout")  # the session's lock wait is as it was


def test_R11_a_first_fold_takes_a_long_history_in_steps_and_counts_all_of_it(world):
    """The history kept before the upgrade is folded at most 50,000 rows of a kind a call: every call answers the
    same figures meanwhile, and once folded the rows stay counted when they are deleted (a counter only grows).
    (60,000 settled timers alone, bulk-inserted: what the fold reads.)"""
    from tests.benchmarks.bench_scan import seq

    at = "TIMESTAMP('2025-01-01') + INTERVAL n SECOND"
    with world.db.conn.cursor() as cur:  # each settled 0.2 s after it was due: 0.5 s bucket
        cur.execute("INSERT INTO weave_waits (namespace_id, instance_id, activation_id, step_key, activation_seq, "
                    "kind, status, started_at, due_at, planned_due_at, settled_at) SELECT 1, n, n, 'wait', 1, 'TIMER', "
                    f"'SATISFIED', {at}, {at} + INTERVAL 60 SECOND, {at} + INTERVAL 60 SECOND, "
                    f"{at} + INTERVAL 60200000 MICROSECOND FROM " + seq(60_000))
    try:
        expected = counted(world.db)
        assert expected["decisions"][0]["count"] == 60_000
        folded = []
        for _ in range(3):
            assert routines.engine_metrics(world.db.conn) == expected
            folded.append((folded_until(world.db), world.db.scalar("SELECT decisions FROM weave_metric_decisions")))
        # The first fold stops at the 50,001st timer; the second takes the rest, up to two minutes ago.
        assert folded[0][0] < dt.datetime(2026, 1, 1) < folded[1][0] <= folded[2][0]
        assert [n for _, n in folded] == [50_000, 60_000, 60_000]
    finally:
        world.db.execute("DELETE FROM weave_waits WHERE step_key = 'wait' AND activation_seq = 1 AND namespace_id = 1 "
                         "AND started_at < '2026-01-01'")
    # Counters only grow: the rows folded stay counted once deleted.
    assert counted(world.db)["decisions"] == []
    assert routines.engine_metrics(world.db.conn) == expected
