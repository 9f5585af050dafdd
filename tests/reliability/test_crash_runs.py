"""Z-1: many runs of a mixed load (timers, polls with budgets, retried tasks, signals with competing senders and
repeated idempotency keys) while every orchestrator and worker process is killed with -9 at random points
and restarted. After each kill nothing is partial (the M-4 invariants hold); at the end of each run there
are 0 lost timers, 0 duplicate winners, 0 rounds beyond budget and every instance is in its expected end
state: SUCCEEDED, or NEEDS_REVIEW exactly when one of its attempts was running in a killed worker and so
ended UNKNOWN through lease recovery (K-4). Moving the test clock replaces every wait for a due time.

The suite runs ``WEAVE_Z1_RUNS`` (default 2) runs; ``make reliability`` runs 50.
"""

from __future__ import annotations

import random
import time
from collections import Counter

import pytest

from procedures import invariants, signals
from tests.reliability.conftest import count_param, figure
from tests.support import cluster_load as load
from tests.support.db import reset
from tests.support.processes import WeaveProcess
from tests.support.waiting import wait_for
from tests.support.world import World

pytestmark = pytest.mark.process

RUNS = count_param("WEAVE_Z1_RUNS", 2)
SEED = count_param("WEAVE_Z1_SEED", 20261201)
MIXED, TASKS = 12, 8
OTHER_SESSIONS = "FROM information_schema.PROCESSLIST WHERE DB = DATABASE() AND ID <> CONNECTION_ID()"
LEASE_MS = 300_000  # longer than all clock moves of a run while workers run (at most 3 x 60 s)
TASK_FLOW = {"name": "charge", "steps": [
    {"key": "charge", "type": "TASK", "queue": "payments", "handler": "example.flaky", "handler_version": "1",
     "input": {"succeed_on_attempt": 2}, "retry": {"max_attempts": 3, "initial_backoff_ms": 0},
     # Longer than every clock move of a run: a task past its deadline fails for good (K-6), rightly.
     "task_timeout_ms": 3_600_000}]}


class Daemons:
    """Two orchestrators and two workers; each restart is a new incarnation with new worker ids, so that the
    attempts of killed workers can be told from those of live ones."""

    def __init__(self, dsn, logs):
        self.dsn, self.logs, self.incarnation, self.procs = dsn, logs, 0, []

    def start(self) -> None:
        self.incarnation += 1
        n = self.incarnation
        self.procs = [WeaveProcess(self.dsn, "orchestrator", "--concurrency", "2", log=self.logs / f"o{i}-{n}.log")
                      for i in range(2)]
        self.procs += [WeaveProcess(self.dsn, "worker", "--handlers", "orchestrator.example_handlers", "--queue",
                                    "payments", "--concurrency", "3", "--lease-ms", str(LEASE_MS),
                                    "--heartbeat-ms", "1000", "--worker-id", f"w{i}-{n}",
                                    log=self.logs / f"w{i}-{n}.log") for i in range(2)]

    def live_workers(self) -> list[str]:
        return [f"w{i}-{self.incarnation}" for i in range(2)]

    def kill9(self) -> None:
        for p in self.procs:
            p.kill9()
            p.close()

    def stop(self) -> None:
        for p in self.procs:
            p.terminate()
            p.close()


def quiet(world, daemons: Daemons) -> bool:
    """Nothing due and nothing queued; attempts still RUNNING belong only to killed workers."""
    db = world.db
    live = daemons.live_workers()
    if db.scalar("SELECT COUNT(*) FROM pulse_tasks WHERE status = 'QUEUED'"):
        return False
    if db.scalar("SELECT COUNT(*) FROM pulse_attempts WHERE status = 'RUNNING' AND worker_id IN (%s, %s)", *live):
        return False
    sets = db.call("weave_scan", 10)
    return not any(rows for rows in sets[:-1])


def drive(world, daemons: Daemons, total: int, max_steps: int = 20) -> None:
    for _ in range(max_steps):
        if world.db.scalar("SELECT COUNT(*) FROM weave_instances WHERE status = 'RUNNING'") == 0:
            return
        assert wait_for(lambda: quiet(world, daemons), timeout=60, interval=0.05), "the engine never became quiet"
        if world.db.scalar("SELECT COUNT(*) FROM weave_instances WHERE status = 'RUNNING'") == 0:
            return
        orphans = world.db.scalar("SELECT COUNT(*) FROM pulse_attempts WHERE status = 'RUNNING'")
        # Attempts of killed workers: past their lease, so that recovery ends them. Otherwise the next interval.
        world.db.advance(LEASE_MS + 1 if orphans else 60_000)
    raise AssertionError(world.db.rows("SELECT status, COUNT(*) n FROM weave_instances GROUP BY status"))


