"""The SDK against a real `weave api` process (gunicorn) on the test database."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from dataclasses import replace
from decimal import Decimal
from pathlib import Path
from types import SimpleNamespace

import pytest

from api import client as sdk
from procedures import pulse, routines
from tests.api.test_explain_http import POLL
from tests.support.processes import WeaveProcess, free_port, start_api
from tests.support.proxy import Proxy
from tests.support.waiting import wait_for

TIMER = {"name": "cool-off", "steps": [{"key": "wait", "type": "TIMER", "delay_ms": 60_000}]}


@pytest.fixture
def api_url(database, world, tmp_path):
    proc, url = start_api(database, tmp_path / "api.log")
    yield url
    proc.terminate()
    proc.close()


def test_sdk_covers_the_instance_lifecycle_through_gunicorn(api_url, world, orch, monkeypatch):
    admin = sdk.WeaveClient(api_url, world.admin, "acme")
    assert admin.publish_definition(TIMER)["version"] == 1
    ops = sdk.WeaveClient(api_url, world.token, "acme")
    started = ops.start_workflow("cool-off", app="billing", input={"order_id": "o1"}, deadline_ms=3_600_000,
                                 idempotency_key="order-o1")
    replay = ops.start_workflow("cool-off", app="billing", input={"order_id": "o1"}, deadline_ms=3_600_000,
                                idempotency_key="order-o1")
    assert replay["workflow_id"] == started["workflow_id"]
    with pytest.raises(sdk.IdempotencyConflict):
        ops.start_workflow("cool-off", app="billing", input={"order_id": "o2"}, deadline_ms=3_600_000,
                           idempotency_key="order-o1")
    orch.drain()
    with pytest.raises(sdk.WaitTimedOut) as early:
        ops.wait_for(started["workflow_id"], timeout=0)
    assert early.value.instance["status"] == "RUNNING"
    pauses = []

    def pause(seconds: float) -> None:  # between the SDK's reads the timer falls due, on the test clock
        pauses.append(seconds)
        world.db.advance(60_001)
        orch.drain()

    monkeypatch.setattr(sdk, "time", SimpleNamespace(monotonic=time.monotonic, sleep=pause))
    assert ops.wait_for(started["workflow_id"], timeout=30)["status"] == "SUCCEEDED" and pauses == [0.05]
    with pytest.raises(ValueError, match="until must name statuses"):
        ops.wait_for(started["workflow_id"], until=["DONE"])
    types = [e["type"] for e in ops.events(started["workflow_id"], page=2)]
    assert types == ["INSTANCE_STARTED", "STEP_ACTIVATED", "TIMER_SETTLED", "INSTANCE_SUCCEEDED"]
    assert ops.list_workflows(status="SUCCEEDED")["items"][0]["workflow_id"] == started["workflow_id"]
    # Every filter of GET /workflows: each of these leaves the instance out, so a filter dropped on the way would not.
    assert ops.list_workflows(status="SUCCEEDED", control="ACTIVE")["items"][0]["workflow_id"] == started["workflow_id"]
    for narrower in ({"control": "PAUSED"}, {"business_key": "no-such-key"}, {"review_code": "TASK_FAILED"},
                     {"deferred": True}):
        assert ops.list_workflows(**narrower)["items"] == [], narrower
    with pytest.raises(sdk.NotFound):
        ops.get_workflow("wf_424242")
    with pytest.raises(sdk.NotFound):  # an id holding '/' names that id, never another resource (its signals)
        ops.get_workflow(f"{started['workflow_id']}/signals")
    with pytest.raises(sdk.Forbidden):
        ops.create_app("x", 1)
    with pytest.raises(sdk.Unauthenticated):
        sdk.WeaveClient(api_url, "wv_bad", "acme").get_workflow(started["workflow_id"])
    assert [d["name"] for d in ops.list_definitions()] == ["cool-off"]
    assert ops.get_definition("cool-off")["version"] == 1
    assert [a["name"] for a in admin.list_apps()] == ["billing"] and admin.list_queues()[0]["name"] == "payments"
    bot = admin.create_credential("bot", ["workflows:read"])
    assert "bot" in [c["actor"] for c in admin.list_credentials()]
    # Every row, page after page: the same whatever the size of the pages it reads.
    assert admin._every("credentials", page=1) == admin.list_credentials()
    assert admin.disable_credential(bot["credential_id"])["status"] == "DISABLED"
    assert admin.list_audit(limit=1)["items"][0]["action"] == "credential.disable"
    with pytest.raises(sdk.Unauthenticated):
        sdk.WeaveClient(api_url, bot["token"], "acme").list_definitions()


def test_sdk_reads_an_amount_back_with_every_digit_when_asked_for_decimals(api_url, world):
    """An amount beyond 17 significant digits went in whole (the API keeps every digit) but came back as a float,
    rounded; a client made with decimals=True reads it as the Decimal it sent. Numbers with no fraction are ints."""
    sdk.WeaveClient(api_url, world.admin, "acme").publish_definition(TIMER)
    amount = Decimal("12345678901234567890.10")
    exact = sdk.WeaveClient(api_url, world.token, "acme", decimals=True)
    started = exact.start_workflow("cool-off", app="billing", input={"amount": amount, "items": 3},
                                   deadline_ms=3_600_000)
    assert exact.get_workflow(started["workflow_id"])["input"] == {"amount": amount, "items": 3}
    plain = sdk.WeaveClient(api_url, world.token, "acme").get_workflow(started["workflow_id"])["input"]
    assert plain == {"amount": 1.2345678901234567e19, "items": 3}


def test_P5_sdk_reads_every_round_of_a_poll_page_by_page(api_url, world, orch):
    world.publish(POLL)
    wf = world.start("poll-flow")
    orch.drain()
    for _ in range(2):
        (task,) = pulse.task_claim(world.db.conn, "w1", "payments", limit=1)
        pulse.attempt_complete(world.db.conn, task["attempt_id"], "w1", {"status": "PENDING"})
        world.db.advance(1_000)
        orch.drain()
    ops = sdk.WeaveClient(api_url, world.token, "acme")
    assert [(r["number"], r["outcome"]) for r in ops.rounds(wf, "check", page=1)] == [
        (1, "POLL_PENDING"), (2, "POLL_PENDING"), (3, "IN_FLIGHT")]
    assert [r["number"] for r in ops.rounds(wf, "check", activation=1, after=1)] == [2, 3]
    with pytest.raises(sdk.NotFound):
        list(ops.rounds(wf, "check", activation=2))


def test_sdk_reuses_one_idempotency_key_across_retries(database, world, tmp_path, monkeypatch):
    """The server is down for the first tries; the call retries with the same key and starts one instance."""
    import threading

    world.publish(TIMER)
    port = free_port()
    client = sdk.WeaveClient(f"http://127.0.0.1:{port}", world.token, "acme", retries=60)
    sent_keys = []
    real_exchange = client._exchange

    def counting_exchange(method, url, data, headers):
        sent_keys.append(headers.get("Idempotency-Key"))
        return real_exchange(method, url, data, headers)

    monkeypatch.setattr(client, "_exchange", counting_exchange)
    result = {}
    thread = threading.Thread(target=lambda: result.update(
        client.start_workflow("cool-off", app="billing", deadline_ms=60_000)))
    thread.start()
    proc = None
    try:
        assert wait_for(lambda: len(sent_keys) >= 2, timeout=30)  # the outage: tries already failed
        proc = WeaveProcess(database, "api", "--bind", f"127.0.0.1:{port}", "--workers", "1",
                            log=tmp_path / "api.log")
        thread.join(90)
        assert result["status"] == "RUNNING"
    finally:
        if proc:
            proc.terminate()
            proc.close()
    assert len(sent_keys) >= 3 and len(set(sent_keys)) == 1 and sent_keys[0]
    assert world.db.scalar("SELECT COUNT(*) FROM weave_instances") == 1
    assert world.db.scalar("SELECT idempotency_key FROM weave_instances") == sent_keys[0]


def _first_answer_lost(client: sdk.WeaveClient, monkeypatch, meanwhile) -> list[str | None]:
    """The client's first exchange goes through, ``meanwhile()`` runs, and its answer is lost; later ones are
    answered. The idempotency key of each try, in order."""
    real_exchange = client._exchange
    tries: list[str | None] = []

    def losing_the_first_answer(method, url, data, headers):
        tries.append(headers.get("Idempotency-Key"))
        answer = real_exchange(method, url, data, headers)
        if len(tries) == 1:
            meanwhile()
            raise ConnectionResetError("the answer was lost")
        return answer

    monkeypatch.setattr(client, "_exchange", losing_the_first_answer)
    return tries


def test_sdk_publish_retried_after_a_lost_answer_answers_that_publish_after_a_later_one(api_url, world, monkeypatch):
    """The first try publishes and its answer is lost; another version is published before the retry. The retry
    carries the call's key, so it answers version 1 instead of publishing the first document again as version 3."""
    client = sdk.WeaveClient(api_url, world.admin, "acme", retries=3)
    tries = _first_answer_lost(client, monkeypatch, lambda: world.publish(
        {**TIMER, "steps": [{**TIMER["steps"][0], "delay_ms": 1_000}]}))
    assert client.publish_definition(TIMER)["version"] == 1
    assert len(tries) == 2 and tries[0] and tries[0] == tries[1]
    assert world.db.scalar("SELECT MAX(version) FROM weave_definitions") == 2


