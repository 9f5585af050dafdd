"""B-4 scan cost vs history (R-11): weave_scan time with an empty history and with 1,000,000 settled
rows in each candidate table, plus EXPLAIN of each candidate query.
Run: python -m tests.benchmarks.bench_scan [--rows 1000000] [--due 100]"""

from __future__ import annotations

import argparse
import time

from procedures import db as dbmod
from tests.benchmarks.common import figure, fresh_database, summary, world_on

# Settled history, bulk-inserted: the rows a busy install accumulates and the scan must not read.
HISTORY = {
    "pulse_inbox": "INSERT INTO pulse_inbox (namespace_id, task_id, instance_id, kind, result, occurred_at, state, "
                   "consumed_at, available_at) SELECT 1, n, n, 'SUCCEEDED', '{}', NOW(6), 'CONSUMED', NOW(6), "
                   "NOW(6) - INTERVAL 1 DAY FROM {seq}",
    "weave_signals": "INSERT INTO weave_signals (namespace_id, instance_id, idempotency_key, request_digest, name, "
                     "payload_version, target_step_key, target_activation_seq, correlation_key, payload, reason, "
                     "credential_id, actor, status, accepted_at, expires_at, available_at, consumed_at, receipt) "
                     "SELECT 1, n, CONCAT('k', n), REPEAT('0', 64), 's', '1', 'a', 1, 'c', '{}', 'r', 1, 'x', "
                     "'CONSUMED', NOW(6), NOW(6), NOW(6) - INTERVAL 1 DAY, NOW(6), '{}' FROM {seq}",
    "pulse_attempts": "INSERT INTO pulse_attempts (namespace_id, task_id, instance_id, attempt_no, worker_id, "
                      "status, lease_expires_at, started_at, ended_at) SELECT 1, n, n, 1, 'w', 'SUCCEEDED', "
                      "NOW(6) - INTERVAL 1 DAY, NOW(6), NOW(6) FROM {seq}",
    "pulse_tasks": "INSERT INTO pulse_tasks (namespace_id, app_id, queue_id, instance_id, step_key, activation_id, "
                   "handler, handler_version, input, priority, max_attempts, initial_backoff_ms, backoff_coefficient, "
                   "max_backoff_ms, timeout_ms, deadline_at, status, attempts_used, available_at, created_at, "
                   "updated_at) SELECT 1, 1, 1, n, 'a', n, 'h', '1', '{}', 0, 3, 1000, 2, 60000, 30000, "
                   "NOW(6) - INTERVAL 1 DAY, 'SUCCEEDED', 1, NOW(6), NOW(6), NOW(6) FROM {seq}",
}


def seq(rows: int) -> str:
    # A row generator both MariaDB and MySQL 8 accept: digits cross-joined, no sequence engine needed.
    digits = "(SELECT 0 d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL " \
             "SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9)"
    places = len(str(rows - 1))
    terms = " + ".join(f"d{i}.d * {10 ** i}" for i in range(places))
    joins = " CROSS JOIN ".join(f"{digits} d{i}" for i in range(places))
    return f"(SELECT {terms} + 1 AS n FROM {joins}) AS s WHERE n <= {rows}"


def time_scans(dsn, runs: int = 300) -> list[float]:
    conn = dbmod.connect(dsn)
    samples = []
    for _ in range(runs):
        t = time.perf_counter()
        dbmod.call(conn, "weave_scan", 100)
        samples.append((time.perf_counter() - t) * 1000)
    conn.close()
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--due", type=int, default=100, help="due checkpoints present during both runs")
    args = parser.parse_args()
    dsn = fresh_database("weave_bench_scan")
    world = world_on(dsn)
    world.publish({"name": "t", "steps": [{"key": "a", "type": "TIMER", "delay_ms": 1000}]})
    for i in range(args.due):
        world.start("t", key=f"due-{i}")  # each start activates its timer
    world.db.advance(1_001)  # every timer's checkpoint is due
    empty = time_scans(dsn)
    for table, sql in HISTORY.items():
        started = time.perf_counter()
        world.db.execute(sql.replace("{seq}", seq(args.rows)))
        figure("B-4 history fill", table=table, rows=args.rows, seconds=round(time.perf_counter() - started, 1))
    world.db.execute("ANALYZE TABLE pulse_inbox, weave_signals, pulse_attempts, pulse_tasks, weave_pending_advances")
    full = time_scans(dsn)
    figure("B-4 scan cost", history_rows_per_table=0, scan_ms=summary(empty))
    figure("B-4 scan cost", history_rows_per_table=args.rows, scan_ms=summary(full),
           ratio_p50=round(summary(full)["p50"] / summary(empty)["p50"], 2))
    text = world.db.rows("SELECT ROUTINE_DEFINITION AS d FROM information_schema.ROUTINES "
                         "WHERE ROUTINE_SCHEMA = DATABASE() AND ROUTINE_NAME = 'weave_scan'")[0]["d"]
    now = world.db.now().strftime("%Y-%m-%d %H:%M:%S.%f")
    for statement in text.split(";"):
        statement = statement.strip()
        for part in statement.split("UNION ALL"):  # the candidate classes are parts of one UNION ALL
            part = "\n".join(x for x in part.splitlines() if not x.strip().startswith("--")).strip().strip("()")
            if part.startswith("SELECT '"):
                sql = part.replace("v_now", f"'{now}'").replace("v_limit", "100")
                for row in world.db.rows("EXPLAIN " + sql):
                    figure("B-4 explain", query=sql.split("FROM ")[1].split(" ")[0], type=row["type"],
                           key=row["key"], rows=row["rows"], extra=row["Extra"])


if __name__ == "__main__":
    main()
