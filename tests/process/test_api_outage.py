"""A database outage never hangs the API (R-12, 07-api "never a 500"): with the server hung (stopped, so it
accepts connections and answers nothing) or gone, every request, /readyz included, answers 503 problem+json
with Retry-After within 2 s, even 12 at once, while /healthz stays 200; and the API recovers by itself.

The server here is a private one (own data directory and socket), so hanging and killing it touches no
other database."""

from __future__ import annotations

import json
import os
import signal
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest
from falcon import testing

from api.app import get_app
from procedures import db, errors, installer
from tests.support.processes import WeaveProcess, hang, start_api
from tests.support.server import private_server as private_server_of
from tests.support.waiting import wait_for

pytestmark = pytest.mark.process
CONCURRENT = 12
LIMIT_S = 2.0


@pytest.fixture
def private_server():
    with private_server_of("weave-outage-", "weave_outage") as (server, dsn):
        yield server, dsn


def _get(url: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes, float]:
    started = time.monotonic()
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            status, head, body = resp.status, dict(resp.headers.items()), resp.read()
    except urllib.error.HTTPError as err:
        status, head, body = err.code, dict(err.headers.items()), err.read()
    return status, {k.lower(): v for k, v in head.items()}, body, time.monotonic() - started


def _storm(url: str) -> list[tuple[int, dict[str, str], bytes, float]]:
    auth = {"Authorization": "Bearer wv_anything"}
    targets = [(f"{url}/readyz", {}), (f"{url}/v1/namespaces/acme/workflows", auth),
               (f"{url}/v1/namespaces/acme/workflows/wf_1", auth), (f"{url}/metrics", {})]
    with ThreadPoolExecutor(CONCURRENT) as pool:
        futures = [pool.submit(_get, *targets[i % len(targets)]) for i in range(CONCURRENT)]
        return [f.result() for f in futures]


def _assert_quick_503s(answers: list[tuple[int, dict[str, str], bytes, float]]) -> None:
    for status, headers, body, took in answers:
        assert status == 503 and took < LIMIT_S, (status, round(took, 2))
        assert headers["content-type"].startswith("application/problem+json") and "retry-after" in headers
        assert json.loads(body)["code"] == "UNAVAILABLE"


def test_R12_a_hung_database_answers_503_within_2s_under_12_concurrent_requests(private_server, tmp_path):
    server, dsn = private_server
    api, url = start_api(dsn, tmp_path / "api.log")
    try:
        assert _get(f"{url}/readyz")[0] == 200
        hang(server.process.pid)  # hung: accepts connections, answers nothing
        answers = _storm(url)
        _assert_quick_503s(answers)
        print(f"\nhung database: answers in {sorted(round(a[3], 2) for a in answers)} s")
        with ThreadPoolExecutor(4) as pool:  # /healthz while requests wait on the database
            storm = pool.submit(_storm, url)
            health = _get(f"{url}/healthz")
            _assert_quick_503s(storm.result())
        assert health[0] == 200 and health[3] < LIMIT_S
        os.kill(server.process.pid, signal.SIGCONT)
        # It recovers by itself: the cool-down is one second.
        assert wait_for(lambda: _get(f"{url}/readyz")[0] == 200, timeout=10, interval=0.2), \
            "the API did not recover after the database came back"
    finally:
        api.terminate()
        api.close()


def test_R12_a_dead_database_answers_503_within_2s_and_healthz_stays_200(private_server, tmp_path):
    server, dsn = private_server
    api, url = start_api(dsn, tmp_path / "api.log")
    try:
        server.stop()
        answers = _storm(url)
        _assert_quick_503s(answers)
        print(f"\ndead database: slowest of {CONCURRENT} answers {max(a[3] for a in answers):.2f} s")
        assert _get(f"{url}/healthz")[0] == 200
    finally:
        api.terminate()
        api.close()


def test_R16_an_api_worker_that_boots_while_the_database_hangs_starts_and_answers_503(private_server):
    """The level check at a worker's boot (R-16) meets a server that stopped answering mid-query: that is
    transient, not a level, so the worker boots and answers 503 until the server answers. (A worker that failed
    to boot on it used to make gunicorn shut the whole API down.)"""
    server, dsn = private_server
    quick = dsn.with_options(connect_timeout=0.5, read_timeout=0.5, write_timeout=0.5)
    conn = db.connect(quick)
    hang(server.process.pid)
    try:
        with pytest.raises(errors.TransientDatabaseError):
            installer.check_level(conn)
        client = testing.TestClient(get_app(quick.url()))
        ready = client.simulate_get("/readyz")
        assert ready.status_code == 503 and ready.json["code"] == "UNAVAILABLE", ready.text
    finally:
        os.kill(server.process.pid, signal.SIGCONT)
        conn.close()


def test_R16_an_orchestrator_and_a_worker_started_before_their_database_wait_for_it(private_server, tmp_path):
    """A process started while its database is down waits for it (logged, backing off) instead of exiting, runs
    its level check (R-16) once the database answers, then starts; SIGTERM ends the wait at once."""
    server, dsn = private_server
    server.stop()
    quick = dsn.with_options(connect_timeout=1)
    procs = {
        "orchestrator": WeaveProcess(quick, "orchestrator", log=tmp_path / "orchestrator.log"),
        "worker": WeaveProcess(quick, "worker", "--handlers", "orchestrator.example_handlers", "--queue", "payments",
                               log=tmp_path / "worker.log"),
        "stopped": WeaveProcess(quick, "orchestrator", log=tmp_path / "stopped.log"),
    }
    try:
        def logged(name: str, text: str) -> bool:
            return text in (tmp_path / f"{name}.log").read_text(errors="replace")

        for name in procs:
            assert wait_for(lambda n=name: logged(n, "database not reachable at start"), timeout=30), name
        assert all(p.alive() for p in procs.values())
        assert procs["stopped"].terminate(10) == 0  # asked to stop while waiting: stops, cleanly
        server.start()
        assert wait_for(lambda: logged("orchestrator", "orchestrator started"), timeout=30)
        assert wait_for(lambda: logged("worker", "worker started"), timeout=30)
        for name in ("orchestrator", "worker"):
            assert procs[name].terminate(30) == 0, (tmp_path / f"{name}.log").read_text()[-2000:]
    finally:
        for p in procs.values():
            p.close()
