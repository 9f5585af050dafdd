"""Z-3: database faults under an HTTP load, on a private server of our own (never the machine's): sessions
KILLed at random, then the server killed with -9 and restarted, then hung with SIGSTOP and resumed with
SIGCONT. Meanwhile clients keep starting workflows and sending signals, each request retried with its own
Idempotency-Key until it is answered 2xx.

Afterwards: every request answered 2xx is persisted; nothing is partial (the invariants hold); every
single HTTP answer came within 2 s, a 503 always with Retry-After; and the API, orchestrator and worker that
were started at the beginning are the ones that finish the work: they recovered without a restart.
"""

from __future__ import annotations

import json
import random
import signal
import threading
import time
import urllib.error
import urllib.request
from collections import Counter

import pymysql
import pytest

from procedures import invariants
from tests.api.test_sdk_gunicorn import free_port
from tests.reliability.conftest import figure
from tests.support import cluster_load as load
from tests.support.db import Db
from tests.support.processes import WeaveProcess
from tests.support.server import private_server as private_server_of
from tests.support.waiting import wait_for
from tests.support.world import World

pytestmark = pytest.mark.process

FLOW = {"name": "faulty", "steps": [
    {"key": "wait", "type": "TIMER", "delay_ms": 30_000},
    {"key": "charge", "type": "TASK", "after": ["wait"], "queue": "payments", "handler": "example.echo",
     "handler_version": "1", "input": {"id": "$.input.id"}},
    {"key": "approval", "type": "SIGNAL", "after": ["charge"],
     "signal": {"name": "ok", "payload_version": "1", "payload_type": "any"},
     "correlation": "$.input.id", "timeout_ms": 36_000_000}]}
ANSWER_WITHIN_S = 2.0


@pytest.fixture
def private_server():
    with private_server_of("weave-z3-server-", "weave_z3") as (server, dsn):
        yield server, dsn


class Client:
    """Plain HTTP with one try per call, so that every single answer's time is measured."""

    def __init__(self, base: str, token: str):
        self.base, self.token = base + "/v1/namespaces/acme/", token
        self.latencies: list[float] = []
        self.statuses: Counter = Counter()
        self.missing_retry_after = 0
        self.lock = threading.Lock()

    def post(self, path: str, body: dict, key: str) -> dict | None:
        req = urllib.request.Request(self.base + path, data=json.dumps(body).encode(), method="POST", headers={
            "Authorization": f"Bearer {self.token}", "Content-Type": "application/json", "Idempotency-Key": key})
        began = time.monotonic()
        status, answer, retry_after = 0, None, None
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                status, answer = resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as err:
            status, retry_after = err.code, err.headers.get("Retry-After")
            err.read()
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            status = -1
        with self.lock:
            self.latencies.append(time.monotonic() - began)
            self.statuses[status] += 1
            self.missing_retry_after += status == 503 and not retry_after
        assert status in (200, 201, 202, 503), (status, path, answer)
        return answer if 200 <= status < 300 else None

    def until_acked(self, path: str, body: dict, key: str, deadline: float) -> dict:
        while time.monotonic() < deadline:
            answer = self.post(path, body, key)
            if answer is not None:
                return answer
            time.sleep(0.2)
        raise AssertionError(f"{path} {key} never answered 2xx")


