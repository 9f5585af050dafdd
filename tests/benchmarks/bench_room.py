"""Benchmark: work waiting for an app's quota, run by real orchestrator and worker processes.

    python -m tests.benchmarks.bench_room [--instances 40] [--steps 3] [--quota 4] [--task-ms 50]

Not collected by pytest (run on demand). ``--instances`` instances of a chain of ``--steps`` TASK steps (the
``example.sleep`` handler, ``--task-ms`` each) are started at once into an app whose quota lets ``--quota`` tasks be
in flight; one ``weave orchestrator`` and one ``weave worker`` (concurrency = the quota) run them to the end. The
reference is the same run with a quota that holds every task at once, measured just before; the least the quota
allows is instances x steps x task time / quota. From the database's own timestamps it prints:

- ``seconds``: first start to last instance SUCCEEDED, and ``tasks_per_s``;
- ``slots_busy``: the share of the quota's slot-time that tasks held their slot (created to finished);
- ``gap_ms`` p50 and max: from one step's task finishing to the next step's task being created, per instance;
- ``first_task_wait_s`` p50 and max: from an instance's start to its first task, and ``overtaken``: of the
  instances, how many got their first task after one started more than a quota's worth of instances later.

With ``--waiters N`` it measures instead what waiting costs the rest of the server: N instances wait for an app
whose one slot a task holds (no worker runs), while one ``weave orchestrator`` runs for ``--seconds`` and 200 timers
of another app fall due in its second half. It prints the looks a second the orchestrator makes at the waiters
(their deferrals, counted by the engine) and the timers' lateness (settled - due) p50 and p99.

The M-4 invariants are checked after every run (Q-3).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from procedures import db, definitions, installer, invariants, routines
from tests.benchmarks.common import engine_processes, percentile, wait_until_counted


def prepare(dsn: db.Dsn, instances: int, steps: int, quota: int, task_ms: int) -> None:
    installer.migrate(dsn)
    with db.connect(dsn) as conn:
        admin = routines.namespace_bootstrap(conn, "bench")["token"]
        routines.app_put(conn, admin, "bench", "app", quota)
        routines.queue_put(conn, admin, "bench", "work", 1_000_000)
        token = routines.credential_create(conn, admin, "bench", "bench", ["workflows:start"])["token"]
        chain = [{"key": f"s{n}", "type": "TASK", "queue": "work", "handler": "example.sleep", "handler_version": "1",
                  "input": {"ms": task_ms}, "task_timeout_ms": 3_600_000, **({"after": [f"s{n - 1}"]} if n else {})}
                 for n in range(steps)]
        routines.definition_publish(conn, admin, "bench", definitions.validate({"name": "chain", "steps": chain}))
        for n in range(instances):
            routines.instance_start(conn, token, "bench", definition="chain", app="app", input={"n": n},
                                    idempotency_key=f"b-{n}", deadline_ms=86_400_000)


def measure(dsn: db.Dsn, instances: int, quota: int) -> dict:
    worker = ["worker", "--handlers", "orchestrator.example_handlers", "--queue", "work", "--concurrency", str(quota),
              "--worker-id", "bench"]
    with engine_processes(dsn, ["orchestrator"], worker), db.connect(dsn) as conn:
        wait_until_counted(conn, "SELECT COUNT(*) AS n FROM weave_instances WHERE status = 'SUCCEEDED'", instances,
                           "the instances")
        with conn.cursor() as cur:
            cur.execute("SELECT MIN(created_at) AS first, MAX(finished_at) AS last FROM weave_instances")
            span = cur.fetchone()
            cur.execute("SELECT t.instance_id, t.step_key, t.created_at, t.finished_at, i.created_at AS started "
                        "FROM pulse_tasks t JOIN weave_instances i ON i.id = t.instance_id ORDER BY t.id")
            tasks = cur.fetchall()
        invariants.check(conn)
    seconds = (span["last"] - span["first"]).total_seconds()
    held = sum((t["finished_at"] - t["created_at"]).total_seconds() for t in tasks)
    by_instance: dict[int, list[dict]] = {}
    for t in tasks:
        by_instance.setdefault(t["instance_id"], []).append(t)
    gaps = [(b["created_at"] - a["finished_at"]).total_seconds() * 1000
            for chain in by_instance.values() for a, b in zip(chain, chain[1:], strict=False)]
    firsts = sorted(by_instance.values(), key=lambda chain: chain[0]["started"])
    waits = [(chain[0]["created_at"] - chain[0]["started"]).total_seconds() for chain in firsts]
    # An instance is overtaken when one started more than a quota's worth of instances after it got its first task
    # before it did (those of one quota's worth are created at once, by concurrent decisions, in any order).
    overtaken = sum(1 for n, chain in enumerate(firsts)
                    if any(later[0]["created_at"] < chain[0]["created_at"] for later in firsts[n + quota:]))
    return {"seconds": round(seconds, 3), "tasks_per_s": round(len(tasks) / seconds, 1),
            "slots_busy": round(held / (quota * seconds), 3),
            "gap_ms": {"p50": round(percentile(gaps, 50), 1) if gaps else None,
                       "max": round(max(gaps), 1) if gaps else None},
            "first_task_wait_s": {"p50": round(percentile(waits, 50), 3), "max": round(max(waits), 3)},
            "overtaken": overtaken}


def waiting(server: db.Dsn, waiters: int, seconds: float) -> dict:
    """N instances deferred for one app's full quota, and the timers of another app due meanwhile."""
    dsn = server.with_database(f"{server.database}_room_{os.getpid()}_waiters")
    try:
        installer.migrate(dsn)
        with db.connect(dsn) as conn:
            admin = routines.namespace_bootstrap(conn, "bench")["token"]
            routines.app_put(conn, admin, "bench", "busy", 1)
            routines.app_put(conn, admin, "bench", "other", 1_000_000)
            routines.queue_put(conn, admin, "bench", "work", 1_000_000)
            token = routines.credential_create(conn, admin, "bench", "bench", ["workflows:start"])["token"]
            task = {"key": "t", "type": "TASK", "queue": "work", "handler": "example.echo", "handler_version": "1",
                    "input": {}, "task_timeout_ms": 3_600_000}
            routines.definition_publish(conn, admin, "bench", definitions.validate({"name": "task", "steps": [task]}))
            half = int(seconds * 500)
            timer = {"key": "w", "type": "TIMER", "delay_ms": half}
            routines.definition_publish(conn, admin, "bench", definitions.validate({"name": "timer", "steps": [timer]}))
            for n in range(waiters + 1):  # the first takes the slot, and its task is never claimed
                routines.instance_start(conn, token, "bench", definition="task", app="busy", input={},
                                        idempotency_key=f"w-{n}", deadline_ms=86_400_000)
        with engine_processes(dsn, ["orchestrator"]), db.connect(dsn) as conn:
            def looks() -> int:
                with conn.cursor() as cur:
                    cur.execute("SELECT COALESCE(SUM(deferrals), 0) AS n FROM weave_pending_advances")
                    return int(cur.fetchone()["n"])

            first = looks()
            began = time.monotonic()
            for n in range(200):
                routines.instance_start(conn, token, "bench", definition="timer", app="other", input={},
                                        idempotency_key=f"t-{n}", deadline_ms=86_400_000)
            time.sleep(max(0.0, seconds - (time.monotonic() - began)))
            rate = (looks() - first) / (time.monotonic() - began)
            with conn.cursor() as cur:
                cur.execute("SELECT TIMESTAMPDIFF(MICROSECOND, due_at, settled_at) / 1000 AS ms FROM weave_waits "
                            "WHERE kind = 'TIMER' ORDER BY ms")
                late = [float(r["ms"]) for r in cur.fetchall() if r["ms"] is not None]
            invariants.check(conn)
        return {"waiters": waiters, "seconds": seconds, "looks_per_s": round(rate, 1), "timers_settled": len(late),
                "timer_lateness_ms": {"p50": round(percentile(late, 50), 1) if late else None,
                                      "p99": round(percentile(late, 99), 1) if late else None}}
    finally:
        with db.connect(dsn, database=False) as conn, conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{dsn.database}`")


def run(server: db.Dsn, name: str, instances: int, steps: int, quota: int, task_ms: int) -> dict:
    dsn = server.with_database(f"{server.database}_room_{os.getpid()}_{name}")
    try:
        prepare(dsn, instances, steps, quota, task_ms)
        return measure(dsn, instances, quota)
    finally:
        with db.connect(dsn, database=False) as conn, conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{dsn.database}`")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dsn", default=os.environ.get("WEAVE_BENCH_DSN") or os.environ.get("WEAVE_TEST_DSN")
                        or "mysql://root@127.0.0.1:3306/weave_bench")
    parser.add_argument("--instances", type=int, default=40)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--quota", type=int, default=4)
    parser.add_argument("--task-ms", type=int, default=50)
    parser.add_argument("--waiters", type=int, default=0,
                        help="measure instead what N instances waiting for a full quota cost the rest of the server")
    parser.add_argument("--seconds", type=float, default=30.0, help="with --waiters: how long the orchestrator runs")
    args = parser.parse_args(argv)
    if min(args.instances, args.steps, args.quota) < 1 or args.task_ms < 0:
        parser.error("--instances, --steps and --quota must be at least 1, --task-ms at least 0")
    server = db.Dsn.parse(args.dsn)
    if args.waiters:
        print(json.dumps({"benchmark": "room waiters", **waiting(server, args.waiters, args.seconds)}), flush=True)
        return 0
    started = time.monotonic()
    reference = run(server, "free", args.instances, args.steps, args.instances, args.task_ms)
    limited = run(server, "quota", args.instances, args.steps, args.quota, args.task_ms)
    least = args.instances * args.steps * args.task_ms / 1000 / args.quota
    print(json.dumps({"benchmark": "room", "instances": args.instances, "steps": args.steps, "quota": args.quota,
                      "task_ms": args.task_ms, "least_s": round(least, 3), "weave": limited,
                      "reference": reference, "reference_is": "the same run with a quota that holds every task",
                      "ratio_to_least": round(limited["seconds"] / least, 2) if least else None,
                      "wall_s": round(time.monotonic() - started, 1)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