def test_M2_sdk_app_put_retried_after_a_lost_answer_does_not_undo_a_later_change(api_url, world, monkeypatch):
    """The first try puts a quota of 5 and its answer is lost; another admin puts 9 before the retry. The retry
    carries the call's key, so it answers the first put instead of putting 5 back. A credential's create, tried
    once, tells with its key which credential a lost answer made."""
    client = sdk.WeaveClient(api_url, world.admin, "acme", retries=3)
    tries = _first_answer_lost(client, monkeypatch,
                               lambda: routines.app_put(world.db.conn, world.admin, "acme", "reports", 9))
    assert client.create_app("reports", 5) == {"name": "reports", "max_in_flight": 5, "status": "ACTIVE"}
    assert len(tries) == 2 and tries[0] and tries[0] == tries[1]
    assert world.db.scalar("SELECT max_in_flight FROM weave_apps WHERE name = 'reports'") == 9
    monkeypatch.undo()
    made = client.create_credential("ci-bot", ["workflows:read"], idempotency_key="bot-1")
    again = client.create_credential("ci-bot", ["workflows:read"], idempotency_key="bot-1")
    assert made["token"] and again == {**made, "token": None}


def _api_before_its_database(database, log: Path) -> tuple[WeaveProcess, str, int]:
    """A `weave api` whose database address has nothing listening yet (it starts anyway and answers 503 until
    the database answers): (process, base URL, the database port it waits for)."""
    if database.unix_socket:
        pytest.fail("this test needs a TCP server (WEAVE_TEST_DSN=mysql://...@host:port/...)")
    db_port, api_port = free_port(), free_port()
    proc = WeaveProcess(replace(database, host="127.0.0.1", port=db_port), "api", "--bind", f"127.0.0.1:{api_port}",
                        "--workers", "1", log=log)
    url = f"http://127.0.0.1:{api_port}"
    probe = sdk.WeaveClient(url, "none", "none", retries=1)

    def alive() -> bool:
        try:
            return probe._call("GET", "/healthz")["status"] == "ok"
        except sdk.WeaveApiError:
            return False

    assert wait_for(alive, timeout=30), log.read_text()
    return proc, url, db_port


