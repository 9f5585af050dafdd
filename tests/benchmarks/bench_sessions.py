"""The database's CPU per decision against the number of sessions deciding at once, next to the raw 5-row
procedure's at the same numbers, measured in the same run.

    python -m tests.benchmarks.bench_sessions [--cycles 800] [--threads 1,2,4,8,16] [--repeat 2]

``bench_cpu`` measures a decision on one connection, one call after another. Under load the same decisions cost the
server more: B-3's rounds alone spend about twice the CPU per statement that ``bench_cpu``'s decisions do. This
measures by how much, and whether it is the engine's or the server's: ``--cycles`` POLL rounds' claim and report
(one task claimed, its PENDING answer reported and consumed), made by T threads at once, each on a connection of its
own with the routines cached; then as many raw procedures (``bench_signals``'s five inserts and a commit) made the
same way. Per T: the server's CPU per cycle and per raw procedure (its threads' run time, from /proc), their ratio,
the cycles and raw procedures per second, and the cores the server used. The thread counts are measured in turns,
``--repeat`` times over, so that the machine's drift within the run falls on each of them alike. The server must run
on this machine and be otherwise idle. Not collected by pytest.
"""

from __future__ import annotations

import argparse
import time
import uuid
from collections.abc import Callable

import orchestrator.example_handlers  # noqa: F401 - registers example.poll
from procedures import db as dbmod
from procedures import pulse
from tests.benchmarks.bench_cpu import POLL
from tests.benchmarks.bench_signals import payload_json, raw_tx, reset_raw
from tests.benchmarks.common import check_invariants, figure, fresh_database, server_cpu_seconds, server_pid, world_on
from tests.support.load import start_many
from tests.support.threads import run_threads


def measured(pid: int, threads: int, count: int, one: Callable[[int], object]) -> tuple[float, float, float]:
    """``count`` calls of ``one(thread)`` spread over ``threads`` threads: the server's CPU µs per call, calls per
    second, and the server's cores over the time they took."""
    per = count // threads
    before, began = server_cpu_seconds(pid), time.monotonic()
    run_threads(lambda k: [one(k) for _ in range(per)], threads)
    spent, wall = server_cpu_seconds(pid) - before, time.monotonic() - began
    return spent / (per * threads) * 1e6, per * threads / wall, spent / wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=800, help="claim-and-report cycles per measurement (default 800)")
    parser.add_argument("--threads", default="1,2,4,8,16", help="comma list of sessions at once (default 1,2,4,8,16)")
    parser.add_argument("--repeat", type=int, default=2, help="turns over the thread counts (default 2)")
    args = parser.parse_args()
    plan = [int(t) for t in args.threads.split(",")]
    if not plan or min(plan) < 1 or args.cycles < max(plan) or args.repeat < 1:
        parser.error("--threads must be whole numbers of at least 1, and --cycles at least the largest of them")
    dsn = fresh_database("weave_bench_sessions")
    world = world_on(dsn)
    world.publish(POLL)
    reset_raw(dsn)
    conns = [dbmod.connect(dsn) for _ in range(max(plan))]
    pid = server_pid(conns[0])
    payload = payload_json(1024)
    # One POLL per cycle, its round 1 queued; and one more per connection, for each one's first (uncounted) cycle.
    start_many(world, "cpu-poll", args.cycles * len(plan) * args.repeat + len(conns), threads=8)

    def cycle(k: int) -> None:
        claimed = pulse.task_claim(conns[k], f"w{k}", "payments", limit=1)
        pulse.attempt_complete(conns[k], claimed[0]["attempt_id"], f"w{k}", {"status": "PENDING"})

    def raw(k: int) -> None:
        with conns[k].cursor() as cur:
            raw_tx(cur, f"s-{uuid.uuid4().hex}", payload, 1)  # a key unique per call whatever thread makes it

    for k in range(len(conns)):  # every connection's routines parsed before anything is measured
        cycle(k)
        raw(k)
    results: dict[int, list[tuple[float, float, float, float, float]]] = {t: [] for t in plan}
    for _ in range(args.repeat):
        for t in plan:
            us, per_s, cores = measured(pid, t, args.cycles, cycle)
            raw_us, raw_per_s, _ = measured(pid, t, args.cycles, raw)
            results[t].append((us, per_s, cores, raw_us, raw_per_s))
    for t in plan:
        runs = results[t]
        figure("server CPU per decision against sessions at once", threads=t,
               cycle="a POLL round's claim of one task and the report that consumes its PENDING answer",
               cycle_cpu_us=[round(r[0]) for r in runs], cycles_per_s=[round(r[1]) for r in runs],
               server_cores=[round(r[2], 2) for r in runs], raw_procedure_cpu_us=[round(r[3]) for r in runs],
               raw_per_s=[round(r[4]) for r in runs], ratio=[round(r[0] / r[3], 1) for r in runs])
    for conn in conns:
        conn.close()
    check_invariants(dsn)


if __name__ == "__main__":
    main()
