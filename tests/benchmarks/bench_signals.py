#!/usr/bin/env python3
"""B-1: signal sends through `CALL weave_signal_send` and over HTTP, beside the raw limit.

For each concurrency C, these measurements run back to back on the same server and DSN:

  raw     the physical limit of a durable write of our kind: one `CALL bench_tx(...)` per transaction,
          five INSERTs (signal with a 1 KiB JSON payload, checkpoint, event, audit, receipt; two secondary
          indexes each) and COMMIT inside the procedure (the `proc` mode of ../shared/bench/limit_mariadb.py,
          reimplemented here so that both sides share one connection setup);
  call    `CALL weave_signal_send(...)` with a 1 KiB JSON payload, every send to its own open SIGNAL wait:
          the full acceptance (authentication, validation, locks, idempotency, stored signal, checkpoint,
          event, audit, frozen receipt) and the settlement of the wait in the same transaction, which ends
          the one-step instance (SUCCEEDED). DBOS's peer figure is the same shape: one send per parked recv;
  http    the same as `call`, as POST /signals through `weave api` (gunicorn), for the C of --http-conns;
  accept  (--accept) acceptance only: sends to instances whose SIGNAL step is not activated yet, so each
          signal is stored PENDING as an early signal and nothing is settled; instances are reused.

The instances with an open wait are prepared before each timed run (outside the timing): enough for
--pool-share of the raw rate at that C (HTTP: 1.5 times the CALL rate) over warmup and measurement. A sender
that uses up its instances stops; the measured window then ends when the first sender stopped (``window_s``,
``exhausted``), so the rate is always over a time in which every sender was sending. Every send is checked:
a REJECTED receipt counts in ``errors``, and a wait sent to that is not SATISFIED afterwards, or its instance
not SUCCEEDED, in ``not_settled``.

C client processes (one connection each) run back to back for --seconds after --warmup; every process
sends to its own instances, so senders contend only where the engine makes them (shared rows of the
namespace, app and credential), as independent senders would. Only the sends that succeeded count in ``n``
and ``per_s`` (``first_error`` shows what a failed one answered). One JSON line per figure, then one line
per C with the ratio call/raw (target: >= 0.5, spec 08). With --http the API's CPU time per request is
printed too (``api_cpu_ms_per_request``, its processes' user+system time), and after the timed runs its floor:
the same API's CPU per ``GET /healthz`` (no database, no body) over one kept-alive connection, what gunicorn and
Falcon cost a request before the engine's work. Every path's line also says where the machine's CPU went per call
made (warm-up included): ``machine_cpu_ms_per_call``, all cores' busy time, and ``server_cpu_ms_per_call``, the
database server's, when it is a process of this machine; over HTTP the rest of the machine's is the API's and the
client's. The M-4 invariants are checked after the run.

Usage (not collected by pytest):
  .venv/bin/python tests/benchmarks/bench_signals.py --dsn mysql://root@127.0.0.1:3306/weave_bench
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import statistics
import sys
import time
import uuid
from http.client import HTTPConnection
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from procedures import (  # noqa: E402
    db,
    definitions,  # noqa: E402
    installer,
    invariants,
    routines,
)
from procedures.logs import configure_logging  # noqa: E402
from tests.benchmarks.common import cpu_seconds, local_server_pid, machine_cpu_seconds, server_cpu_seconds  # noqa: E402

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


def raw_tx(cur, key: str, payload: str, step: int) -> None:
    """One raw 5-row transaction (``RAW_PROC``), for a workflow of its own: ``key`` must be unique per call."""
    cur.execute("CALL bench_tx(%s, %s, %s, %s)", (uuid.uuid4().hex, key, payload, step))
FLOW = {"name": "bench-approval", "steps": [{
    "key": "approval", "type": "SIGNAL",
    "signal": {"name": "approval.decided", "payload_version": "1", "payload_type": "object"},
    "correlation": "$.input.order_id", "timeout_ms": 86_400_000}]}
# --accept: the same SIGNAL step after an hour's TIMER, so that it is not active yet when the signals arrive.
FLOW_LATER = {"name": "bench-approval-later", "steps": [{"key": "cool_off", "type": "TIMER", "delay_ms": 3_600_000},
                                                        {**FLOW["steps"][0], "after": ["cool_off"]}]}
ACCEPT_INSTANCES_PER_SENDER = 24  # --accept: early signals, so instances are reused
STARTERS = 4  # processes that start the prepared instances


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
        routines.app_put(conn, admin, "bench", "billing", 1_000_000)
        token = routines.credential_create(conn, admin, "bench", "sender",
                                           ["workflows:start", "workflows:signal", "workflows:read"])["token"]
        for flow in (FLOW, FLOW_LATER):
            routines.definition_publish(conn, admin, "bench", definitions.validate(flow))
        with conn.cursor() as cur:
            cur.execute("SHOW GLOBAL VARIABLES WHERE Variable_name IN ('version', 'innodb_flush_log_at_trx_commit', "
                        "'sync_binlog', 'log_bin', 'innodb_buffer_pool_size')")
            settings = {r["Variable_name"]: r["Value"] for r in cur.fetchall()}
    return {"token": token, "settings": settings}


def _starter(dsn_url: str, token: str, definition: str, orders: list[str], q) -> None:
    with db.connect(dsn_url) as conn:
        q.put([(routines.instance_start(conn, token, "bench", definition=definition, app="billing",
                                        input={"order_id": order}, idempotency_key=uuid.uuid4().hex,
                                        deadline_ms=86_400_000)["workflow_id"], order) for order in orders])


def start_instances(dsn: db.Dsn, token: str, n: int, activate: bool = True) -> list[tuple[str, str]]:
    """n (workflow id, correlation key) pairs, started by STARTERS processes; with ``activate`` their SIGNAL
    waits are open (each start activates its step), otherwise the step waits behind a TIMER (early signals)."""
    tag = uuid.uuid4().hex[:8]
    orders = [f"o-{tag}-{i}" for i in range(n)]
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    definition = FLOW["name"] if activate else FLOW_LATER["name"]
    procs = [ctx.Process(target=_starter, args=(dsn.url(), token, definition, orders[k::STARTERS], q))
             for k in range(STARTERS)]
    for p in procs:
        p.start()
    pairs = [pair for _ in procs for pair in q.get()]
    for p in procs:
        p.join()
    return pairs


def unsettled(dsn: db.Dsn, instances: list[tuple[str, str]]) -> int:
    """How many of the instances did not end SUCCEEDED with their wait SATISFIED."""
    ids = [int(wf.removeprefix("wf_")) for wf, _ in instances]
    with db.connect(dsn) as conn, conn.cursor() as cur:
        done = 0
        for i in range(0, len(ids), 1000):
            part = ids[i:i + 1000]
            cur.execute("SELECT COUNT(*) AS n FROM weave_instances i JOIN weave_waits w ON w.instance_id = i.id "
                        f"WHERE i.id IN ({', '.join(['%s'] * len(part))}) AND i.status = 'SUCCEEDED' "
                        "AND w.status = 'SATISFIED'", part)
            done += cur.fetchone()["n"]
    return len(ids) - done


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
    """One sender. ``call``/``http`` use each instance once and stop when they are used up; ``accept`` and
    ``raw`` run until the end of the measurement."""
    conn = db.connect(dsn_url)
    cur = conn.cursor()
    http = HTTPConnection(*API_ADDRESS) if mode == "http" else None
    payload = payload_json(payload_bytes)
    tag = uuid.uuid4().hex[:8]
    lat: list[tuple[float, float]] = []  # (start, duration) of each send that succeeded
    errors = 0
    first_error: str | None = None
    exhausted_at = None
    go.wait()
    t_end = t_end_box.value
    i = 0
    while True:
        t0 = time.time()
        if t0 >= t_end:
            break
        if mode in ("call", "http") and i >= len(instances):
            exhausted_at = t0
            break
        wf, corr = instances[i % len(instances)] if instances else (None, None)
        failed = errors
        if mode == "raw":
            raw_tx(cur, f"{tag}-{wid}-{i}", payload, i)
        elif mode == "http":
            body = json.dumps({"name": "approval.decided", "payload_version": "1", "target_step_key": "approval",
                               "target_activation_sequence": 1, "correlation_key": corr,
                               "reason": "bench"})[:-1] + f', "payload": {payload}}}'
            try:
                http.request("POST", f"/v1/namespaces/bench/workflows/{wf}/signals", body=body,
                             headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json",
                                      "Idempotency-Key": f"{tag}-{wid}-{i}"})
                answer = http.getresponse()
                text = answer.read()
                if answer.status != 201 or json.loads(text).get("status") == "REJECTED":
                    errors += 1
                    first_error = first_error or f"{answer.status} {text[:300]!r}"
            except Exception as exc:
                errors += 1
                first_error = first_error or repr(exc)
                http.close()
        else:
            try:
                cur.execute("CALL weave_signal_send(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                            (token, "bench", wf, f"{tag}-{wid}-{i}", "approval.decided", "1",
                             "approval", 1, corr, payload, "bench", None))
                row = cur.fetchone()
                while cur.nextset():
                    pass
                if row["status"] != "PENDING":  # the receipt of an accepted signal, settled at Send or not
                    errors += 1
                    first_error = first_error or str(row)[:300]
            except Exception as exc:
                errors += 1
                first_error = first_error or repr(exc)
        if errors == failed:
            lat.append((t0, time.time() - t0))
        i += 1
    conn.close()
    q.put((lat, errors, exhausted_at, wid, i, first_error))


def run(mode: str, args, c: int, token: str, instances: list[tuple[str, str]], api_pid: int | None = None,
        server: int | None = None) -> dict:
    """One timed run of ``mode``; ``server``: the database server's process, when it runs on this machine."""
    def server_seconds() -> float:
        return 0.0 if server is None else server_cpu_seconds(server)

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
    cpu0 = cpu_seconds(api_pid) if api_pid else 0.0
    machine0, server0 = machine_cpu_seconds(), server_seconds()
    t_start = time.time()
    t_end_box.value = t_start + args.warmup + args.seconds
    go.set()
    parts = [q.get() for _ in procs]
    cpu1 = cpu_seconds(api_pid) if api_pid else 0.0
    machine1, server1 = machine_cpu_seconds(), server_seconds()
    for p in procs:
        p.join()
    w0 = t_start + args.warmup
    stops = [x for _, _, x, *_ in parts if x is not None]
    w1 = min([t_end_box.value, *stops])
    lat = [d * 1000 for pl, *_ in parts for (t0, d) in pl if t0 >= w0 and t0 + d <= w1]
    sent = sum(p[4] for p in parts)
    window = max(w1 - w0, 1e-9)
    row = {"n": len(lat), "per_s": round(len(lat) / window, 1), "p50_ms": round(pct(lat, 50), 3) if lat else None,
           "p99_ms": round(pct(lat, 99), 3) if lat else None, "errors": sum(e for _, e, *_ in parts),
           "first_error": next((p[5] for p in parts if p[5]), None),
           "window_s": round(w1 - w0, 2), "exhausted": bool(stops)}
    if mode in ("call", "http"):  # every wait that was sent to is settled and its instance SUCCEEDED
        row["not_settled"] = unsettled(db.Dsn.parse(args.dsn), [
            pair for _, _, _, w, count, _ in parts for pair in instances[w::c][:count]])
    row["machine_cpu_ms_per_call"] = round((machine1 - machine0) * 1000 / max(1, sent), 3)
    if server is not None:
        row["server_cpu_ms_per_call"] = round((server1 - server0) * 1000 / max(1, sent), 3)
    if api_pid:
        row["api_cpu_ms_per_request"] = round((cpu1 - cpu0) * 1000 / max(1, sent), 3)
    return row


