#!/usr/bin/env python3
"""B-1 (SQL part): signal acceptance through `CALL weave_signal_send`, beside the raw limit.

For each concurrency C, two measurements run back to back on the same server and DSN:

  raw   the physical limit of a durable write of our kind: one `CALL bench_tx(...)` per transaction,
        five INSERTs (signal with a 1 KiB JSON payload, checkpoint, event, audit, receipt; two secondary
        indexes each) and COMMIT inside the procedure (the `proc` mode of ../shared/bench/limit_mariadb.py,
        reimplemented here so that both sides share one connection setup);
  call  `CALL weave_signal_send(...)` with a 1 KiB JSON payload into an active SIGNAL wait: the full
        acceptance (authentication, validation, locks, idempotency, stored signal, checkpoint, event,
        audit, frozen receipt), each signal a first acceptance with a distinct key.

C client processes (one connection each) run back to back for --seconds after --warmup; every process
sends to its own instances, so senders contend only where the engine makes them (shared rows of the
namespace, app and credential), as independent senders would. One JSON line per figure, then one line
per C with the ratio call/raw (target: >= 0.5, spec 08). The M-4 invariants are checked after the run.

Usage (not collected by pytest):
  .venv/bin/python tests/benchmarks/bench_signals.py --dsn mysql://root@127.0.0.1:3306/weave_bench
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import statistics
import sys
import time
import uuid
from http.client import HTTPConnection
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from orchestrator.loop import Orchestrator  # noqa: E402
from procedures import (  # noqa: E402
    db,
    definitions,  # noqa: E402
    installer,
    invariants,
    routines,
)
from procedures.logs import configure_logging  # noqa: E402

RAW_TABLES = [
    """CREATE TABLE bench_signal (
         id BIGINT UNSIGNED AUTO_INCREMENT PRIMARY KEY, workflow_id CHAR(32) NOT NULL, topic VARCHAR(64) NOT NULL,
         idem_key VARCHAR(100) NOT NULL, payload JSON NOT NULL,
         created_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6), consumed_at DATETIME(6) NULL,
         UNIQUE KEY uq_idem (idem_key), KEY ix_wf_topic (workflow_id, topic, consumed_at)) ENGINE=InnoDB""",
    """CREATE TABLE bench_checkpoint (
         id BIGINT UNSIGNED AUTO_INCREMENT PRIMARY KEY, workflow_id CHAR(32) NOT NULL, step_no INT NOT NULL,
         output JSON NULL, created_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
         UNIQUE KEY uq_wf_step (workflow_id, step_no), KEY ix_created (created_at)) ENGINE=InnoDB""",
    """CREATE TABLE bench_event (
         id BIGINT UNSIGNED AUTO_INCREMENT PRIMARY KEY, workflow_id CHAR(32) NOT NULL, kind VARCHAR(32) NOT NULL,
         detail VARCHAR(255) NULL, created_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
         KEY ix_wf (workflow_id, id), KEY ix_kind (kind, created_at)) ENGINE=InnoDB""",
    """CREATE TABLE bench_audit (
         id BIGINT UNSIGNED AUTO_INCREMENT PRIMARY KEY, workflow_id CHAR(32) NOT NULL, actor VARCHAR(64) NOT NULL,
         action VARCHAR(64) NOT NULL, created_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
         KEY ix_wf (workflow_id), KEY ix_created (created_at)) ENGINE=InnoDB""",
    """CREATE TABLE bench_receipt (
         id BIGINT UNSIGNED AUTO_INCREMENT PRIMARY KEY, signal_id BIGINT UNSIGNED NOT NULL,
         workflow_id CHAR(32) NOT NULL, received_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
         UNIQUE KEY uq_signal (signal_id), KEY ix_wf (workflow_id)) ENGINE=InnoDB""",
]
RAW_PROC = """
CREATE PROCEDURE bench_tx(IN p_wf CHAR(32), IN p_key VARCHAR(100), IN p_payload JSON, IN p_step INT)
BEGIN
  DECLARE v_sig BIGINT UNSIGNED;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
  START TRANSACTION;
  INSERT INTO bench_signal (workflow_id, topic, idem_key, payload) VALUES (p_wf, 'sig', p_key, p_payload);
  SET v_sig = LAST_INSERT_ID();
  INSERT INTO bench_checkpoint (workflow_id, step_no, output) VALUES (p_wf, p_step, '{"status":"RECEIVED"}');
  INSERT INTO bench_event (workflow_id, kind, detail) VALUES (p_wf, 'signal_received', 'topic=sig');
  INSERT INTO bench_audit (workflow_id, actor, action) VALUES (p_wf, 'bench', 'deliver_signal');
  INSERT INTO bench_receipt (signal_id, workflow_id) VALUES (v_sig, p_wf);
  COMMIT;
