"""Stored times follow lock order (R-2, S-11). Send reads the clock after the instance lock, so per instance:
signals' ``accepted_at`` order is their acceptance (lock, id) order, event ``occurred_at`` never decreases in
``seq``, and the winner of a wait is the first matching on-time signal by ``(accepted_at, id)`` among all ever
accepted for it, whether it was consumed by Send's own transaction, by a racing runner, or later."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from itertools import pairwise

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.loop import Orchestrator
from procedures import errors, invariants
from tests.support.signals import send, signal_flow

SENDERS = 16
REPETITIONS = 8


def race_senders(world, wf: str, jobs: list[dict]) -> list:
    """Every job sends on its own connection; they all start together behind a barrier."""
    barrier = threading.Barrier(len(jobs))

    def one(job: dict):
        conn = world.db.connect()
        try:
            barrier.wait(timeout=30)
            try:
                return send(world, wf, conn=conn, **job)
            except errors.WeaveError as exc:
                return exc
        finally:
            conn.close()

    with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
        return list(pool.map(one, jobs))


def assert_stored_times_follow_lock_order(world, wf: str) -> None:
    inst = world.internal_id(wf)
    signals = world.db.rows("SELECT id, accepted_at FROM weave_signals WHERE instance_id = %s ORDER BY id", inst)
    by_time = sorted(signals, key=lambda r: (r["accepted_at"], r["id"]))
    assert [r["id"] for r in by_time] == [r["id"] for r in signals], "accepted_at order differs from acceptance order"
    events = world.db.rows("SELECT seq, occurred_at FROM weave_events WHERE instance_id = %s ORDER BY seq", inst)
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert all(a["occurred_at"] <= b["occurred_at"] for a, b in pairwise(events)), "an event went back in time"
    for inv in ("M-4.16", "M-4.17"):
        with world.db.conn.cursor() as cur:
            cur.execute(invariants.BY_ID[inv].sql)
            assert cur.fetchall() == (), inv


def assert_first_accepted_won(world, wf: str) -> None:
    """The winner is the first by (accepted_at, id) of the matching signals; every earlier one is a mismatch."""
    inst = world.internal_id(wf)
    wait = world.db.row("SELECT winner_signal_id, status FROM weave_waits WHERE instance_id = %s "
                        "AND step_key = 'approval'", inst)
    rows = world.db.rows("SELECT id, status, disposition, correlation_key FROM weave_signals "
                         "WHERE instance_id = %s ORDER BY accepted_at, id", inst)
    matching = [r for r in rows if r["correlation_key"] == b"o-1"]
    assert wait["status"] == "SATISFIED" and matching, (wait, rows)
    assert wait["winner_signal_id"] == matching[0]["id"], rows
    assert all(r["status"] == "REJECTED" for r in rows if r["id"] != wait["winner_signal_id"])


def test_S11_R2_16_senders_with_a_racing_runner_store_times_in_lock_order(world, database, orch):
    """The signal step ends the instance, so late senders are REJECTED INSTANCE_SETTLED: none of them may carry
    an accepted_at earlier than the winner's."""
    world.publish(signal_flow())
    runner = Orchestrator(database, concurrency=2, idle_probe_ms=1)
    thread = threading.Thread(target=runner.run, daemon=True)
    thread.start()
    try:
        for rep in range(REPETITIONS):
            wf = world.start("approval-flow", {"order_id": "o-1"})
            orch.drain()
            assert world.step(wf, "approval")["status"] == "ACTIVE"
            receipts = race_senders(world, wf, [{"key": f"r{rep}-{i}", "payload": f'{{"n": {i}}}'}
                                                for i in range(SENDERS)])
            assert not [r for r in receipts if isinstance(r, Exception)], receipts
            orch.drain()
            assert world.instance(wf)["status"] == "SUCCEEDED"
            assert_stored_times_follow_lock_order(world, wf)
            assert_first_accepted_won(world, wf)
    finally:
        runner.stop()
        thread.join(timeout=30)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(jobs=st.lists(st.tuples(st.booleans(), st.integers(0, 3)), min_size=2, max_size=SENDERS),
       runner_racing=st.booleans(), early=st.booleans())
def test_S11_R2_property_any_mix_of_senders_keeps_lock_order_and_first_match_wins(world, database, orch, jobs,
                                                                                runner_racing, early):
    """Matching and mismatched correlations, replays of one key, early or active step, a runner racing or not."""
    flow = signal_flow(before_timer_ms=1_000) if early else signal_flow()
    if "approval-flow" not in world.published:
        world.publish(flow)
    runner = Orchestrator(database, concurrency=2, idle_probe_ms=1)
    thread = None
    try:
        wf = world.start("approval-flow", {"order_id": "o-1"})
        orch.drain()
        if runner_racing:
            thread = threading.Thread(target=runner.run, daemon=True)
            thread.start()
        base = f"{wf}-"
        receipts = race_senders(world, wf, [
            {"key": base + (f"shared-{key}" if key else f"own-{i}"),
             "correlation_key": "o-1" if matches else "o-2",
             "payload": '{"ok": true}'} for i, (matches, key) in enumerate(jobs)])
        if thread is not None:
            runner.stop()
            thread.join(timeout=30)
        if early:
            world.db.advance(1_000)
        orch.drain()
        assert_stored_times_follow_lock_order(world, wf)
        stored = [r for r in receipts if not isinstance(r, Exception)]
        assert len(stored) + sum(isinstance(r, errors.IdempotencyConflict) for r in receipts) == len(receipts)
        if any(matches for matches, _ in jobs):
            inst = world.internal_id(wf)
            if world.db.scalar("SELECT COUNT(*) FROM weave_signals WHERE instance_id = %s "
                               "AND correlation_key = 'o-1'", inst):
                assert_first_accepted_won(world, wf)
    finally:
        if thread is not None and thread.is_alive():
            runner.stop()
            thread.join(timeout=30)
        runner.close()
