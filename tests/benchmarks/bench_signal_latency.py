"""Signal accepted -> wait settled, at a paced rate: N instances wait in a SIGNAL step; one real ``weave
orchestrator`` process runs; a sender calls ``weave_signal_send`` open-loop at --rate signals/s. The latency is
the wait's settled_at minus the signal's accepted_at, both database times (so client and process start-up do
not count); a wait settled at Send shows 0. The send call's own duration, as the client sees it, is printed
beside it. The peer figure is DBOS's paced send -> recv (``peer_dbos.py signal --rate 50``).

    python -m tests.benchmarks.bench_signal_latency [--signals 250] [--rate 50]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from procedures import db as dbmod
from procedures import signals
from tests.benchmarks.common import check_invariants, figure, fresh_database, process_logs, summary, world_on
from tests.support.processes import WeaveProcess
from tests.support.signals import signal_flow
from tests.support.waiting import wait_for


def run(count: int, rate: float, logs: Path) -> dict:
    dsn = fresh_database("weave_bench_signal_latency")
    world = world_on(dsn)
    world.publish(signal_flow("paced"))
    for i in range(count):
        world.start("paced", {"order_id": f"o-{i}"}, key=f"paced-{i}")  # each start opens its wait
    waiting = world.db.scalar("SELECT COUNT(*) FROM weave_waits WHERE status = 'WAITING'")
    assert waiting == count, f"{waiting} of {count} waits open"
    targets = world.db.rows("SELECT CONCAT('wf_', i.id) AS wf, JSON_VALUE(i.input, '$.order_id') AS corr "
                            "FROM weave_instances i ORDER BY i.id")
    proc = WeaveProcess(dsn, "orchestrator", env={"WEAVE_LOG_LEVEL": "WARNING"}, log=logs / "o.log")
    conn = dbmod.connect(dsn)
    try:
        time.sleep(1.0)  # the orchestrator is up and idle
        started = time.perf_counter()
        calls = []
        for n, target in enumerate(targets):
            pause = started + n / rate - time.perf_counter()
            if pause > 0:
                time.sleep(pause)
            t0 = time.perf_counter()
            signals.send(conn, world.token, world.namespace, target["wf"], idempotency_key=f"k-{n}",
                         name="approval.decided", payload_version="1", target_step_key="approval",
                         target_activation_sequence=1, correlation_key=target["corr"],
                         payload='{"approved": true}', reason="paced", evidence_ref=None)
            calls.append((time.perf_counter() - t0) * 1000)
        done = wait_for(lambda: world.db.scalar("SELECT COUNT(*) FROM weave_waits WHERE status = 'SATISFIED'")
                        == count, timeout=120, interval=0.2)
    finally:
        conn.close()
        proc.terminate()
        proc.close()
    assert done, f"not every wait settled; logs in {logs}"
    rows = world.db.rows("SELECT TIMESTAMPDIFF(MICROSECOND, s.accepted_at, w.settled_at) / 1000 AS ms "
                         "FROM weave_waits w JOIN weave_signals s ON s.id = w.winner_signal_id")
    check_invariants(dsn)
    return {"latency_ms": summary([float(r["ms"]) for r in rows]), "send_call_ms": summary(calls)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--signals", type=int, default=250)
    parser.add_argument("--rate", type=float, default=50.0)
    args = parser.parse_args()
    with process_logs("latency") as logs:
        figures = run(args.signals, args.rate, logs)
    figure("signal accepted to wait settled", signals=args.signals, rate_per_s=args.rate, **figures)


if __name__ == "__main__":
    main()