def one_run(db, rng: random.Random, logs) -> dict:
    reset(db.conn)
    world = World.create(db, quota=10_000, capacity=10_000)
    world.publish(load.MIXED)
    world.publish(TASK_FLOW)
    mixed = [world.start("mixed", {"id": f"m-{i}"}, key=f"m-{i}") for i in range(MIXED)]
    tasks = [world.start("charge", {}, key=f"t-{i}") for i in range(TASKS)]
    for i, wf in enumerate(mixed):  # competing senders, each followed by a replay of the first key
        for sender in ("a", "b", "a"):
            signals.send(db.conn, world.token, "acme", wf, idempotency_key=f"s-{i}-{sender}", name="ok",
                         payload_version="1", target_step_key="approval", target_activation_sequence=1,
                         correlation_key=f"m-{i}".encode(), payload=f'{{"by": "{sender}"}}'.encode(), reason="r")
    # The test's own sessions (yoyo's from the migration among them): the daemons' are the others.
    own = {r["ID"] for r in db.rows(f"SELECT ID {OTHER_SESSIONS}")}
    daemons = Daemons(db.dsn, logs)
    daemons.start()
    kills = rng.randint(1, 3)
    running_at_kill: set[int] = set()
    try:
        for _ in range(kills):
            # A random point: some real time of progress, and once in a while the clock moved meanwhile.
            time.sleep(rng.uniform(0.3, 2.0))
            if rng.random() < 0.5:
                db.advance(rng.choice([30_001, 60_000]))
                time.sleep(rng.uniform(0.0, 0.5))
            daemons.kill9()
            # A statement the server was running for a killed process still finishes (a claim may commit
            # after its worker died): look only once every session of the killed processes has ended.
            assert wait_for(lambda: {r["ID"] for r in db.rows(f"SELECT ID {OTHER_SESSIONS}")} <= own, timeout=30), \
                db.rows(f"SELECT ID, COMMAND, TIME, STATE, INFO {OTHER_SESSIONS}")
            running_at_kill |= {r["id"] for r in db.rows("SELECT id FROM pulse_attempts WHERE status = 'RUNNING'")}
            invariants.check(db.conn)  # nothing partial right after the kill
            daemons.start()
        drive(world, daemons, MIXED + TASKS)
    finally:
        daemons.stop()
    invariants.check(db.conn)
    unknown = db.rows("SELECT a.id, t.instance_id FROM pulse_attempts a JOIN pulse_tasks t ON t.id = a.task_id "
                      "WHERE a.status = 'UNKNOWN'")
    assert {r["id"] for r in unknown} <= running_at_kill, "an attempt ended UNKNOWN without its worker being killed"
    review = {r["id"] for r in db.rows("SELECT id FROM weave_instances WHERE status = 'NEEDS_REVIEW'")}
    assert review == {r["instance_id"] for r in unknown}, (unknown, db.rows(
        "SELECT instance_id, code, detail FROM weave_review_reasons WHERE closed_at IS NULL"))
    statuses = Counter(r["status"] for r in db.rows("SELECT status FROM weave_instances"))
    assert statuses["SUCCEEDED"] + statuses["NEEDS_REVIEW"] == MIXED + TASKS, statuses
    outcomes = load.check_outcomes(db, MIXED, 0)
    timers_expected = db.scalar("SELECT COUNT(*) FROM weave_waits WHERE kind = 'TIMER'")
    assert timers_expected == MIXED and outcomes["lost_timers"] == 0, outcomes
    assert outcomes["double_winners"] == 0 and outcomes["rounds_beyond_budget"] == 0, outcomes
    # Early signals: the first accepted sender wins, whatever the runners did; the replay never made a third.
    assert db.scalar("SELECT COUNT(*) FROM weave_signals") == 2 * MIXED
    winners = Counter(bytes(r["winner"]).decode() for r in db.rows(
        "SELECT JSON_VALUE(s.payload, '$.by') AS winner FROM weave_signals s WHERE s.status = 'CONSUMED'"))
    done = [wf for wf in mixed if world.instance(wf)["status"] == "SUCCEEDED"]
    assert winners == Counter({"a": len(done)}), winners
    attempts_over = db.rows("SELECT t.id FROM pulse_tasks t WHERE t.attempts_used > t.max_attempts")
    assert attempts_over == []
    return {"kills": kills, "killed_running_attempts": len(running_at_kill), "unknown": len(unknown),
            "review": len(review), "succeeded": statuses["SUCCEEDED"], "tasks": len(tasks)}


def test_Z1_kill_9_every_daemon_at_random_points_loses_nothing(db, tmp_path):
    rng = random.Random(SEED)
    totals: Counter = Counter()
    began = time.monotonic()
    for run in range(RUNS):
        logs = tmp_path / f"run{run}"
        logs.mkdir()
        result = one_run(db, rng, logs)
        totals.update(result)
        totals["runs"] += 1
    figure("Z-1 crash runs", seed=SEED, seconds=round(time.monotonic() - began, 1), **totals)
    assert totals["runs"] == RUNS and totals["kills"] >= RUNS
