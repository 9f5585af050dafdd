"""Z-2 (short version, in CI): 1, 2 and 4 orchestrators with 1-3 workers on one database produce the same end
states and the same event counts for a mixed load of timers, tasks, signals with repeated idempotency keys and
competing senders."""

from __future__ import annotations

import threading
from collections import Counter

import pytest

from orchestrator import example_handlers  # noqa: F401  (registers the handlers the workers run)
from orchestrator.loop import Orchestrator
from orchestrator.worker import Worker
from procedures import invariants, signals
from tests.reliability.conftest import count_param, figure
from tests.support.db import reset
from tests.support.world import World

FLOW = {"name": "mixed", "steps": [
    {"key": "wait", "type": "TIMER", "delay_ms": 30_000},
    {"key": "charge", "type": "TASK", "after": ["wait"], "queue": "payments", "handler": "example.flaky",
     "handler_version": "1", "input": {"value": "$.input.n", "succeed_on_attempt": 2},
     "retry": {"max_attempts": 3, "initial_backoff_ms": 0}},
    {"key": "approval", "type": "SIGNAL", "after": ["wait"],
     "signal": {"name": "ok", "payload_version": "1", "payload_type": "any"},
     "correlation": "$.input.id", "timeout_ms": 3_600_000}]}
INSTANCES = count_param("WEAVE_Z2_INSTANCES", 40)


def run_load(db, orchestrators: int, workers: int) -> dict:
    reset(db.conn)
    world = World.create(db)
    world.publish(FLOW)
    ids = [world.start("mixed", {"n": i, "id": f"c-{i}"}, key=f"k{i}") for i in range(INSTANCES)]

    def sender(offset: int) -> None:
        conn = db.connect()
        try:
            for i, wf in enumerate(ids):
                # Two competing senders per instance with their own keys, and a replay of the first key.
                for key in (f"s{(i + offset) % 2}", "s0"):
                    signals.send(conn, world.token, "acme", wf, idempotency_key=key, name="ok", payload_version="1",
                                 target_step_key="approval", target_activation_sequence=1,
                                 correlation_key=f"c-{i}".encode(), payload=b'{"by": "x"}', reason="r")
        finally:
            conn.close()

    nodes = [Orchestrator(db.dsn, concurrency=2, node_id=f"o{i}") for i in range(orchestrators)]
    pool = [Worker(db.dsn, queues=["payments"], concurrency=2, worker_id=f"w{i}", idle_probe_ms=10)
            for i in range(workers)]
    stop = threading.Event()
    # Competing senders first, while nothing runs: every signal is an early one, so which of them wins is
    # decided by acceptance order alone, whatever the runners do later.
    senders = [threading.Thread(target=sender, args=(k,)) for k in range(2)]
    for t in senders:
        t.start()
    for t in senders:
        t.join()
    threads = [threading.Thread(target=n.run, kwargs={"until": stop.is_set}) for n in nodes]
    threads += [threading.Thread(target=w.run, kwargs={"until": stop.is_set}) for w in pool]
    for t in threads:
        t.start()
    from tests.support.waiting import wait_for

    try:
        assert wait_for(lambda: db.scalar("SELECT COUNT(*) FROM weave_waits WHERE kind = 'TIMER'") == INSTANCES,
                        timeout=60)
        db.advance(30_001)
        done = wait_for(lambda: db.scalar("SELECT COUNT(*) FROM weave_instances WHERE status = 'SUCCEEDED'")
                        == INSTANCES, timeout=90)
        assert done, db.rows("SELECT status, COUNT(*) n FROM weave_instances GROUP BY status")
    finally:
        stop.set()
        for t in threads:
            t.join(30)
        for n in nodes:
            n.close()
    invariants.check(db.conn)
    return {
        "instances": dict(Counter(r["status"] for r in db.rows("SELECT status FROM weave_instances"))),
        "events": dict(Counter(r["type"] for r in db.rows("SELECT type FROM weave_events"))),
        "signals": dict(Counter((r["status"], r["disposition"]) for r in db.rows(
            "SELECT status, disposition FROM weave_signals"))),
        "attempts": db.scalar("SELECT COUNT(*) FROM pulse_attempts"),
        "audit": dict(Counter(r["action"] for r in db.rows("SELECT action FROM weave_audit WHERE instance_id > 0"))),
    }


@pytest.mark.process
def test_Z2_competing_runners_produce_the_same_end_states_and_event_counts(db):
    results = {(o, w): run_load(db, o, w) for o, w in ((1, 1), (2, 2), (4, 3))}
    first = results[(1, 1)]
    assert first["instances"] == {"SUCCEEDED": INSTANCES}
    assert first["attempts"] == 2 * INSTANCES  # one retryable failure, then success: exactly as the policy says
    assert first["signals"] == {("CONSUMED", None): INSTANCES, ("REJECTED", "WAIT_SETTLED"): INSTANCES}
    figure("Z-2 competing runners", instances=INSTANCES, runs={f"{o} orchestrators, {w} workers": {
        "events": sum(r["events"].values()), "attempts": r["attempts"], "same_as_first": r == first}
        for (o, w), r in results.items()})
    for runners, result in results.items():
        assert result == first, runners
