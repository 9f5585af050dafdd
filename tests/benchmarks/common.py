"""Shared plumbing for benchmarks: a fresh test-clock database, figures as JSON lines, percentiles."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from procedures import db as dbmod
from procedures import installer, invariants
from tests.support.db import Db, reset
from tests.support.waiting import wait_for
from tests.support.world import World


def bench_dsn(name: str | None = None) -> dbmod.Dsn:
    """WEAVE_BENCH_DSN (default a local server's ``weave_bench``), or with ``name`` a database of a benchmark's own,
    named after its database, so that benchmarks of different users of one server never share one."""
    base = dbmod.Dsn.parse(os.environ.get("WEAVE_BENCH_DSN", "mysql://root@127.0.0.1:3306/weave_bench"))
    return base if name is None else base.with_database(f"{base.database}_{name.removeprefix('weave_bench_')}")


def drop_database(dsn: dbmod.Dsn) -> None:
    with dbmod.connect(dsn, database=False) as conn, conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{dsn.database}`")


def fresh_database(name: str) -> dbmod.Dsn:
    dsn = bench_dsn(name)
    drop_database(dsn)
    installer.migrate(dsn, test_clock=True)
    return dsn


ROOT = Path(__file__).resolve().parents[2]


@contextlib.contextmanager
def engine_processes(dsn: dbmod.Dsn, *commands: list[str]) -> Iterator[list[subprocess.Popen]]:
    """``weave`` daemons (each command: the arguments after ``orchestrator.cli``) on ``dsn``, quiet, stopped on the
    way out as an operator stops them (SIGTERM, then waited for)."""
    env = {**os.environ, "WEAVE_DSN": dsn.url(), "WEAVE_LOG_LEVEL": "WARNING"}
    procs = [subprocess.Popen([sys.executable, "-m", "orchestrator.cli", *command], cwd=ROOT, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for command in commands]
    try:
        yield procs
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            proc.wait(timeout=60)


def wait_until_counted(conn, sql: str, count: int, what: str, timeout: float = 600) -> None:
    """Waits until ``sql`` (a ``SELECT COUNT(*) AS n``) counts ``count``; a run that does not get there in
    ``timeout`` seconds ends the benchmark, saying ``what`` did not finish."""
    def done() -> bool:
        with conn.cursor() as cur:
            cur.execute(sql)
            return cur.fetchone()["n"] == count

    if not wait_for(done, timeout=timeout, interval=0.2):
        raise SystemExit(f"{what} did not finish in {timeout:g} s")


def world_on(dsn: dbmod.Dsn) -> World:
    handle = Db(dsn)
    reset(handle.conn)
    return World.create(handle, quota=1_000_000, capacity=1_000_000)


def wait_until_connected(db: Db, processes: int, timeout: float = 60) -> None:
    """Until ``processes`` other sessions are connected to ``db``'s database: each started engine process has
    imported its code and passed its level check, so a timed run that starts now does not time their boot."""

    assert wait_for(lambda: db.scalar("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE DB = DATABASE() "
                                      "AND ID <> CONNECTION_ID()") >= processes, timeout=timeout, interval=0.1), \
        f"{processes} engine processes did not connect within {timeout:.0f} s"


@contextlib.contextmanager
def process_logs(name: str) -> Iterator[Path]:
    """A folder for the logs of a benchmark's engine processes: removed when the benchmark succeeds, kept (and
    named on stdout) when it fails, so a failed run can be read and a good one leaves nothing behind."""
    logs = Path(tempfile.mkdtemp(prefix=f"weave-bench-{name}-"))
    try:
        yield logs
    except BaseException:
        print(f"process logs kept in {logs}", flush=True)
        raise
    shutil.rmtree(logs, ignore_errors=True)


def ascending_counts(text: str) -> list[int]:
    """A comma list of positive counts in ascending order, each measure's (an argparse type)."""
    try:
        counts = [int(n) for n in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"a comma list of counts, got {text!r}") from None
    if counts != sorted(counts) or counts[0] < 1:
        raise argparse.ArgumentTypeError(f"positive counts in ascending order, got {text!r}")
    return counts


def figure(benchmark: str, **values) -> None:
    print(json.dumps({"benchmark": benchmark, **values}), flush=True)


def percentile(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1))))
    return ordered[k]


def summary(values: list[float]) -> dict:
    return {"p50": round(percentile(values, 50), 3), "p99": round(percentile(values, 99), 3),
            "max": round(max(values), 3) if values else None, "mean": round(statistics.fmean(values), 3)}


def check_invariants(dsn: dbmod.Dsn) -> None:
    with dbmod.connect(dsn) as conn:
        broken = invariants.violations(conn)
    if broken:
        print(f"INVARIANTS BROKEN: {broken}", file=sys.stderr)
        raise SystemExit(1)


# Where the CPU goes, from /proc: a process tree, the database server, the machine.
def cpu_seconds(pid: int) -> float:
    """User+system CPU seconds of a process and its children (live and reaped), from /proc."""
    total = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    pending = [pid]
    while pending:
        p = pending.pop()
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            total += sum(int(x) for x in fields[11:15]) / tick  # utime stime cutime cstime
            for task in Path(f"/proc/{p}/task").iterdir():
                pending += [int(c) for c in (task / "children").read_text().split()]
        except (OSError, ValueError):
            continue
    return total


def server_pid(conn: dbmod.Connection) -> int:
    """The server's process id, or SystemExit when the server is not a process of this machine."""
    with conn.cursor() as cur:
        cur.execute("SELECT @@pid_file AS f, @@datadir AS d")
        row = cur.fetchone()
    path = Path(row["f"]) if os.path.isabs(row["f"]) else Path(row["d"]) / row["f"]
    try:
        pid = int(path.read_text().split()[0])
        Path(f"/proc/{pid}/stat").read_text()
    except (OSError, ValueError, IndexError) as exc:
        raise SystemExit(f"this benchmark needs the server on this machine: its pid file {path} is not readable here "
                         f"({exc})") from exc
    return pid


def local_server_pid(conn: dbmod.Connection) -> int | None:
    """The server's process id, or None when the server is not a process of this machine (its CPU is then not
    measured here)."""
    try:
        return server_pid(conn)
    except SystemExit:
        return None


def server_cpu_seconds(pid: int) -> float:
    """The server's CPU seconds so far, to the nanosecond: the sum of its threads' run times (schedstat). The
    process's user and system times count in 10 ms ticks, a tenth of the CPU a few hundred decisions spend;
    without schedstat, they are what is left."""
    try:
        return sum(int((task / "schedstat").read_text().split()[0])
                   for task in Path(f"/proc/{pid}/task").iterdir()) / 1e9
    except (OSError, ValueError, IndexError):
        return cpu_seconds(pid)


def machine_cpu_seconds() -> float:
    """The machine's busy CPU seconds so far, all cores together: /proc/stat's time in everything but idle and I/O
    wait."""
    ticks = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")
