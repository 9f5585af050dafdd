"""B-3 poll rounds: N POLL steps x 3 rounds (PENDING, PENDING, DONE) with the no-op ``example.poll``
handler, run end to end by real ``weave orchestrator`` and ``weave worker`` processes.

    python -m tests.benchmarks.bench_polls [--polls 1000] [--runs 1x1,2x2] [--interval-ms 200] [--aligned]

Not collected by pytest (run on demand). The processes start first; the instances are started on them (each
start activates its POLL step and creates round 1), and the processes do the rest: consumption of every
answer, the next rounds after the interval, the settlement. The figure comes from the database's own
timestamps: rounds / (last step settled - first round created), so process start-up does not count.
End to end, the starts are part of the span: each costs the database about as much as a round (its first round's
task is created in it). ``--aligned`` measures the polling alone, as the peer's ``--aligned`` does: every poll is
started before the processes (round 1 queued), and the span begins with the first claim (round 1's
``round_created_to_consumed_ms`` then includes its wait for the processes).
``row_lock_waits`` and ``row_lock_wait_ms_per_round`` are the server's row lock waits over the run (on a shared
server, other sessions' waits count too): where one row serialises the decisions of an app, they show it.
``statements_per_round`` and ``client_statements_per_round`` are the server's statements (``Com_*``, nested ones
included) and the clients' own (``Questions``) over the run, per round: a round's all-in count under load, with its
claims and reports batched as the processes batch them. ``statement_kinds_per_round`` splits the first by kind (each
kind of at least one in twenty rounds): ``begin`` counts the transactions, so claims that bring fewer tasks each show
as more ``begin``, ``commit`` and ``set_option`` a round. ``cpu_ms_per_round`` and ``cpu_cores`` say where the
machine's CPU went over the run: the server (when it runs on this machine), the orchestrators, the workers, and this
process, which makes the starts.
The peer figure (DBOS Transact, ../bench, interval 0.2 s) is about 100 rounds/s on this kind of machine.
Prints one JSON line per figure; the M-4 invariants are checked after every run (Q-3).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from tests.benchmarks import common
from tests.benchmarks.common import (
    check_invariants,
    cpu_seconds,
    figure,
    fresh_database,
    local_server_pid,
    server_cpu_seconds,
    summary,
    wait_until_connected,
    world_on,
)
from tests.benchmarks.statements import statement_total
from tests.support.load import start_many
from tests.support.processes import WeaveProcess
from tests.support.waiting import wait_for

ROUNDS = 3


def server_counts(db) -> dict[str, int]:
    """The server's row lock waits so far and their time, its statements and client calls, and its statements of
    each kind (``Com_select`` as ``select``; every session's: on a shared server, others' count too)."""
    rows = {r["Variable_name"]: int(r["Value"]) for r in db.rows(
        "SHOW GLOBAL STATUS WHERE Variable_name IN ('Innodb_row_lock_waits', 'Innodb_row_lock_time', 'Questions') "
        "OR Variable_name LIKE 'Com\\_%%'")}
    kinds = {k.removeprefix("Com_"): v for k, v in rows.items() if k.startswith("Com_") and k != "Com_show_status"}
    return {"waits": rows["Innodb_row_lock_waits"], "ms": rows["Innodb_row_lock_time"], "questions": rows["Questions"],
            "statements": statement_total(rows), **{f"kind:{k}": v for k, v in kinds.items()}}


def cpu_now(server: int | None, procs: list[WeaveProcess]) -> dict[str, float]:
    """CPU seconds so far of the server, of the orchestrators and of the workers (each kind summed), and of this
    process (the starts' client). ``server``: the server's process id, None when it is not a process of this machine.
    """
    times = os.times()
    out = {"orchestrators": 0.0, "workers": 0.0, "client": times.user + times.system}
    if server is not None:
        out["server"] = server_cpu_seconds(server)
    for p in procs:
        out["orchestrators" if p.args[0] == "orchestrator" else "workers"] += cpu_seconds(p.proc.pid)
    return out


def flow(interval_ms: int) -> dict:
    return {"name": "bench-poll", "steps": [{
        "key": "check", "type": "POLL", "queue": "payments", "handler": "example.poll", "handler_version": "1",
        "input": {"n": "$.input.n", "done_at": ROUNDS}, "interval_ms": interval_ms, "max_rounds": ROUNDS,
        "timeout_ms": 3_600_000, "task_timeout_ms": 600_000,
        "result": {"pending": ["PENDING"], "success": ["DONE"]}}]}


def run(polls: int, orchestrators: int, workers: int, interval_ms: int, concurrency: int,
        worker_concurrency: int, logs: Path, aligned: bool = False, start_threads: int = 8) -> None:
    dsn = fresh_database(f"weave_bench_polls_{orchestrators}x{workers}{'_aligned' if aligned else ''}")
    world = world_on(dsn)
    world.publish(flow(interval_ms))
    db = world.db
    server = local_server_pid(db.conn)  # None: a server elsewhere, its CPU not measured here
    if aligned:
        # Every poll started (its round 1 queued) before any process runs: the span then begins with the first claim
        # and measures the polling alone, as the peer's aligned mode does.
        start_many(world, "bench-poll", polls, threads=start_threads)
    env = {"WEAVE_LOG_LEVEL": "WARNING"}
    procs = [WeaveProcess(dsn, "orchestrator", "--concurrency", str(concurrency), env=env, log=logs / f"o{i}.log")
             for i in range(orchestrators)]
    procs += [WeaveProcess(dsn, "worker", "--handlers", "orchestrator.example_handlers", "--queue", "payments",
                           "--concurrency", str(worker_concurrency), env=env, log=logs / f"w{i}.log")
              for i in range(workers)]
    try:
        # The polls start on running processes: their start-up is not part of the measured span (which begins
        # with the first round).
        wait_until_connected(db, orchestrators + workers)
        counts_before = server_counts(db)
        cpu_before = cpu_now(server, procs)
        began = time.monotonic()
        if not aligned:
            start_many(world, "bench-poll", polls, threads=start_threads)
        # Done when none is RUNNING (a range of the status index that empties; counting the SUCCEEDED ones read every
        # instance, five times a second, beside the rounds); that all of them SUCCEEDED is checked after.
        done = wait_for(lambda: not db.scalar(
            "SELECT EXISTS (SELECT 1 FROM weave_instances WHERE namespace_id = "
            "(SELECT id FROM weave_namespaces WHERE name = %s) AND status = 'RUNNING')", world.namespace),
            timeout=900, interval=0.2)
        counts = {k: v - counts_before[k] for k, v in server_counts(db).items()}
        cpu = {k: v - cpu_before[k] for k, v in cpu_now(server, procs).items()}
        measured = time.monotonic() - began
    finally:
        for p in procs:
            p.terminate()
            p.close()
    assert done, f"the polls did not finish; logs in {logs}"
    succeeded = db.scalar("SELECT COUNT(*) FROM weave_instances WHERE status = 'SUCCEEDED'")
    assert succeeded == polls, f"{succeeded} of {polls} polls succeeded; logs in {logs}"
    span = db.row("SELECT MIN(r.created_at) AS first, MAX(a.ended_at) AS last, COUNT(*) AS rounds "
                  "FROM weave_poll_rounds r JOIN weave_activations a ON a.id = r.activation_id")
    if aligned:
        span["first"] = db.scalar("SELECT MIN(started_at) FROM pulse_attempts")
    assert span["rounds"] == polls * ROUNDS, "every poll runs exactly three rounds"
    seconds = (span["last"] - span["first"]).total_seconds()
    # Per round: from the round's creation to its answer being consumed (the next round or the settlement).
    lag = db.rows("SELECT TIMESTAMPDIFF(MICROSECOND, r.created_at, i.consumed_at) / 1000 AS ms "
                  "FROM weave_poll_rounds r JOIN pulse_inbox i ON i.task_id = r.task_id")
    # Per round after the first: from its due time (the interval after the answer before) to its start, as the round's
    # own event records it. A round waits here when creations queue for their app, and after its creation when the
    # workers are behind.
    late = db.rows("SELECT JSON_VALUE(data, '$.lateness_ms') AS ms FROM weave_events WHERE type = 'POLL_ROUND_STARTED'")
    figure("B-3 poll rounds", polls=polls, rounds=span["rounds"], interval_ms=interval_ms, aligned=aligned,
           orchestrators=orchestrators, concurrency_per_orchestrator=concurrency, workers=workers,
           concurrency_per_worker=worker_concurrency, seconds=round(seconds, 3),
           rounds_per_s=round(span["rounds"] / seconds, 1), polls_per_s=round(polls / seconds, 1),
           round_start_after_due_ms=summary([float(r["ms"]) for r in late]),
           round_created_to_consumed_ms=summary([float(r["ms"]) for r in lag]),
           row_lock_waits=counts["waits"], row_lock_wait_ms_per_round=round(counts["ms"] / span["rounds"], 2),
           statements_per_round=round(counts["statements"] / span["rounds"], 1),
           client_statements_per_round=round(counts["questions"] / span["rounds"], 2),
           statement_kinds_per_round={k.removeprefix("kind:"): round(v / span["rounds"], 2)
                                      for k, v in sorted(counts.items(), key=lambda kv: -kv[1])
                                      if k.startswith("kind:") and v >= span["rounds"] / 20},
           cpu_ms_per_round={k: round(v * 1000 / span["rounds"], 3) for k, v in cpu.items()},
           cpu_cores={k: round(v / measured, 2) for k, v in cpu.items()})
    check_invariants(dsn)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--polls", type=int, default=1_000)
    parser.add_argument("--runs", default="1x1,2x2", help="comma list of ORCHESTRATORSxWORKERS (default 1x1,2x2)")
    parser.add_argument("--interval-ms", type=int, default=200, help="interval between rounds (the peer uses 200)")
    parser.add_argument("--concurrency", type=int, default=4, help="advance connections per orchestrator")
    parser.add_argument("--worker-concurrency", type=int, default=8, help="attempts at once per worker")
    parser.add_argument("--aligned", action="store_true",
                        help="start every poll before the processes, and count from the first claim: the polling "
                             "without its start phase (the peer's --aligned)")
    parser.add_argument("--start-threads", type=int, default=8, help="connections the polls are started on (default 8)")
    args = parser.parse_args()
    for spec in args.runs.split(","):
        orchestrators, workers = (int(x) for x in spec.lower().split("x"))
        with common.process_logs("polls") as logs:
            run(args.polls, orchestrators, workers, args.interval_ms, args.concurrency, args.worker_concurrency, logs,
                args.aligned, args.start_threads)


if __name__ == "__main__":
    main()