END
"""
RAW_NAMES = ["bench_signal", "bench_checkpoint", "bench_event", "bench_audit", "bench_receipt"]
FLOW = {"name": "bench-approval", "steps": [{
    "key": "approval", "type": "SIGNAL",
    "signal": {"name": "approval.decided", "payload_version": "1", "payload_type": "object"},
    "correlation": "$.input.order_id", "timeout_ms": 86_400_000}]}
INSTANCES_PER_SENDER = 24


API_ADDRESS = ["127.0.0.1", 18089]  # the port is --api-port


def payload_json(nbytes: int) -> str:
    base = json.dumps({"kind": "signal", "pad": ""})
    return json.dumps({"kind": "signal", "pad": "x" * max(0, nbytes - len(base))})


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    k = max(0, min(len(s) - 1, int(round(p / 100.0 * len(s) + 0.5)) - 1))
    return s[k]


# --- setup ---------------------------------------------------------------------------------------------------------
def prepare(dsn: db.Dsn) -> dict:
    with db.connect(dsn, database=False) as conn, conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{dsn.database}`")
    installer.migrate(dsn)
    with db.connect(dsn) as conn:
        admin = routines.namespace_bootstrap(conn, "bench")["token"]
        routines.app_put(conn, admin, "bench", "billing", 100_000)
        token = routines.credential_create(conn, admin, "bench", "sender",
                                           ["workflows:start", "workflows:signal", "workflows:read"])["token"]
        routines.definition_publish(conn, admin, "bench", definitions.validate(FLOW))
        with conn.cursor() as cur:
            cur.execute("SHOW GLOBAL VARIABLES WHERE Variable_name IN ('version', 'innodb_flush_log_at_trx_commit', "
                        "'sync_binlog', 'log_bin', 'innodb_buffer_pool_size')")
            settings = {r["Variable_name"]: r["Value"] for r in cur.fetchall()}
    return {"token": token, "settings": settings}


def start_instances(dsn: db.Dsn, token: str, n: int) -> list[str]:
    """n instances whose SIGNAL wait is active (activated by an in-process orchestrator)."""
    with db.connect(dsn) as conn:
        ids = [routines.instance_start(conn, token, "bench", definition="bench-approval", app="billing",
                                       input={"order_id": f"o-{i}"}, idempotency_key=uuid.uuid4().hex,
                                       deadline_ms=86_400_000)["workflow_id"] for i in range(n)]
    orch = Orchestrator(dsn, concurrency=4)
    try:
        orch.drain()
    finally:
        orch.close()
    return ids


def reset_raw(dsn: db.Dsn) -> None:
    with db.connect(dsn) as conn, conn.cursor() as cur:
        cur.execute("DROP PROCEDURE IF EXISTS bench_tx")
        for t in RAW_NAMES:
            cur.execute(f"DROP TABLE IF EXISTS {t}")
        for ddl in RAW_TABLES:
            cur.execute(ddl)
        cur.execute(RAW_PROC)


# --- workers -------------------------------------------------------------------------------------------------------
def worker(mode, dsn_url, token, instances, payload_bytes, wid, go, t_end_box, q):
    conn = db.connect(dsn_url)
    cur = conn.cursor()
    http = HTTPConnection(*API_ADDRESS) if mode == "http" else None
    payload = payload_json(payload_bytes)
    tag = uuid.uuid4().hex[:8]
    lat: list[tuple[float, float]] = []
    errors = 0
    go.wait()
    t_end = t_end_box.value
    i = 0
    while True:
        t0 = time.time()
        if t0 >= t_end:
            break
        if mode == "raw":
            cur.execute("CALL bench_tx(%s, %s, %s, %s)", (uuid.uuid4().hex, f"{tag}-{wid}-{i}", payload, i))
        elif mode == "http":
            k = i % len(instances)
            body = json.dumps({"name": "approval.decided", "payload_version": "1", "target_step_key": "approval",
                               "target_activation_sequence": 1, "correlation_key": instances[k][1],
                               "reason": "bench"})[:-1] + f', "payload": {payload}}}'
            try:
                http.request("POST", f"/v1/namespaces/bench/workflows/{instances[k][0]}/signals", body=body,
                             headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json",
                                      "Idempotency-Key": f"{tag}-{wid}-{i}"})
                answer = http.getresponse()
                answer.read()
                if answer.status != 201:
                    errors += 1
            except Exception:
                errors += 1
                http.close()
        else:
            k = i % len(instances)
            try:
                cur.execute("CALL weave_signal_send(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                            (token, "bench", instances[k][0], f"{tag}-{wid}-{i}", "approval.decided", "1",
                             "approval", 1, instances[k][1], payload, "bench", None))
                row = cur.fetchone()
                while cur.nextset():
                    pass
                if row["status"] != "PENDING":
                    errors += 1
            except Exception:
                errors += 1
        lat.append((t0, time.time() - t0))
        i += 1
    conn.close()
    q.put((lat, errors))


def run(mode: str, args, c: int, token: str, instances: list[tuple[str, str]]) -> dict:
    ctx = mp.get_context("fork")
    go, q = ctx.Event(), ctx.Queue()
    t_end_box = ctx.Value("d", 0.0)
    procs = []
    for w in range(c):
        mine = instances[w::c]
        procs.append(ctx.Process(target=worker, args=(mode, args.dsn, token, mine, args.payload_bytes, w, go,
                                                      t_end_box, q)))
    for p in procs:
        p.start()
    time.sleep(0.5)
    t_start = time.time()
    t_end_box.value = t_start + args.warmup + args.seconds
    go.set()
    parts = [q.get() for _ in procs]
    for p in procs:
        p.join()
    w0 = t_start + args.warmup
    lat = [d * 1000 for pl, _ in parts for (t0, d) in pl if t0 >= w0]
    return {"n": len(lat), "per_s": round(len(lat) / args.seconds, 1), "p50_ms": round(pct(lat, 50), 3),
            "p99_ms": round(pct(lat, 99), 3), "errors": sum(e for _, e in parts)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dsn", default="mysql://root@127.0.0.1:3306/weave_bench_signals",
                    help="a database to create (dropped first)")
    ap.add_argument("--conns", default="1,4,16")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--warmup", type=float, default=1.0)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--payload-bytes", type=int, default=1024)
    ap.add_argument("--http", action="store_true", help="also measure POST /signals through gunicorn")
    ap.add_argument("--api-workers", type=int, default=4)
    ap.add_argument("--api-port", type=int, default=API_ADDRESS[1])
    args = ap.parse_args()
    API_ADDRESS[1] = args.api_port
    dsn = db.Dsn.parse(args.dsn)
    configure_logging("WARNING")

    setup = prepare(dsn)
    print(json.dumps({"bench": "B-1", "server": setup["settings"], "dsn": dsn.redacted()}), flush=True)
    results: dict[tuple[str, int], list[dict]] = {}
    api = None
    if args.http:
        from tests.support.processes import WeaveProcess
        from tests.support.waiting import wait_for

        api = WeaveProcess(dsn, "api", "--bind", f"{API_ADDRESS[0]}:{API_ADDRESS[1]}", "--workers",
                           str(args.api_workers))

        def ready() -> bool:
            try:
                probe = HTTPConnection(*API_ADDRESS, timeout=2)
                probe.request("GET", "/readyz")
                return probe.getresponse().status == 200
            except OSError:
                return False

        assert wait_for(ready, timeout=30), "the API did not come up"
    for run_no in range(1, args.repeat + 1):
        for c in [int(x) for x in args.conns.split(",")]:
            reset_raw(dsn)
            raw = run("raw", args, c, setup["token"], [])
            wfs = start_instances(dsn, setup["token"], c * INSTANCES_PER_SENDER)
            call = run("call", args, c, setup["token"], [(wf, f"o-{i}") for i, wf in enumerate(wfs)])
            measured = [("raw", raw), ("call", call)]
            if api is not None:
                wfs = start_instances(dsn, setup["token"], c * INSTANCES_PER_SENDER)
                measured.append(("http", run("http", args, c, setup["token"],
                                             [(wf, f"o-{i}") for i, wf in enumerate(wfs)])))
            for mode, row in measured:
                line = {"bench": "B-1", "path": mode, "conns": c, "run": run_no, **row}
                results.setdefault((mode, c), []).append(line)
                print(json.dumps(line), flush=True)
            print(json.dumps({"bench": "B-1", "figure": "call_vs_raw", "conns": c, "run": run_no,
                              "ratio": round(call["per_s"] / raw["per_s"], 3)}), flush=True)
    if args.repeat > 1:
        for (mode, c), rows in results.items():
            print(json.dumps({"bench": "B-1", "summary": "median", "path": mode, "conns": c,
                              **{k: statistics.median(r[k] for r in rows) for k in ("per_s", "p50_ms", "p99_ms")}}),
                  flush=True)
    if api is not None:
        api.terminate()
        api.close()
    with db.connect(dsn) as conn:
        broken = invariants.violations(conn)
    print(json.dumps({"bench": "B-1", "invariants_ok": not broken, "broken": broken}), flush=True)
    return 0 if not broken else 1


if __name__ == "__main__":
    sys.exit(main())
