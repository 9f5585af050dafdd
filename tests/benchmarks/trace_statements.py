"""Where a lifecycle's database time goes, statement by statement: the server's own timing of every statement
of one lifecycle (a client's CALL and every statement run inside it, nested calls included), the median of
several runs. Statement counts say how many; this says which of them cost.

    python -m tests.benchmarks.trace_statements --flow timer --runs 20

Runs on a private server of its own (a temporary directory, its own socket, ``performance_schema`` on), never on
the shared one: the instrumentation is a server setting. One JSON line per statement, connection by connection
and each connection's in execution order, with its nesting depth under the client's call, its median and its
range over the runs in microseconds, and its text (shortened), a CALL also with its own time (what it spends
outside the statements it runs); then one line per client call. A routine's own instructions (its variables,
SETs and IFs) and a cursor's query (a claim's pick) are not lines of their own but part of that own time, so a
claim that picks shows one statement fewer than the session counters count. Times include the instrumentation's
overhead and are those of a lifecycle among others, caches warm with the engine's other work rather than with a
loop of one statement: a statement costs here several times what it costs repeated in a loop inside one
procedure. Not collected by pytest; timings are never asserted.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pymysql

from orchestrator.embedded import EmbeddedServer
from procedures import db as dbmod
from procedures import installer
from tests.benchmarks.common import figure
from tests.benchmarks.statements import Census, Stage

# Statements only, the routines' own control flow (SET, jumps, handlers) left out; a history long enough for
# a POLL lifecycle of three rounds.
INSTRUMENTED = ("--performance-schema=ON", "--performance-schema-consumer-events-statements-current=ON",
                "--performance-schema-consumer-events-statements-history-long=ON",
                "--performance-schema-events-statements-history-long-size=100000",
                "--performance-schema-instrument=statement/sp/%=OFF",
                "--performance-schema-instrument=statement/sp/stmt=ON")

OTHERS = """THREAD_ID NOT IN (SELECT THREAD_ID FROM performance_schema.threads
                                WHERE PROCESSLIST_ID IN (CONNECTION_ID(), %s))"""

HISTORY = f"""SELECT NESTING_EVENT_LEVEL AS depth, TIMER_WAIT / 1000000 AS us,
                    LEFT(REGEXP_REPLACE(SQL_TEXT, '\\\\s+', ' '), 110) AS text
               FROM performance_schema.events_statements_history_long
              WHERE {OTHERS} AND SQL_TEXT IS NOT NULL
                AND SQL_TEXT NOT LIKE 'SHOW SESSION STATUS%%'  -- the census's, not the lifecycle's
                -- a connection's own setup, which the census leaves out too (a running node opens it once)
                AND NOT (NESTING_EVENT_LEVEL = 0 AND (SQL_TEXT LIKE 'SET NAMES %%'
                                                      OR SQL_TEXT LIKE 'SET SESSION sql\\_mode=%%'))
              ORDER BY THREAD_ID, EVENT_ID"""


@dataclass
class Step:
    depth: int
    text: str
    times: list[float] = field(default_factory=list)


def _key(depth: int, text: str) -> str:
    # A client's CALL carries its arguments (ids, keys) that differ from run to run: its routine names it.
    return text.split("(")[0] if depth == 0 else text


def trace(stage: Stage, kind: str, runs: int, probe: pymysql.Connection) -> list[Step]:
    """The statements of ``runs`` lifecycles of ``kind`` after one to warm up, matched run by run by their
    position and text (a lifecycle runs the same statements every time)."""
    lifecycle = getattr(stage, f"{kind}_lifecycle")
    lifecycle()
    steps: list[Step] = []
    with probe.cursor() as cur:
        for run in range(runs):
            cur.execute("TRUNCATE performance_schema.events_statements_history_long")
            lifecycle()
            # A client has its answer a moment before the server records the statement as ended: one more
            # statement on every connection (the census's reading of its counters) makes the history complete.
            stage.census.total()
            cur.execute(HISTORY, (stage.db.conn.thread_id(),))
            rows = cur.fetchall()
            if run == 0:
                steps = [Step(int(r["depth"] or 0), _key(int(r["depth"] or 0), r["text"])) for r in rows]
            keys = [_key(int(r["depth"] or 0), r["text"]) for r in rows]
            if keys != [s.text for s in steps]:
                first = [s.text for s in steps]
                pairs = enumerate(zip(first, keys, strict=False))
                at = next((i for i, (a, b) in pairs if a != b), min(len(first), len(keys)))
                raise SystemExit(f"run {run + 1} of the {kind} lifecycle ran other statements than the first "
                                 f"({len(keys)} against {len(first)}; from statement {at + 1}: "
                                 f"{keys[at:at + 2]} against {first[at:at + 2]})")
            for step, row in zip(steps, rows, strict=True):
                step.times.append(float(row["us"]))
    return steps


def calls(steps: list[Step]) -> Iterator[tuple[str, float, int]]:
    """Each client call with its median and the number of statements it ran, its own included."""
    for i, step in enumerate(steps):
        if step.depth == 0:
            inside = next((j for j in range(i + 1, len(steps)) if steps[j].depth == 0), len(steps)) - i
            yield step.text, statistics.median(step.times), inside


def own_times(steps: list[Step]) -> list[float | None]:
    """For each CALL, the median time it spends outside the statements it runs directly (its variables, SETs and
    IFs, a cursor's query, the call itself); None for any other statement."""
    medians = [statistics.median(step.times) for step in steps]
    own: list[float | None] = []
    for i, step in enumerate(steps):
        if not step.text.startswith("CALL "):
            own.append(None)
            continue
        children = 0.0
        for j in range(i + 1, len(steps)):
            if steps[j].depth <= step.depth:
                break
            if steps[j].depth == step.depth + 1:
                children += medians[j]
        own.append(medians[i] - children)
    return own


def traced(kind: str, runs: int) -> list[Step]:
    """``trace`` on a private instrumented server, started for it and removed after."""
    with tempfile.TemporaryDirectory(prefix="weave-trace-") as folder:
        server = EmbeddedServer(Path(folder), database="weave_trace", fast_commit=True, options=INSTRUMENTED)
        dsn = server.start()
        try:
            installer.migrate(dsn, test_clock=True)
            with dbmod.connect(dsn) as probe, Census() as census:
                stage = Stage(dsn, census)
                try:
                    return trace(stage, kind, runs, probe)
                finally:
                    stage.close()
        finally:
            server.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--flow", choices=("timer", "signal", "poll"), default="timer", help="the lifecycle to trace")
    ap.add_argument("--runs", type=int, default=20, help="lifecycles measured after one to warm up (default 20)")
    args = ap.parse_args()
    if args.runs < 1:
        ap.error("--runs must be at least 1")
    steps = traced(args.flow, args.runs)
    for step, own in zip(steps, own_times(steps), strict=True):
        figure("statement time in a lifecycle", flow=args.flow, depth=step.depth,
               median_us=round(statistics.median(step.times), 1),
               spread_us=[round(min(step.times), 1), round(max(step.times), 1)],
               **({} if own is None else {"own_us": round(own, 1)}), statement=step.text)
    for routine, median, inside in calls(steps):
        figure("call time in a lifecycle", flow=args.flow, call=routine, median_us=round(median, 1),
               statements=inside)


if __name__ == "__main__":
    main()
