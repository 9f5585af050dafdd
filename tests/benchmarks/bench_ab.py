"""The database's CPU per decision of two builds of the engine, side by side on one server, in alternating slices.

    python -m tests.benchmarks.bench_ab --base REV [--head REV] [--n 400] [--decisions early-send,timer-start]

``bench_cpu`` measures one build against the raw procedure, and two of its runs, one per build, differ by as much
as the machine drifts between them (about ±10 % here): a change of a few per cent is not seen. This installs each
build's routines in a database of its own on the same server (``--base`` and ``--head`` name commits, checked out
in temporary worktrees; without ``--head``, this checkout as it stands), prepares the same work in both, and then
makes the decisions in slices of 20, one build's slice right after the other's, the first of each pair taken in
turn. Each pair is a ratio (head over base) made within a second of the machine's time, and the figure is the
median of the pairs, with their quartiles: what the host's load does to one slice it does to its neighbour. Each
build is driven by its own code (a process started in its tree, which runs this file's worker with that tree's
packages), so the builds' Python interfaces may differ as far as the worker's few calls reach. The server must run
on this machine (its pid is read from ``@@pid_file``) and be otherwise idle. Not collected by pytest.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SLICE = 20

# Each kind of decision: what the worker prepares, then the calls it makes one slice at a time.
DECISIONS = {
    "timer-start": "start (TIMER, activated by the start)",
    "signal-start": "start (SIGNAL, its wait opened an hour later)",
    "early-send": "signal send (early: accepted, stored PENDING)",
    "settling-send": "signal send (settles the open wait)",
    "timer-settle": "timer settle, one per call",
    "timer-settle-5": "timer settle, 5 per call (each)",
    "chain-settle": "timer settle, its successor activated",
    "fork-settle": "timer settle, its sibling still waiting",
    "task-claim": "task claim (one task)",
    "attempt-complete": "attempt complete (PENDING, consumed in the report)",
    "poll-round-start": "poll round start",
}
# Two timers side by side: the first settles, the second waits on (no step left to activate).
FORK = {"name": "ab-fork", "steps": [{"key": "first", "type": "TIMER", "delay_ms": 1_000},
                                     {"key": "second", "type": "TIMER", "delay_ms": 3_600_000}]}
# Decisions made several to a call: each slice makes SLICE of them in SLICE / PER_CALL calls.
PER_CALL = {"timer-settle-5": 5}


def worker(side: str, decision: str, n: int) -> None:
    """Run in a build's own tree: prepare ``n`` decisions of one kind in a database of that build (named after
    WEAVE_BENCH_DSN's, as every benchmark's), then make them a slice at a time as the driver asks (one line on
    stdin, the slice's number; one line back when it is made). The flows are ``bench_cpu``'s, as that tree has them."""
    import orchestrator.example_handlers  # noqa: F401 - registers example.poll
    from procedures import db as dbmod
    from procedures import pulse, routines, signals
    from tests.benchmarks.bench_cpu import CHAIN, POLL, SIGNAL, SIGNAL_LATER, TIMER
    from tests.benchmarks.bench_signals import payload_json
    from tests.benchmarks.common import check_invariants, fresh_database, world_on

    dsn = fresh_database(f"ab_{side}")
    world = world_on(dsn)
    for flow in (TIMER, SIGNAL, SIGNAL_LATER, POLL, CHAIN, FORK):
        world.publish(flow)
    conn = dbmod.connect(dsn)
    payload = payload_json(1024)

    def start(definition: str, i: int, input: dict | None = None) -> Callable[[], object]:
        return lambda: routines.instance_start(conn, world.token, world.namespace, definition=definition,
                                               app=world.app, input=input or {}, idempotency_key=f"{definition}-{i}",
                                               deadline_ms=86_400_000)

    def sends(definition: str) -> list[Callable[[], object]]:
        for i in range(n):
            start(definition, i, {"order_id": f"o-{i}"})()
        rows = world.db.rows("SELECT CONCAT('wf_', id) AS wf, JSON_VALUE(input, '$.order_id') AS corr "
                             "FROM weave_instances WHERE definition_name = %s ORDER BY id", definition)
        return [lambda r=r: signals.send(conn, world.token, world.namespace, r["wf"], idempotency_key=f"s-{r['wf']}",
                                         name="approval.decided", payload_version="1", target_step_key="approval",
                                         target_activation_sequence=1, correlation_key=r["corr"], payload=payload,
                                         reason="bench") for r in rows]

    def due_ids(kind: str) -> list[int]:
        return [r["id"] for r in world.db.rows("SELECT id FROM weave_pending_advances WHERE kind = %s ORDER BY id",
                                               kind)]

    for i in range(SLICE):  # the connection opened and the routines' first calls made
        start(TIMER["name"], 1_000_000 + i)()
    calls: list[Callable[[], object]]
    if decision == "timer-start":
        calls = [start(TIMER["name"], i) for i in range(n)]
    elif decision == "signal-start":
        calls = [start(SIGNAL_LATER["name"], i, {"order_id": f"o-{i}"}) for i in range(n)]
    elif decision == "early-send":
        calls = sends(SIGNAL_LATER["name"])
    elif decision == "settling-send":
        calls = sends(SIGNAL["name"])
    elif decision in ("chain-settle", "fork-settle"):  # the first of two timers settles
        flow = CHAIN if decision == "chain-settle" else FORK
        for i in range(n):
            start(flow["name"], i)()
        world.db.advance(1_001)
        first = world.db.rows("SELECT c.id FROM weave_pending_advances c JOIN weave_instances i ON i.id = "
                              "c.instance_id WHERE i.definition_name = %s AND c.step_key = 'first' ORDER BY c.id",
                              flow["name"])
        calls = [lambda i=r["id"]: dbmod.call(conn, "weave_checkpoint_advance", i) for r in first]
    elif decision in ("timer-settle", "timer-settle-5"):
        for i in range(n):
            start(TIMER["name"], i)()
        world.db.advance(1_001)
        due = due_ids("TIMER")[:n]
        if decision == "timer-settle":
            calls = [lambda i=i: dbmod.call(conn, "weave_checkpoint_advance", i) for i in due]
        else:
            calls = [lambda k=k: dbmod.call(conn, "weave_candidates_advance", "CHECKPOINT", json.dumps(due[k:k + 5]))
                     for k in range(0, len(due), 5)]
    else:  # the three decisions of a POLL round
        for i in range(n):
            start(POLL["name"], i)()
        if decision == "task-claim":
            calls = [lambda: pulse.task_claim(conn, "w1", "payments", limit=1) for _ in range(n)]
        else:
            claimed = [task for _ in range(n) for task in pulse.task_claim(conn, "w1", "payments", limit=1)]
            reports = [lambda c=c: pulse.attempt_complete(conn, c["attempt_id"], "w1", {"status": "PENDING"})
                       for c in claimed]
            if decision == "attempt-complete":
                calls = reports
            else:  # poll-round-start
                for report in reports:
                    report()
                world.db.advance(1_001)
                calls = [lambda i=i: dbmod.call(conn, "weave_checkpoint_advance", i) for i in due_ids("POLL")[:n]]
    per_call = PER_CALL.get(decision, 1)
    print(json.dumps({"side": side, "ready": len(calls) * per_call}), flush=True)
    for line in sys.stdin:
        k = int(line)
        for call in calls[k * SLICE // per_call:(k + 1) * SLICE // per_call]:
            call()
        print("done", flush=True)
    conn.close()
    check_invariants(dsn)
    with dbmod.connect(dsn, database=False) as admin, admin.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{dsn.database}`")


@contextlib.contextmanager
def checkout(rev: str | None) -> Iterator[Path]:
    """The tree of commit ``rev`` (a temporary worktree, removed afterwards), or this checkout when None."""
    if rev is None:
        yield ROOT
        return
    folder = Path(tempfile.mkdtemp(prefix="weave-ab-"))
    tree = folder / "tree"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(tree), rev], check=True)
    try:
        yield tree
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=False)
        folder.rmdir()


def compare(trees: dict[str, Path], decision: str, n: int) -> dict:
    """The head/base ratios of one kind of decision, slice pair by slice pair."""
    from procedures import db as dbmod
    from tests.benchmarks.common import bench_dsn, server_cpu_seconds, server_pid

    workers = {}
    for side, tree in trees.items():
        workers[side] = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--worker", side, decision, str(n)],
            cwd=tree, env={**os.environ, "PYTHONPATH": str(tree)}, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            text=True)
    try:
        ready = {side: json.loads(w.stdout.readline() or "{}").get("ready") for side, w in workers.items()}
        if None in ready.values():
            raise SystemExit(f"a worker did not start: {ready}")
        with dbmod.connect(bench_dsn(), database=False) as conn:
            pid = server_pid(conn)
        slices = min(ready.values()) // SLICE
        us: dict[str, list[float]] = {side: [] for side in workers}
        ratios = []
        for k in range(slices):
            spent = {}
            for side in (("base", "head") if k % 2 == 0 else ("head", "base")):
                before = server_cpu_seconds(pid)
                workers[side].stdin.write(f"{k}\n")
                workers[side].stdin.flush()
                if workers[side].stdout.readline().strip() != "done":
                    raise SystemExit(f"the {side} worker stopped")
                spent[side] = (server_cpu_seconds(pid) - before) / SLICE * 1e6
                us[side].append(spent[side])
            ratios.append(spent["head"] / spent["base"])
    finally:
        for w in workers.values():
            w.stdin.close()
        failed = [side for side, w in workers.items() if w.wait(timeout=300) != 0]
    if failed:  # its invariants broken (printed), or it stopped
        raise SystemExit(f"the {' and '.join(failed)} worker failed")
    r = sorted(ratios)
    return {"decision": DECISIONS[decision], "slices": len(r), "base_cpu_us": round(statistics.median(us["base"])),
            "head_cpu_us": round(statistics.median(us["head"])), "head_over_base": round(statistics.median(r), 3),
            "quartiles": [round(r[len(r) // 4], 3), round(r[(3 * len(r)) // 4], 3)]}


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        side, decision, n = sys.argv[2:5]
        worker(side, decision, int(n))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", required=True, help="the commit measured against (any git revision)")
    parser.add_argument("--head", help="the commit measured (default: this checkout as it stands)")
    parser.add_argument("--n", type=int, default=400, help="decisions of each kind per build (default 400)")
    parser.add_argument("--decisions", default="early-send,timer-start",
                        help=f"comma-separated, of: {', '.join(DECISIONS)} (default early-send,timer-start)")
    args = parser.parse_args()
    decisions = args.decisions.split(",")
    unknown = [d for d in decisions if d not in DECISIONS]
    if unknown:
        parser.error(f"unknown decisions {unknown}; known: {', '.join(DECISIONS)}")
    if args.n < 2 * SLICE:
        parser.error(f"--n must be at least {2 * SLICE}: two slices of {SLICE}")
    sys.path.insert(0, str(ROOT))
    from tests.benchmarks.common import figure

    with checkout(args.base) as base_tree, checkout(args.head) as head_tree:
        for decision in decisions:
            figure("database CPU per decision, head over base", base=args.base, head=args.head or "working tree",
                   **compare({"base": base_tree, "head": head_tree}, decision, args.n))


if __name__ == "__main__":
    main()
