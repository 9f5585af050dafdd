"""Final signals against POLL queries that real worker processes are running (Q-2, F-4, F-5, F-8, F-9): the
signals are accepted while the orchestrator is killed with -9; after its restart each winner is saved, the
running query is asked to stop through Pulse (the worker learns it from its heartbeat), and the step settles
with the signal only once Pulse has recorded the real end and released the permit. A second group of polls
answers on its own before its signal is accepted: there the query wins. Effects are awaited by polling
the database; nothing sleeps for a due time."""

from __future__ import annotations

import json

import pytest

from procedures import invariants
from tests.support.processes import WeaveProcess
from tests.support.signals import send
from tests.support.waiting import wait_for

pytestmark = pytest.mark.process

SLOW = 20  # queries that run until cancelled: the signal comes first
QUICK = 10  # queries that answer DONE at once: the query comes first
FINAL = {"name": "payment.final", "payload_version": "1", "correlation": "$.input.order_id"}
RESULT = {"pending": ["PENDING"], "success": ["DONE", "PAID"]}


def poll(name: str, handler: str, input: dict) -> dict:
    return {"name": name, "steps": [{
        "key": "check", "type": "POLL", "queue": "payments", "handler": handler, "handler_version": "1",
        "input": input, "interval_ms": 60_000, "max_rounds": 3, "timeout_ms": 3_600_000,
        "task_timeout_ms": 600_000, "result": RESULT, "final_signal": FINAL}]}


def count(db, sql: str, *args) -> int:
    return db.scalar(sql, *args)


def final(world, wf: str, order_id: str) -> dict:
    payload = {"status": "PAID", "output": {"order": order_id}}
    return send(world, wf, f"final-{order_id}", name="payment.final", payload_version="1", target_step_key="check",
                correlation_key=order_id, payload=json.dumps(payload))


def test_F4_F9_signals_accepted_while_the_orchestrator_is_down_win_over_running_queries_after_restart(
        world, database, tmp_path):
    db = world.db
    world.publish(poll("slow", "example.sleep", {"order_id": "$.input.order_id", "ms": 120_000,
                                                 "honour_cancel": True}))
    world.publish(poll("quick", "example.poll", {"order_id": "$.input.order_id", "done_at": 1}))
    slow = {f"s-{i}": world.start("slow", {"order_id": f"s-{i}"}) for i in range(SLOW)}
    procs = [WeaveProcess(database, "orchestrator", "--concurrency", "2", log=tmp_path / "o1.log"),
             # Exactly as many slots as slow queries, so the quick ones wait for the second worker.
             WeaveProcess(database, "worker", "--handlers", "orchestrator.example_handlers", "--queue", "payments",
                          "--concurrency", str(SLOW), "--lease-ms", "5000", "--heartbeat-ms", "200",
                          log=tmp_path / "w1.log")]
    try:
        assert wait_for(lambda: count(db, "SELECT COUNT(*) FROM pulse_tasks WHERE status = 'RUNNING'") == SLOW,
                        timeout=30), "the slow queries did not all start"
        quick = {f"q-{i}": world.start("quick", {"order_id": f"q-{i}"}) for i in range(QUICK)}
        assert wait_for(lambda: count(db, "SELECT COUNT(*) FROM pulse_tasks WHERE status = 'QUEUED'") == QUICK,
                        timeout=30), "the quick polls did not all activate"
        procs[0].kill9()
        # Every orchestrator is down: the quick queries answer, and their reports settle their polls themselves
        # (Settle at Report); the slow ones keep running.
        procs.append(WeaveProcess(database, "worker", "--handlers", "orchestrator.example_handlers", "--queue",
                                  "payments", "--concurrency", str(QUICK), log=tmp_path / "w2.log"))
        assert wait_for(lambda: count(db, "SELECT COUNT(*) FROM pulse_tasks WHERE status = 'SUCCEEDED'") == QUICK,
                        timeout=30), "the quick queries did not all answer"
        db.advance(1)  # the signals are stored strictly after the quick answers
        receipts = {oid: final(world, wf, oid) for oid, wf in {**slow, **quick}.items()}
        assert {oid: r["status"] for oid, r in receipts.items()} == {**{oid: "PENDING" for oid in slow},
                                                                     **{oid: "REJECTED" for oid in quick}}
        assert count(db, "SELECT COUNT(*) FROM pulse_permits WHERE released_at IS NULL") == SLOW

        procs[0] = WeaveProcess(database, "orchestrator", "--concurrency", "2", log=tmp_path / "o2.log")
        assert wait_for(lambda: count(db, "SELECT COUNT(*) FROM weave_instances WHERE status = 'SUCCEEDED'")
                        == SLOW + QUICK, timeout=60), "not every poll settled after the restart"
        for p in procs:
            assert p.terminate() == 0
    finally:
        for p in procs:
            p.close()

    for oid, wf in slow.items():
        step = world.step(wf, "check")
        assert step["output"] == {"status": "PAID", "output": {"order": oid}}  # the signal's result object
        assert [r["outcome"] for r in step["poll"]["rounds"]] == ["CANCELLED"]  # the query's real end, collected
        assert step["final_wait"]["winner_signal_id"] == receipts[oid]["signal_id"]
    for wf in quick.values():
        step = world.step(wf, "check")
        assert step["output"] == {"status": "DONE", "output": {"rounds": 1}}  # its answer was stored first
        assert step["final_wait"]["status"] == "CANCELLED"
    rejected = db.rows("SELECT disposition, COUNT(*) AS n FROM weave_signals WHERE status = 'REJECTED' "
                       "GROUP BY disposition")
    assert {r["disposition"]: r["n"] for r in rejected} == {"INSTANCE_SETTLED": QUICK}  # settled by the reports
    assert count(db, "SELECT COUNT(*) FROM weave_signals WHERE status = 'CONSUMED'") == SLOW
    assert count(db, "SELECT COUNT(*) FROM pulse_permits WHERE released_at IS NULL") == 0
    assert count(db, "SELECT COUNT(*) FROM pulse_tasks WHERE status = 'CANCELLED' AND cancel_requested = 1") == SLOW
    invariants.check(db.conn)
