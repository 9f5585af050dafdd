"""``weave dev``: the whole engine on one machine, on its embedded default database.

With no WEAVE_DSN it starts a private MariaDB/MySQL server from the binary on PATH (data under
``.weave/``, unix socket only), migrates it, bootstraps a ``dev`` namespace with an app, a queue and a
credential, publishes the example definitions, and runs the HTTP API (gunicorn), the orchestrator and
an example worker until Ctrl-C, then stops everything cleanly.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

from procedures import db, definitions, errors, installer, routines, settings
from procedures.logs import configure_logging

from . import example_handlers  # noqa: F401  (registers the example handlers the dev worker runs)
from .embedded import EmbeddedServer, NoServerBinary
from .loop import Orchestrator
from .worker import Worker

EXAMPLES = Path(__file__).resolve().parent.parent / "docs" / "examples"
NAMESPACE, APP, QUEUE = "dev", "dev-app", "dev-queue"
DEV_SCOPES = ["workflows:read", "workflows:start", "workflows:signal", "workflows:control", "workflows:review"]


def provision(conn: db.Connection, namespace: str = NAMESPACE) -> dict:
    """Namespace, app, queue, a working credential and the example definitions; returns the tokens."""
    boot = routines.namespace_bootstrap(conn, namespace)
    routines.app_put(conn, boot["token"], namespace, APP, 100)
    routines.queue_put(conn, boot["token"], namespace, QUEUE, 100)
    dev = routines.credential_create(conn, boot["token"], namespace, "developer", DEV_SCOPES, "*")
    published = []
    for path in sorted(EXAMPLES.glob("*.json")):
        definition = definitions.validate(path.read_bytes())
        row = routines.definition_publish(conn, boot["token"], namespace, definition)
        published.append(f"{row['name']} v{row['version']}")
    return {"admin_token": boot["token"], "token": dev["token"], "definitions": published}


def run_dev(data_dir: Path, dsn_text: str | None, bind: str = "127.0.0.1:8080") -> int:
    configure_logging(settings.log_level("WARNING"))
    server = None
    if dsn_text:
        dsn = db.Dsn.parse(dsn_text)
        print(f"weave dev: using {dsn.redacted()}")
    else:
        server = EmbeddedServer(data_dir.resolve())
        print(f"weave dev: starting a private database server in {server.directory} …", flush=True)
        try:
            dsn = server.start()
        except NoServerBinary as exc:
            print(f"weave dev: {exc}", file=sys.stderr)
            return 1
    stop = threading.Event()
    orch = worker = api = None
    try:
        report = installer.migrate(dsn)
        print(f"weave dev: database at level {installer.shipped_level()}"
              + (" (migrated)" if report.changed else ""))
        with db.connect(dsn) as conn:
            tokens = provision(conn)
        api = _start_api(dsn, bind, data_dir)
        orch = Orchestrator(dsn, concurrency=2)
        worker = Worker(dsn, queues=[QUEUE], concurrency=4)
        threads = [threading.Thread(target=orch.run, name="orchestrator", daemon=True),
                   threading.Thread(target=worker.run, name="worker", daemon=True)]
        for thread in threads:
            thread.start()
        if not _wait_ready(f"http://{bind}"):
            print(f"weave dev: the API did not come up on {bind}; see {data_dir / 'api.log'}", file=sys.stderr)
            return 1
        _banner(dsn, tokens, f"http://{bind}")
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        try:
            while not stop.wait(0.5):
                dead = [t.name for t in threads if not t.is_alive()] + (["api"] if api.poll() is not None else [])
                if dead:
                    print(f"weave dev: {', '.join(dead)} stopped unexpectedly", file=sys.stderr)
                    return 1
        except KeyboardInterrupt:
            pass
        print("\nweave dev: stopping …", flush=True)
        return 0
    except errors.WeaveError as exc:
        print(f"weave dev: {exc}", file=sys.stderr)
        return 1
    finally:
        if api is not None and api.poll() is None:
            api.terminate()
            api.wait(15)
        if worker is not None:
            worker.stop()
        if orch is not None:
            orch.stop()
            orch.close()
        if server is not None:
            server.stop()
            print("weave dev: database server stopped; data kept in", server.directory)


def _start_api(dsn: db.Dsn, bind: str, data_dir: Path) -> subprocess.Popen:
    data_dir.mkdir(parents=True, exist_ok=True)
    log = open(data_dir / "api.log", "ab")
    return subprocess.Popen([sys.executable, "-m", "orchestrator.cli", "api", "--bind", bind, "--workers", "2"],
                            env={**os.environ, "WEAVE_DSN": dsn.url()}, stdout=log, stderr=log,
                            cwd=Path(__file__).resolve().parent.parent)


def _wait_ready(base_url: str, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(base_url + "/readyz", timeout=2) as resp:
                if resp.status == 200:
                    return True
        except OSError:
            time.sleep(0.2)
    return False


def _banner(dsn: db.Dsn, tokens: dict, base_url: str) -> None:
    ns_url = f"{base_url}/v1/namespaces/{NAMESPACE}"
    auth = f"-H 'Authorization: Bearer {tokens['token']}' -H 'Content-Type: application/json'"
    start = json.dumps({"definition": "order-flow", "app": APP, "input": {"order_id": "o-1"},
                        "deadline_ms": 3_600_000})
    approve = json.dumps({"name": "approval.decided", "payload_version": "1", "target_step_key": "approval",
                          "target_activation_sequence": 1, "correlation_key": "o-1",
                          "payload": {"approved": True, "by": "you"}, "reason": "looks good"})
    weave = shlex.quote(str(Path(sys.executable).parent / "weave"))
    print(f"""
Weave is running: API {base_url}, orchestrator, example worker on queue {QUEUE}.
  namespace {NAMESPACE}, app {APP}; definitions: {', '.join(tokens['definitions'])}
  token (workflows:*): {tokens['token']}
  admin token:         {tokens['admin_token']}

Try it from another terminal — an order that waits 5 s, polls a payment three times, then waits for approval:

  curl -s {auth} -H 'Idempotency-Key: start-o-1' -d '{start}' {ns_url}/workflows

  curl -s {auth} -H 'Idempotency-Key: approve-o-1' -d '{approve}' {ns_url}/workflows/wf_1/signals

  curl -s {auth} {ns_url}/workflows/wf_1

(use the workflow_id the first command printed if it is not wf_1; the approval may be sent before the step
is active: it waits as an early signal). The same from the CLI:
  export WEAVE_DSN={shlex.quote(dsn.url())} WEAVE_NAMESPACE={NAMESPACE} WEAVE_TOKEN={tokens['token']}
  {weave} workflows show wf_1 && {weave} workflows events wf_1

Ctrl-C stops everything.""", flush=True)
