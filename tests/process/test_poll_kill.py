"""Real orchestrator and worker processes killed with -9 in the middle of polls that have rounds left
(Q-2, P-2..P-5): after a restart every poll carries on with its frozen input, and its budgets (rounds used,
attempts) are exactly what they were. Effects are awaited by polling the database; the interval between
rounds is crossed by moving the test clock, never by sleeping."""

from __future__ import annotations

import json

import pytest

from procedures import invariants
from tests.support.load import start_many
from tests.support.processes import WeaveProcess
from tests.support.waiting import wait_for

pytestmark = pytest.mark.process

POLLS = 200
INTERVAL = 60_000
FLOW = {"name": "settle", "steps": [{
    "key": "check", "type": "POLL", "queue": "payments", "handler": "example.poll", "handler_version": "1",
    "input": {"order_id": "$.input.n", "done_at": 4}, "interval_ms": INTERVAL, "max_rounds": 5,
    "timeout_ms": 3_600_000, "task_timeout_ms": 600_000,
    "result": {"pending": ["PENDING"], "success": ["DONE"]}}]}


def orchestrator(database, log) -> WeaveProcess:
    return WeaveProcess(database, "orchestrator", "--concurrency", "2", log=log)


def worker(database, log) -> WeaveProcess:
    return WeaveProcess(database, "worker", "--handlers", "orchestrator.example_handlers", "--queue", "payments",
                        "--concurrency", "4", log=log)


def count(db, sql: str, *args) -> int:
    return db.scalar(sql, *args)


def all_waiting_after(db, rounds: int) -> bool:
    return count(db, "SELECT COUNT(*) FROM weave_poll_states WHERE state = 'WAITING' AND rounds_used = %s",
                 rounds) == POLLS


def budgets(db) -> dict:
    """Per instance: rounds used and, per round, the task's attempts and frozen input."""
    rows = db.rows("SELECT p.instance_id, p.rounds_used, t.round_no, t.attempts_used, t.input FROM weave_poll_states p "
                   "JOIN pulse_tasks t ON t.activation_id = p.activation_id ORDER BY p.instance_id, t.round_no")
    out: dict = {}
    for r in rows:
        entry = out.setdefault(r["instance_id"], {"rounds_used": r["rounds_used"], "rounds": {}})
        entry["rounds"][r["round_no"]] = (r["attempts_used"], json.loads(r["input"]))
    return out


def test_P4_polls_survive_kill_9_of_orchestrator_and_worker_with_budgets_preserved(world, database, tmp_path):
    db = world.db
    world.publish(FLOW)
    wfs = start_many(world, "settle", POLLS)
    procs = [orchestrator(database, tmp_path / "o1.log"), worker(database, tmp_path / "w1.log")]
    try:
        assert wait_for(lambda: all_waiting_after(db, 1), timeout=20), "round 1 did not answer PENDING everywhere"
        db.advance(INTERVAL)
        assert wait_for(lambda: all_waiting_after(db, 2), timeout=20), "round 2 did not answer PENDING everywhere"
        # Between rounds nothing runs: the worker dies without leaving an attempt behind.
        procs[1].kill9()
        assert count(db, "SELECT COUNT(*) FROM pulse_attempts WHERE status = 'RUNNING'") == 0
        db.advance(INTERVAL)
        # The orchestrator dies while it creates round 3 for the polls.
        assert wait_for(lambda: count(db, "SELECT COUNT(*) FROM pulse_tasks WHERE round_no = 3") >= 1, timeout=20,
                        interval=0.005)
        procs[0].kill9()
    finally:
        for p in procs:
            p.close()
    invariants.check(db.conn)  # nothing partial after kill -9
    before = budgets(db)
    assert {b["rounds_used"] for b in before.values()} <= {2, 3}
    for b in before.values():
        assert len(b["rounds"]) == b["rounds_used"]
        assert [b["rounds"][n][0] for n in (1, 2)] == [1, 1] and b["rounds"].get(3, (0,))[0] == 0

    procs = [orchestrator(database, tmp_path / "o2.log"), worker(database, tmp_path / "w2.log")]
    try:
        assert wait_for(lambda: all_waiting_after(db, 3), timeout=20), "round 3 did not follow the restart"
        after = budgets(db)
        for iid, b in before.items():  # what was there before the kill is exactly what is there now
            assert after[iid]["rounds"][1] == b["rounds"][1] and after[iid]["rounds"][2] == b["rounds"][2]
        db.advance(INTERVAL)
        assert wait_for(lambda: count(db, "SELECT COUNT(*) FROM weave_instances WHERE status = 'SUCCEEDED'")
                        == POLLS, timeout=20), "round 4 did not settle every poll"
        for p in procs:
            assert p.terminate() == 0
    finally:
        for p in procs:
            p.close()

    final = budgets(db)
    for wf in wfs:
        inst = world.instance(wf)
        n = inst["input"]["n"]
        poll = inst["steps"][0]["poll"]
        assert inst["status"] == "SUCCEEDED" and poll["rounds_used"] == 4
        assert [r["outcome"] for r in poll["rounds"]] == ["POLL_PENDING"] * 3 + ["DONE"]
        assert inst["steps"][0]["output"] == {"status": "DONE", "output": {"rounds": 4}}
        rounds = final[world.internal_id(wf)]["rounds"]
        assert [rounds[r] for r in (1, 2, 3, 4)] == [(1, {"order_id": n, "done_at": 4})] * 4
    assert count(db, "SELECT COUNT(*) FROM pulse_attempts") == 4 * POLLS
    invariants.check(db.conn)
