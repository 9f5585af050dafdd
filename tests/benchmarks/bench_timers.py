"""B-2 timer storm: N timers due at the same instant; settle throughput and lateness with 1 and 2
orchestrator processes. Run: python -m tests.benchmarks.bench_timers [--timers 10000] [--nodes 1,2]

All timers are activated first, then the test clock jumps past every due time at once: the storm
starts at that engine instant. Lateness is settled_at - max(due_at, storm start), from database times.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from tests.benchmarks import common
from tests.benchmarks.common import check_invariants, figure, fresh_database, summary, wait_until_connected, world_on
from tests.support.load import start_many
from tests.support.processes import WeaveProcess
from tests.support.waiting import wait_for


def storm(timers: int, nodes: int, concurrency: int, logs: Path) -> None:
    dsn = fresh_database(f"weave_bench_timers_{nodes}")
    world = world_on(dsn)
    world.publish({"name": "storm", "steps": [{"key": "t", "type": "TIMER", "delay_ms": 60_000}]})
    start_many(world, "storm", timers, threads=8)  # each start activates its timer
    assert world.db.scalar("SELECT COUNT(*) FROM weave_waits WHERE status = 'WAITING'") == timers
    procs = [WeaveProcess(dsn, "orchestrator", "--concurrency", str(concurrency), log=logs / f"o{i}.log")
             for i in range(nodes)]
    try:
        # The storm comes due on running nodes (idle, probing), as it would in production: their start-up is
        # not part of the measured span.
        wait_until_connected(world.db, nodes)
        storm_start = world.db.advance(120_000)
        # Every settlement removes its timer's checkpoint: the storm is over when none is left. An empty index is
        # all this look reads (counting the settled waits read every wait, five times a second, beside the storm).
        done = wait_for(lambda: world.db.scalar("SELECT NOT EXISTS (SELECT 1 FROM weave_pending_advances)"),
                        timeout=600, interval=0.2)
    finally:
        for p in procs:
            p.terminate()
            p.close()
    assert done, "the storm did not finish"
    settled = world.db.scalar("SELECT COUNT(*) FROM weave_waits WHERE status = 'SATISFIED'")
    assert settled == timers, f"{settled} of {timers} timers settled; logs in {logs}"
    rows = world.db.rows("SELECT due_at, settled_at FROM weave_waits")
    lateness = [(r["settled_at"] - max(r["due_at"], storm_start)).total_seconds() for r in rows]
    span = (max(r["settled_at"] for r in rows) - storm_start).total_seconds()
    figure("B-2 timer storm", timers=timers, orchestrators=nodes, concurrency_per_node=concurrency,
           settled_per_s=round(timers / span, 1), lateness_s=summary(lateness))
    check_invariants(dsn)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--timers", type=int, default=10_000)
    parser.add_argument("--nodes", default="1,2")
    parser.add_argument("--concurrency", type=int, default=4, help="advance connections per orchestrator")
    args = parser.parse_args()
    for nodes in (int(n) for n in args.nodes.split(",")):
        with common.process_logs("timers") as logs:
            storm(args.timers, nodes, args.concurrency, logs)


if __name__ == "__main__":
    main()