def test_Z3_killed_sessions_a_crashed_and_a_hung_server_lose_no_acknowledged_request(private_server, tmp_path):
    server, dsn = private_server
    # The API's timeouts bound every answer; the daemons may wait longer on a statement before reconnecting.
    api_dsn = dsn.with_options(connect_timeout=1, read_timeout=1.2, write_timeout=1.2)
    dsn = dsn.with_options(connect_timeout=1, read_timeout=5, write_timeout=5)
    db = Db(dsn)
    world = World.create(db, quota=10_000, capacity=10_000)
    world.publish(FLOW)
    port = free_port()
    procs = [WeaveProcess(api_dsn, "api", "--bind", f"127.0.0.1:{port}", "--workers", "2", log=tmp_path / "api.log"),
             WeaveProcess(dsn, "orchestrator", "--concurrency", "2", log=tmp_path / "orchestrator.log"),
             WeaveProcess(dsn, "worker", "--handlers", "orchestrator.example_handlers", "--queue", "payments",
                          "--concurrency", "2", "--lease-ms", "36000000", "--heartbeat-ms", "2000",
                          log=tmp_path / "worker.log")]
    pids = [p.proc.pid for p in procs]
    client = Client(f"http://127.0.0.1:{port}", world.token)
    assert wait_for(lambda: _ready(client.base), timeout=60), (tmp_path / "api.log").read_text()[-2000:]
    acks: dict[str, tuple[str, str]] = {}
    stop = threading.Event()
    faults: Counter = Counter()

    def clients(part: int) -> None:
        n = 0
        while not stop.is_set():
            ident = f"c{part}-{n}"
            n += 1
            deadline = time.monotonic() + 60
            started = client.until_acked("workflows", {"definition": "faulty", "app": "billing",
                                                       "input": {"id": ident}, "deadline_ms": 360_000_000},
                                         f"start-{ident}", deadline)
            sent = client.until_acked(f"workflows/{started['workflow_id']}/signals", {
                "name": "ok", "payload_version": "1", "target_step_key": "approval",
                "target_activation_sequence": 1, "correlation_key": ident, "payload": {"by": ident},
                "reason": "go"}, f"sig-{ident}", deadline)
            acks[ident] = (started["workflow_id"], sent["signal_id"])

    def kill_sessions(seconds: float) -> None:
        rng = random.Random(3)
        end = time.monotonic() + seconds
        admin = pymysql.connect(unix_socket=str(server.socket), user="root", autocommit=True)
        try:
            with admin.cursor() as cur:
                while time.monotonic() < end:
                    cur.execute("SELECT ID FROM information_schema.PROCESSLIST WHERE DB = 'weave_z3' "
                                "AND ID <> CONNECTION_ID()")
                    ids = [r[0] for r in cur.fetchall()]
                    if ids:
                        try:
                            cur.execute(f"KILL {rng.choice(ids)}")
                            faults["sessions_killed"] += 1
                        except pymysql.err.MySQLError:  # it ended by itself meanwhile
                            pass
                    time.sleep(0.15)
        finally:
            admin.close()

    threads = [threading.Thread(target=clients, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    timings = {}
    try:
        time.sleep(1.5)
        kill_sessions(4.0)
        # The server dies mid-run (kill -9) and comes back on the same data: crash recovery.
        server.process.kill()
        server.process.wait(30)
        faults["server_kill9"] += 1
        time.sleep(1.0)
        began = time.monotonic()
        server.start()
        timings["restart_s"] = round(time.monotonic() - began, 2)
        time.sleep(2.0)
        # The server hangs: it accepts connections but answers nothing, until SIGCONT.
        server.process.send_signal(signal.SIGSTOP)
        faults["server_sigstop_s"] = 3
        time.sleep(3.0)
        server.process.send_signal(signal.SIGCONT)
        time.sleep(2.0)
    finally:
        stop.set()
        for t in threads:
            t.join(90)
    driver = load.Driver(dsn)
    try:
        total = len(acks)
        assert total > 0
        recovered = wait_for(lambda: driver.scalar("SELECT COUNT(*) FROM weave_waits WHERE kind = 'TIMER'")
                             >= total, timeout=60)
        assert recovered, "the orchestrator did not take up the work again"
        driver.drive_to_end(total, step_ms=30_001)
        still_same = [p.proc.pid for p in procs if p.alive()]
        check = Db(dsn)
        persisted = load.check_acks_persisted(check, _as_acks(acks))
        statuses = Counter(r["status"] for r in check.rows("SELECT status FROM weave_instances"))
        invariants.check(check.conn)
        check.close()
    finally:
        driver.close()
        for p in procs:
            p.terminate()
            p.close()
        db.close()
    latencies = sorted(client.latencies)
    figure("Z-3 database faults", workflows_acknowledged=total, requests=len(latencies),
           answers=dict(client.statuses), **faults, **timings, acks_missing=len(persisted["missing"]),
           answer_p50_s=round(latencies[len(latencies) // 2], 3), answer_max_s=round(latencies[-1], 3),
           missing_retry_after=client.missing_retry_after, instances=dict(statuses))
    assert persisted["missing"] == [], persisted
    assert statuses == Counter({"SUCCEEDED": total}), statuses
    assert still_same == pids, "a daemon died and had to be restarted"
    assert client.missing_retry_after == 0
    assert client.statuses[503] > 0, "no fault reached the API: the test did not test anything"
    assert latencies[-1] <= ANSWER_WITHIN_S, f"an answer took {latencies[-1]:.2f}s"


def _as_acks(acks: dict[str, tuple[str, str]]) -> load.Acks:
    out = load.Acks()
    for ident, (wf, sig) in acks.items():
        out.started[f"start-{ident}"] = wf
        out.signals[f"sig-{ident}"] = (wf, sig)
    return out


def _ready(base: str) -> bool:
    try:
        with urllib.request.urlopen(base.split("/v1/")[0] + "/readyz", timeout=2) as resp:
            return resp.status == 200
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False