def _answers(log: Path, path: str) -> list[int]:
    """The statuses the API's access log shows for GET ``path``, in order."""
    return [int(s) for s in re.findall(rf'"GET {re.escape(path)} HTTP/1\.1" (\d{{3}})', log.read_text())]


def test_sdk_gives_up_after_its_tries_while_the_database_is_away(database, world, tmp_path):
    """503 UNAVAILABLE is retried; after the client's tries it is raised, each try one request."""
    log = tmp_path / "api.log"
    proc, url, _ = _api_before_its_database(database, log)
    try:
        client = sdk.WeaveClient(url, world.token, world.namespace, retries=3)
        with pytest.raises(sdk.Unavailable) as info:
            client.get_workflow("wf_1")
        assert "gave up after 3 tries" in str(info.value.body.get("detail"))
        path = f"/v1/namespaces/{world.namespace}/workflows/wf_1"
        assert wait_for(lambda: len(_answers(log, path)) >= 3, timeout=10)
        assert _answers(log, path) == [503, 503, 503]
    finally:
        proc.terminate()
        proc.close()


def test_sdk_tries_again_while_the_database_is_away_and_gets_the_answer_once_it_is_back(database, world, tmp_path):
    world.publish(TIMER)
    workflow = world.start("cool-off")
    log = tmp_path / "api.log"
    path = f"/v1/namespaces/{world.namespace}/workflows/{workflow}"
    proc, url, db_port = _api_before_its_database(database, log)
    proxy = None
    try:
        client = sdk.WeaveClient(url, world.token, world.namespace, retries=30)
        result: dict = {}
        thread = threading.Thread(target=lambda: result.update(client.get_workflow(workflow)))
        thread.start()
        assert wait_for(lambda: 503 in _answers(log, path), timeout=30)  # tried while the database was away
        proxy = Proxy(database.host, database.port, listen_port=db_port)  # the database answers there now
        thread.join(90)
        assert result["workflow_id"] == workflow and result["status"] == "RUNNING"
        assert wait_for(lambda: 200 in _answers(log, path), timeout=10)  # logged once the answer has gone out
        answers = _answers(log, path)
        assert answers[-1] == 200 and set(answers[:-1]) == {503}
    finally:
        if proxy:
            proxy.kill()
        proc.terminate()
        proc.close()


