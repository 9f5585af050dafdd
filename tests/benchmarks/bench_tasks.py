"""Benchmark: Pulse tasks claimed and completed per second by real ``weave worker`` processes.

    python -m tests.benchmarks.bench_tasks [--tasks 3000] [--dsn mysql://root@127.0.0.1:3306/x]

Not collected by pytest (run on demand). For each figure a fresh database gets ``--tasks`` QUEUED tasks
of a TASK step with the no-op ``example.echo`` handler, created through the engine itself (instances
started, ROOT advanced by the orchestrator); then the workers start and the figure is measured from the
database's own timestamps: tasks / (last attempt end - first attempt start), so process start-up does
not count. Prints one JSON line per figure; the M-4 invariants are checked after every run (Q-3).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from orchestrator.loop import Orchestrator
from procedures import db, definitions, installer, invariants, routines
from tests.benchmarks.common import engine_processes, wait_until_counted


def prepare(dsn: db.Dsn, tasks: int) -> None:
    installer.migrate(dsn)
    with db.connect(dsn) as conn:
        admin = routines.namespace_bootstrap(conn, "bench")["token"]
        routines.app_put(conn, admin, "bench", "app", 1_000_000)
        routines.queue_put(conn, admin, "bench", "work", 1_000_000)
        token = routines.credential_create(conn, admin, "bench", "bench", ["workflows:start"])["token"]
        doc = {"name": "echo", "steps": [{"key": "t", "type": "TASK", "queue": "work", "handler": "example.echo",
                                          "handler_version": "1", "input": {"n": "$.input.n"},
                                          "task_timeout_ms": 3_600_000}]}
        routines.definition_publish(conn, admin, "bench", definitions.validate(doc))
        for n in range(tasks):
            routines.instance_start(conn, token, "bench", definition="echo", app="app", input={"n": n},
                                    idempotency_key=f"b-{n}", deadline_ms=86_400_000)
    orch = Orchestrator(dsn, concurrency=4)
    try:
        orch.drain()
    finally:
        orch.close()
    with db.connect(dsn) as conn, conn.cursor() as cur:
        cur.execute("SELECT COUNT(*) AS n FROM pulse_tasks WHERE status = 'QUEUED'")
        assert cur.fetchone()["n"] == tasks, "every instance should have created its task"


def measure(dsn: db.Dsn, tasks: int, workers: int, concurrency: int) -> dict:
    workers_run = [["worker", "--handlers", "orchestrator.example_handlers", "--queue", "work", "--concurrency",
                    str(concurrency), "--worker-id", f"bench-{n}"] for n in range(workers)]
    with engine_processes(dsn, *workers_run), db.connect(dsn) as conn:
        wait_until_counted(conn, "SELECT COUNT(*) AS n FROM pulse_tasks WHERE status = 'SUCCEEDED'", tasks,
                           "the workers' tasks")
        with conn.cursor() as cur:
            cur.execute("SELECT MIN(started_at) AS first, MAX(ended_at) AS last, COUNT(*) AS attempts, "
                        "COUNT(DISTINCT worker_id) AS workers FROM pulse_attempts")
            row = cur.fetchone()
        invariants.check(conn)
    seconds = (row["last"] - row["first"]).total_seconds()
    return {"benchmark": "pulse_tasks", "figure": "tasks_claimed_and_completed_per_s", "workers": workers,
            "concurrency": concurrency, "tasks": tasks, "attempts": row["attempts"],
            "workers_that_claimed": row["workers"], "seconds": round(seconds, 3),
            "tasks_per_s": round(tasks / seconds, 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dsn", default=os.environ.get("WEAVE_BENCH_DSN") or os.environ.get("WEAVE_TEST_DSN")
                        or "mysql://root@127.0.0.1:3306/weave_bench")
    parser.add_argument("--tasks", type=int, default=3000)
    parser.add_argument("--runs", default="1x8,2x8", help="comma list of WORKERSxCONCURRENCY (default 1x8,2x8)")
    args = parser.parse_args(argv)
    server = db.Dsn.parse(args.dsn)
    for spec in args.runs.split(","):
        workers, concurrency = (int(x) for x in spec.lower().split("x"))
        dsn = server.with_database(f"weave_bench_{os.getpid()}_{workers}x{concurrency}")
        try:
            started = time.monotonic()
            prepare(dsn, args.tasks)
            prepared = time.monotonic() - started
            figure = measure(dsn, args.tasks, workers, concurrency)
            figure["prepare_s"] = round(prepared, 1)
            print(json.dumps(figure), flush=True)
        finally:
            with db.connect(dsn, database=False) as conn, conn.cursor() as cur:
                cur.execute(f"DROP DATABASE IF EXISTS `{dsn.database}`")
    return 0


if __name__ == "__main__":
    sys.exit(main())