def api_floor(api_pid: int, requests: int = 2000) -> dict:
    """The API's CPU per request that does no work of the engine's: GET /healthz, one connection kept alive."""
    http = HTTPConnection(*API_ADDRESS, timeout=10)
    for _ in range(100):  # the connection and the worker's threads warmed up
        http.request("GET", "/healthz")
        http.getresponse().read()
    cpu0 = cpu_seconds(api_pid)
    for _ in range(requests):
        http.request("GET", "/healthz")
        answer = http.getresponse()
        answer.read()
        assert answer.status == 200, answer.status
    cpu1 = cpu_seconds(api_pid)
    http.close()
    return {"requests": requests, "api_cpu_ms_per_request": round((cpu1 - cpu0) * 1000 / requests, 3)}


def pool_size(args, c: int, per_s: float) -> int:
    """Instances to prepare for one timed run at C: enough for ``per_s`` over warmup and measurement."""
    per_sender = math.ceil(per_s * (args.warmup + args.seconds) / c)
    return max(per_sender, 10) * c


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dsn", default="mysql://root@127.0.0.1:3306/weave_bench_signals",
                    help="a database to create (dropped first)")
    ap.add_argument("--conns", default="1,4,16")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--warmup", type=float, default=1.0)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--payload-bytes", type=int, default=1024)
    ap.add_argument("--pool-share", type=float, default=0.3,
                    help="instances prepared for CALL: this share of the raw rate times warmup+seconds (for HTTP: "
                         "1.5 times the CALL rate)")
    ap.add_argument("--accept", action="store_true", help="also measure acceptance only (early signals)")
    ap.add_argument("--http", action="store_true", help="also measure POST /signals through gunicorn")
    ap.add_argument("--http-conns", default=None, help="the C at which to measure HTTP (default: --conns)")
    ap.add_argument("--api-workers", type=int, default=None, help="gunicorn workers (default: weave api's)")
    ap.add_argument("--api-threads", type=int, default=None, help="threads per worker (default: weave api's)")
    ap.add_argument("--api-port", type=int, default=API_ADDRESS[1])
    ap.add_argument("--api-log", type=Path, default=None, help="keep the API's log (access log included) here")
    args = ap.parse_args()
    API_ADDRESS[1] = args.api_port
    dsn = db.Dsn.parse(args.dsn)
    configure_logging("WARNING")

    setup = prepare(dsn)
    with db.connect(dsn) as conn:
        server = local_server_pid(conn)  # None: a server elsewhere, the machine's CPU only
    print(json.dumps({"bench": "B-1", "server": setup["settings"], "dsn": dsn.redacted()}), flush=True)
    results: dict[tuple[str, int], list[dict]] = {}
    api = None
    conns = [int(x) for x in args.conns.split(",")]
    http_conns = conns if args.http_conns is None else [int(x) for x in args.http_conns.split(",")]
    if args.http:
        from tests.support.processes import WeaveProcess
        from tests.support.waiting import wait_for

        extra = [*(["--workers", str(args.api_workers)] if args.api_workers else []),
                 *(["--threads", str(args.api_threads)] if args.api_threads else [])]
        api = WeaveProcess(dsn, "api", "--bind", f"{API_ADDRESS[0]}:{API_ADDRESS[1]}", *extra, log=args.api_log)

        def ready() -> bool:
            try:
                probe = HTTPConnection(*API_ADDRESS, timeout=2)
                probe.request("GET", "/readyz")
                return probe.getresponse().status == 200
            except OSError:
                return False

        assert wait_for(ready, timeout=30), "the API did not come up"
    for run_no in range(1, args.repeat + 1):
        for c in conns:
            reset_raw(dsn)
            raw = run("raw", args, c, setup["token"], [], server=server)
            measured = [("raw", raw)]
            for mode in ("call", "http"):
                if mode == "http" and (api is None or c not in http_conns):
                    continue
                t0 = time.time()
                expect = raw["per_s"] * args.pool_share if mode == "call" else dict(measured)["call"]["per_s"] * 1.5
                pool = start_instances(dsn, setup["token"], pool_size(args, c, expect))
                print(json.dumps({"bench": "B-1", "prepared": len(pool), "for": mode, "conns": c,
                                  "seconds": round(time.time() - t0, 1)}), flush=True)
                measured.append((mode, run(mode, args, c, setup["token"], pool,
                                           api.proc.pid if mode == "http" and api else None, server)))
            if args.accept:
                pool = start_instances(dsn, setup["token"], c * ACCEPT_INSTANCES_PER_SENDER, activate=False)
                measured.append(("accept", run("accept", args, c, setup["token"], pool, server=server)))
            for mode, row in measured:
                line = {"bench": "B-1", "path": mode, "conns": c, "run": run_no, **row}
                results.setdefault((mode, c), []).append(line)
                print(json.dumps(line), flush=True)
            call = dict(measured)["call"]
            print(json.dumps({"bench": "B-1", "figure": "call_vs_raw", "conns": c, "run": run_no,
                              "ratio": round(call["per_s"] / raw["per_s"], 3)}), flush=True)
    if args.repeat > 1:
        for (mode, c), rows in results.items():
            print(json.dumps({"bench": "B-1", "summary": "median", "path": mode, "conns": c,
                              **{k: statistics.median(r[k] for r in rows) for k in ("per_s", "p50_ms", "p99_ms")}}),
                  flush=True)
    if api is not None:
        print(json.dumps({"bench": "B-1", "path": "http_floor", **api_floor(api.proc.pid)}), flush=True)
        api.terminate()
        api.close()
    with db.connect(dsn) as conn:
        broken = invariants.violations(conn)
    print(json.dumps({"bench": "B-1", "invariants_ok": not broken, "broken": broken}), flush=True)
    return 0 if not broken else 1


if __name__ == "__main__":
    sys.exit(main())