def test_sdk_imports_without_server_dependencies():
    code = ("import sys; sys.modules['falcon'] = None; sys.modules['pymysql'] = None; "
            "sys.modules['gunicorn'] = None; import api.client; print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "ok", out.stderr


def _raw_request(url: str, request: bytes) -> tuple[int, dict[str, str], bytes]:
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as conn:
        conn.sendall(request)
        data = b""
        while chunk := conn.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    return int(lines[0].split()[1]), headers, body


@pytest.mark.parametrize("request_bytes, status, code", [
    (b"GET /" + b"x" * 9000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", 414, "URI_TOO_LONG"),
    (b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + b"".join(b"X-%d: %s\r\n" % (i, b"v" * 100) for i in range(200))
     + b"\r\n", 431, "HEADERS_TOO_LARGE"),
    (b"GET /healthz HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n", 400, "BAD_REQUEST"),
])
def test_refusals_made_before_the_app_are_problem_json_too(api_url, request_bytes, status, code):
    got_status, headers, body = _raw_request(api_url, request_bytes)
    assert got_status == status and headers["content-type"] == "application/problem+json"
    assert json.loads(body)["code"] == code


def test_weave_api_leaves_no_gunicorn_control_socket_behind(database, world, tmp_path):
    """gunicorn's control socket would sit at one path per user (created under the home folder) and be taken
    over by a second API on the host; `weave api` opens none, and refuses a worker count that serves nothing."""
    home = tmp_path / "home"
    home.mkdir()
    proc, _ = start_api(database, tmp_path / "api.log", env={"HOME": str(home), "XDG_RUNTIME_DIR": ""})
    try:
        assert list(home.iterdir()) == [] and "Control socket" not in (tmp_path / "api.log").read_text()
    finally:
        proc.terminate()
        proc.close()
    refused = subprocess.run([sys.executable, "-m", "orchestrator.cli", "api", "--workers", "0"], capture_output=True,
                             text=True, timeout=60)
    assert refused.returncode == 2 and "--workers: must be at least 1" in refused.stderr


def _workers(root: int) -> set[int]:
    """The gunicorn workers under process ``root``: the processes below it that have none below them."""
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parents[int(stat.parent.name)] = int(stat.read_text().rpartition(")")[2].split()[1])
        except OSError:
            continue  # gone meanwhile
    below, grew = {root}, True
    while grew:
        more = {pid for pid, parent in parents.items() if parent in below} - below
        below, grew = below | more, bool(more)
    return {pid for pid in below - {root} if pid not in parents.values()}


def test_weave_api_sums_its_workers_request_metrics_whichever_answers_the_scrape(database, world, tmp_path):
    """Each gunicorn worker counts the requests it answers; a scrape is answered by one worker, which must show the
    node's whole count, or every rate over the counter would jump. Twenty requests, then both workers are replaced:
    a scrape answered by a worker that served none of them shows all twenty. The folder of the counts goes with the
    API."""
    import signal
    import urllib.request

    scratch = tmp_path / "tmp"
    scratch.mkdir()
    proc, url = start_api(database, tmp_path / "api.log", workers=2, env={"TMPDIR": str(scratch)})
    try:
        for _ in range(20):
            with urllib.request.urlopen(f"{url}/healthz", timeout=10) as answer:  # a connection each
                assert answer.status == 200
        assert wait_for(lambda: len(_workers(proc.proc.pid)) == 2, timeout=30)  # the second may still be booting
        first = _workers(proc.proc.pid)
        for pid in first:
            os.kill(pid, signal.SIGTERM)
        assert wait_for(lambda: len(_workers(proc.proc.pid) - first) == 2, timeout=30)
        served = []
        for _ in range(3):
            with urllib.request.urlopen(f"{url}/metrics", timeout=10) as answer:
                text = answer.read().decode()
            served.append(re.search(r'weave_http_requests_total\{method="GET",route="/healthz",status="200"\} (\S+)',
                                    text).group(1))
        assert served == ["20.0"] * 3
        assert [p.name for p in scratch.iterdir()][0].startswith("weave-api-metrics-")
    finally:
        proc.terminate()
        proc.close()
    assert list(scratch.iterdir()) == []


def test_weave_api_warns_when_its_threads_could_take_more_connections_than_the_server_allows(database, world, tmp_path):
    """Each serving thread may hold a connection: more threads than the server's max_connections would, under load,
    have requests and every other client refused connections. `weave api` says so as it starts, and serves."""
    limit = world.db.scalar("SELECT @@max_connections")
    proc, _ = start_api(database, tmp_path / "api.log", workers=1, args=("--threads", str(limit + 1)))
    try:
        log = (tmp_path / "api.log").read_text()
        assert f"--workers 1 x --threads {limit + 1} = {limit + 1} database connections at most" in log
        assert f"max_connections ({limit})" in log
        # A JSON line, as every later line of the API is: the guide's jq filter dropped the start's plain text.
        (said,) = [json.loads(line) for line in log.splitlines() if "max_connections" in line]
        assert said["level"] == "warning" and said["logger"] == "weave.api"
    finally:
        proc.terminate()
        proc.close()
    proc, _ = start_api(database, tmp_path / "quiet.log", workers=2)
    try:
        assert "max_connections" not in (tmp_path / "quiet.log").read_text()
    finally:
        proc.terminate()
        proc.close()

def test_weave_api_writes_its_access_log_unless_told_not_to(database, world, tmp_path):
    for args, logged in (((), True), (("--no-access-log",), False)):
        log = tmp_path / f"api-{logged}.log"
        proc, url = start_api(database, log, workers=1, args=args)
        try:
            sdk.WeaveClient(url, world.token, "acme").request("GET", "/healthz")
        finally:
            proc.terminate()
            proc.close()
        assert ('"GET /healthz HTTP/1.1" 200' in log.read_text()) is logged, log.read_text()
