"""The database's CPU per decision, next to the raw 5-row procedure's per transaction, measured in the same run.

    python -m tests.benchmarks.bench_cpu [--n 400]

Statement counts (``bench_statements``) are the deterministic guide, but a statement is not a fixed price: one
multi-table update costs more than the single-row updates of the same rows (``bench_update_shapes``), and a
routine's first read of a table costs several times its second. This measures what the counts stand for: the server
process's own CPU time (its threads' run time, from /proc), over ``--n`` decisions of one kind made on one
connection (routines cached, as on a running node), beside the raw procedure of ``bench_signals`` (five inserts and
a commit in one call) made on the same connection. The decisions are made in slices of 20, each between two runs of
20 raw procedures, and each slice is a ratio to the raw procedure right around it: the machine's speed drifts
within a run, and the host's other load comes in bursts. A figure is the median of its slices (``ratio_quartiles``
gives their spread; ``ratio_mean`` the ratio of the totals). Every figure includes the call's round trip and, for
the decisions that commit, the commit. The server must run on this machine (its pid is read from ``@@pid_file``)
and be otherwise idle; the figures move with the machine, their ratio to the raw procedure less. Then one line per
lifecycle (a TIMER flow, a SIGNAL flow, a POLL round): the CPU of its decisions added up, and its cost in raw
procedures (the sum of their ratios). Not collected by pytest.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Callable
from dataclasses import dataclass

import orchestrator.example_handlers  # noqa: F401 - registers example.poll
from procedures import db as dbmod
from procedures import pulse, routines, signals
from tests.benchmarks.bench_signals import payload_json, raw_tx, reset_raw
from tests.benchmarks.common import check_invariants, figure, fresh_database, server_cpu_seconds, server_pid, world_on
from tests.support.signals import signal_flow

TIMER = {"name": "cpu-timer", "steps": [{"key": "wait", "type": "TIMER", "delay_ms": 1000}]}
CHAIN = {"name": "cpu-chain", "steps": [{"key": "first", "type": "TIMER", "delay_ms": 1000},
                                        {"key": "then", "type": "TIMER", "delay_ms": 1000, "after": ["first"]}]}
SIGNAL = signal_flow("cpu-signal")
SIGNAL_LATER = signal_flow("cpu-signal-later", before_timer_ms=3_600_000)  # its wait opens an hour after the start
POLL = {"name": "cpu-poll", "steps": [{
    "key": "check", "type": "POLL", "queue": "payments", "handler": "example.poll", "handler_version": "1",
    "input": {}, "interval_ms": 1000, "max_rounds": 5, "timeout_ms": 3_600_000, "task_timeout_ms": 600_000,
    "result": {"pending": ["PENDING"], "success": ["DONE"]}}]}


SLICE = 20  # decisions measured between two runs of the raw procedure

# What a lifecycle adds up to, in the decisions measured here (the orchestrator settles timers in batches; a POLL
# round is its task's claim, the report that consumes its PENDING answer, and the next round's start). The sum of
# the decisions' ratios is the lifecycle's cost in raw procedures, which docs/scaling.md sizes a primary by.
LIFECYCLES = {
    "TIMER (start, then a settlement among five per call)":
        ("start (TIMER, activated by the start)", "timer settle, 5 per call (each)"),
    "SIGNAL (start, then the send that settles its wait)":
        ("start (SIGNAL, its wait opened by the start)", "signal send (settles the open wait)"),
    "POLL round (claim, report, next round's start)":
        ("task claim (one task)", "attempt complete (PENDING, consumed in the report)", "poll round start"),
}


@dataclass
class Slices:
    """One kind of call measured in slices: the median slice's CPU per decision and its ratio to the raw procedure
    right around it, the quartiles of the ratios, the ratio of the totals, and the raw procedure's median CPU."""
    n: int
    ratios: list[float]
    us: float
    reference_us: float
    mean: float

    @property
    def ratio(self) -> float:
        return statistics.median(self.ratios)

    def figure(self) -> dict:
        r = sorted(self.ratios)
        return {"n": self.n, "slices": len(r), "cpu_us": round(self.us), "raw_procedure_us": round(self.reference_us),
                "ratio": round(self.ratio, 2), "ratio_quartiles": [round(r[len(r) // 4], 2),
                                                                   round(r[(3 * len(r)) // 4], 2)],
                "ratio_mean": round(self.mean, 2)}


class CpuMeter:
    """The server's CPU per call on one connection, next to the raw 5-row procedure's on the same connection (its
    table and routine must exist: ``reset_raw``)."""

    def __init__(self, conn: dbmod.Connection, payload: str) -> None:
        self.conn, self.payload = conn, payload
        self.pid = server_pid(conn)
        self.made = 0  # raw procedure calls made so far: each needs a key of its own

    def cpu(self) -> float:
        return server_cpu_seconds(self.pid)

    def raw_batch(self, count: int) -> float:
        """The raw procedure's CPU per transaction over ``count`` calls in a row."""
        before = self.cpu()
        for _ in range(count):
            self.made += 1
            with self.conn.cursor() as cur:
                raw_tx(cur, f"cpu-{self.made}", self.payload, self.made)
        return (self.cpu() - before) / count * 1e6

    def measure(self, calls: list[Callable[[], object]], decisions: int | None = None) -> Slices:
        """Make the calls in slices of about SLICE decisions (``decisions``: how many the calls make, one each by
        default), each slice between two runs of SLICE raw procedures, and give each slice's CPU per decision as
        a ratio to the raw procedure's right around it. The figures are the slices' medians: the host's other
        load comes in bursts that would move a whole figure, and moves a slice or two. The ratio of the totals
        is kept too: a steady background cost (purge) weighs on it as it does on a running node."""
        count = decisions or len(calls)
        per_call = count / len(calls)
        step = max(1, round(SLICE / per_call))
        slices, references, raw_total, decided_total = [], [], 0.0, 0.0
        around = self.raw_batch(SLICE)
        for first in range(0, len(calls), step):
            part = calls[first:first + step]
            before = self.cpu()
            for call in part:
                call()
            spent = self.cpu() - before
            after = self.raw_batch(SLICE)
            reference = (around + after) / 2
            us = spent / (len(part) * per_call) * 1e6
            slices.append((us, us / reference))
            references.append(reference)
            decided_total += spent
            raw_total += reference * len(part) * per_call / 1e6
            around = after
        return Slices(n=count, ratios=[r for _, r in slices], us=statistics.median(u for u, _ in slices),
                      reference_us=statistics.median(references), mean=decided_total / raw_total)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=400, help="decisions of each kind (default 400)")
    args = parser.parse_args()
    n = args.n
    dsn = fresh_database("weave_bench_cpu")
    world = world_on(dsn)
    for flow in (TIMER, CHAIN, SIGNAL, SIGNAL_LATER, POLL):
        world.publish(flow)
    reset_raw(dsn)
    conn = dbmod.connect(dsn)
    payload = payload_json(1024)
    meter = CpuMeter(conn, payload)
    measured: dict[str, tuple[float, float]] = {}  # decision -> (CPU µs, × the raw procedure)

    def measure(decision: str, calls: list[Callable[[], object]], decisions: int | None = None) -> None:
        slices = meter.measure(calls, decisions)
        measured[decision] = (slices.us, slices.ratio)
        figure("database CPU per decision", decision=decision, **slices.figure())

    def start(definition: str, i: int, input: dict | None = None) -> Callable[[], object]:
        return lambda: routines.instance_start(conn, world.token, world.namespace, definition=definition,
                                               app=world.app, input=input or {}, idempotency_key=f"{definition}-{i}",
                                               deadline_ms=86_400_000)

    def due(kind: str) -> list[int]:
        return [r["id"] for r in world.db.rows("SELECT id FROM weave_pending_advances WHERE kind = %s ORDER BY id",
                                                 kind)]

    def advance(ids: list[int]) -> Callable[[], object]:
        return lambda: dbmod.call(conn, "weave_candidates_advance", "CHECKPOINT", json.dumps(ids))

    dbmod.call(conn, "weave_scan", 100)  # the connection opened and the routines' first calls made
    # The reference alone first: four times as many, so that the clock's 10 ms ticks weigh as little on it.
    reference = meter.raw_batch(4 * n)
    figure("database CPU per decision", decision="raw 5-row procedure (reference)", n=4 * n, cpu_us=round(reference),
           raw_procedure_us=round(reference), ratio=1.0)

    measure("start (TIMER, activated by the start)", [start("cpu-timer", i) for i in range(n)])
    world.db.advance(1_001)
    timers = due("TIMER")
    half = len(timers) // 2
    measure("timer settle, one per call", [(lambda i=i: dbmod.call(conn, "weave_checkpoint_advance", i))
                                          for i in timers[:half]])
    rest = timers[half:]
    measure("timer settle, 5 per call (each)", [advance(rest[k:k + 5]) for k in range(0, len(rest), 5)],
            decisions=len(rest))

    # A settlement in the middle of a workflow: the first timer settles and the second is activated.
    for i in range(n):
        start("cpu-chain", i)()
    world.db.advance(1_001)
    measure("timer settle, its successor activated",
            [(lambda i=i: dbmod.call(conn, "weave_checkpoint_advance", i)) for i in due("TIMER")])

    measure("start (SIGNAL, its wait opened by the start)",
            [start("cpu-signal", i, {"order_id": f"o-{i}"}) for i in range(n)])
    def instances(definition: str) -> list[dict]:
        """Each instance of ``definition`` with its correlation key, in start order."""
        return world.db.rows("SELECT CONCAT('wf_', id) AS wf, JSON_VALUE(input, '$.order_id') AS corr "
                             "FROM weave_instances WHERE definition_name = %s ORDER BY id", definition)

    def send(w: dict) -> Callable[[], object]:
        return lambda: signals.send(conn, world.token, world.namespace, w["wf"], idempotency_key=f"s-{w['wf']}",
                                    name="approval.decided", payload_version="1", target_step_key="approval",
                                    target_activation_sequence=1, correlation_key=w["corr"], payload=payload,
                                    reason="bench")

    measure("signal send (settles the open wait)", [send(w) for w in instances("cpu-signal")])
    # Acceptance alone (B-1's acceptance row): early signals, stored PENDING, their step still behind its TIMER.
    for i in range(n):
        start("cpu-signal-later", i, {"order_id": f"o-{i}"})()
    measure("signal send (early: accepted, stored PENDING)", [send(w) for w in instances("cpu-signal-later")])

    measure("start (POLL, round 1 created by the start)", [start("cpu-poll", i) for i in range(n)])
    claimed: list[dict] = []
    measure("task claim (one task)", [lambda: claimed.extend(pulse.task_claim(conn, "w1", "payments", limit=1))
                                      for _ in range(n)])
    measure("task claim (nothing queued)", [lambda: pulse.task_claim(conn, "w1", "payments", limit=1)
                                            for _ in range(n)])
    measure("attempt complete (PENDING, consumed in the report)",
            [(lambda c=c: pulse.attempt_complete(conn, c["attempt_id"], "w1", {"status": "PENDING"}))
             for c in claimed])
    world.db.advance(1_001)
    measure("poll round start", [(lambda i=i: dbmod.call(conn, "weave_checkpoint_advance", i)) for i in due("POLL")])
    measure("scan (nothing due)", [lambda: dbmod.call(conn, "weave_scan", 100) for _ in range(n)])
    measure("idle probe", [lambda: dbmod.call(conn, "weave_scan_probe") for _ in range(n)])
    conn.close()
    for lifecycle, parts in LIFECYCLES.items():
        figure("database CPU per lifecycle", lifecycle=lifecycle, parts=list(parts),
               cpu_us=round(sum(measured[p][0] for p in parts)),
               raw_procedures=round(sum(measured[p][1] for p in parts), 1))
    check_invariants(dsn)


if __name__ == "__main__":
    main()
