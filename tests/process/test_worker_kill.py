"""Real ``weave worker`` and ``weave orchestrator`` processes (Q-2): workers killed with SIGKILL mid-attempt
(K-4, K-9), a graceful SIGTERM stop, and an instance TASK -> TIMER -> TASK run end to end. Tests wait for
effects by polling the database (``wait_for``); the due times are reached by moving the test clock."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.waiting import wait_for

pytestmark = pytest.mark.process

ROOT = Path(__file__).resolve().parents[2]
HOUR = 3_600_000


class Processes:
    """Starts weave processes against the test database and makes sure none outlives the test."""

    def __init__(self, database, tmp_path: Path):
        self.env = {**os.environ, "WEAVE_DSN": database.url(), "WEAVE_LOG_LEVEL": "INFO"}
        self.tmp_path = tmp_path
        self.procs: list[subprocess.Popen] = []

    def start(self, *args: str, name: str) -> subprocess.Popen:
        log = open(self.tmp_path / f"{name}.log", "wb")  # noqa: SIM115 - closed with the process
        proc = subprocess.Popen([sys.executable, "-m", "orchestrator.cli", *args], cwd=ROOT, env=self.env,
                                stdout=log, stderr=subprocess.STDOUT)
        proc.log_file = log  # type: ignore[attr-defined]
        proc.log_path = self.tmp_path / f"{name}.log"  # type: ignore[attr-defined]
        self.procs.append(proc)
        return proc

    def worker(self, name: str, *extra: str) -> subprocess.Popen:
        return self.start("worker", "--handlers", "orchestrator.example_handlers", "--queue", "payments",
                          "--worker-id", name, *extra, name=name)

    def orchestrator(self, name: str = "orchestrator") -> subprocess.Popen:
        return self.start("orchestrator", "--concurrency", "2", name=name)

    @staticmethod
    def output(proc: subprocess.Popen) -> str:
        return proc.log_path.read_text(errors="replace")  # type: ignore[attr-defined]

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=10)
            proc.log_file.close()  # type: ignore[attr-defined]


@pytest.fixture
def procs(database, tmp_path) -> Iterator[Processes]:
    p = Processes(database, tmp_path)
    try:
        yield p
    finally:
        p.close()


def task_step(key: str, input: dict, handler: str = "example.echo", **fields) -> dict:
    return {"key": key, "type": "TASK", "queue": "payments", "handler": handler, "handler_version": "1",
            "input": input, **fields}


def count(world, sql: str, *args) -> int:
    return world.db.scalar(sql, *args)


def test_K4_killed_workers_attempts_end_unknown_through_lease_recovery_and_never_run_twice(world, orch, procs):
    world.publish({"name": "slow", "steps": [
        task_step("work", {"ms": 60_000}, handler="example.sleep", task_timeout_ms=HOUR,
                  retry={"max_attempts": 5, "initial_backoff_ms": 0})]})
    wfs = [world.start("slow", {}) for _ in range(4)]
    orch.drain()
    workers = [procs.worker(f"doomed-{n}", "--concurrency", "2", "--lease-ms", "5000", "--heartbeat-ms", "1000")
               for n in range(2)]
    assert wait_for(lambda: count(world, "SELECT COUNT(*) FROM pulse_attempts WHERE status = 'RUNNING'") == 4,
                    timeout=15), [procs.output(w) for w in workers]
    assert {r["worker_id"] for r in world.db.rows("SELECT worker_id FROM pulse_attempts")} <= {"doomed-0", "doomed-1"}
    for w in workers:
        os.kill(w.pid, signal.SIGKILL)
    for w in workers:
        assert w.wait(timeout=10) == -signal.SIGKILL
    # Nobody is left to report or heartbeat; nothing has been decided yet either.
    assert count(world, "SELECT COUNT(*) FROM pulse_tasks WHERE status = 'RUNNING'") == 4
    world.db.advance(60_000)  # past every lease
    outcomes = orch.drain()
    assert outcomes["LEASE:UNKNOWN"] == 4 and outcomes["INBOX:REVIEW"] == 4
    assert count(world, "SELECT COUNT(*) FROM pulse_tasks WHERE status = 'UNKNOWN'") == 4
    assert count(world, "SELECT COUNT(*) FROM pulse_permits WHERE released_at IS NULL") == 0
    for wf in wfs:
        inst = world.instance(wf)
        assert inst["status"] == "NEEDS_REVIEW" and [r["code"] for r in inst["review_reasons"]] == ["TASK_UNKNOWN"]
    # A new worker finds nothing of them to run again: it runs fresh work, and only that.
    world.publish({"name": "quick", "steps": [task_step("work", {"n": 1})]})
    fresh = world.start("quick", {})
    orch.drain()
    survivor = procs.worker("survivor", "--concurrency", "2")
    assert wait_for(lambda: count(world, "SELECT COUNT(*) FROM pulse_tasks WHERE status = 'SUCCEEDED'") == 1,
                    timeout=15), procs.output(survivor)
    orch.drain()
    assert world.instance(fresh)["status"] == "SUCCEEDED"
    per_task = world.db.rows("SELECT task_id, COUNT(*) AS n FROM pulse_attempts GROUP BY task_id")
    assert len(per_task) == 5 and {r["n"] for r in per_task} == {1}
    survivor.send_signal(signal.SIGTERM)
    assert survivor.wait(timeout=15) == 0


def test_K9_sigterm_lets_the_running_attempt_finish_then_exits(world, orch, procs):
    world.publish({"name": "slowish", "steps": [
        task_step("work", {"ms": 1_000}, handler="example.sleep", task_timeout_ms=HOUR)]})
    wf = world.start("slowish", {})
    orch.drain()
    worker = procs.worker("polite", "--concurrency", "1", "--grace-ms", "10000")
    assert wait_for(lambda: count(world, "SELECT COUNT(*) FROM pulse_attempts WHERE status = 'RUNNING'") == 1,
                    timeout=15), procs.output(worker)
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=15) == 0
    assert count(world, "SELECT COUNT(*) FROM pulse_attempts WHERE status = 'SUCCEEDED'") == 1
    orch.drain()
    assert world.instance(wf)["status"] == "SUCCEEDED"
    assert '"msg": "worker stopped"' in procs.output(worker)


def test_K8_task_timer_task_completes_end_to_end_with_outputs_wired_through_expressions(world, procs):
    world.publish({"name": "e2e", "steps": [
        task_step("first", {"order": "$.input.order_id", "amount": "$.input.amount"}),
        {"key": "cool", "type": "TIMER", "delay_ms": 30_000, "after": ["first"]},
        task_step("second", {"paid": "$.steps.first.output.amount", "order": "$.steps.first.output.order",
                             "note": "second"}, after=["cool"])]})
    wf = world.start("e2e", {"order_id": "o-77", "amount": 12.5})
    orchestrator = procs.orchestrator()
    worker = procs.worker("e2e-worker", "--concurrency", "2")
    assert wait_for(lambda: world.step(wf, "cool")["status"] == "ACTIVE", timeout=15), \
        procs.output(orchestrator) + procs.output(worker)
    assert world.step(wf, "first")["output"] == {"order": "o-77", "amount": 12.5}
    world.db.advance(30_000)
    assert wait_for(lambda: world.instance(wf)["status"] == "SUCCEEDED", timeout=15), \
        procs.output(orchestrator) + procs.output(worker)
    inst = world.instance(wf)
    assert [s["status"] for s in inst["steps"]] == ["SUCCEEDED"] * 3
    assert inst["steps"][2]["output"] == {"paid": 12.5, "order": "o-77", "note": "second"}
    types = [e["type"] for e in world.events(wf)]
    assert types.count("TASK_SUCCEEDED") == 2 and "TIMER_SETTLED" in types and types[-1] == "INSTANCE_SUCCEEDED"
    for proc in (worker, orchestrator):
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
