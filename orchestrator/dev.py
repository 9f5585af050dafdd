"""``weave dev``: the whole engine on one machine, on its embedded default database.

With no WEAVE_DSN it starts a private MariaDB/MySQL server from the binary on PATH (data under
``.weave/``, unix socket only), migrates it, bootstraps a ``dev`` namespace with an app, a queue and a
credential, publishes the example definitions, and runs the HTTP API (gunicorn), the orchestrator and
an example worker until Ctrl-C, then stops everything cleanly.
"""

from __future__ import annotations

import errno
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import TextIO

from procedures import db, definitions, errors, installer, routines, settings
from procedures.logs import configure_logging

from . import example_handlers  # noqa: F401  (registers the example handlers the dev worker runs)
from .daemon import on_signal
from .embedded import EmbeddedServer
from .loop import Orchestrator
from .worker import Worker

EXAMPLES = installer.shipped_folder(Path(__file__).resolve().parent / "examples",
                                   Path(__file__).resolve().parent.parent / "docs" / "examples")
NAMESPACE, APP, QUEUE = "dev", "dev-app", "dev-queue"
DEV_SCOPES = ["workflows:read", "workflows:start", "workflows:signal", "workflows:control", "workflows:review"]


def provision(conn: db.Connection, namespace: str = NAMESPACE) -> dict:
    """Namespace, app, queue, a working credential and the example definitions; returns the tokens."""
    boot = routines.namespace_bootstrap(conn, namespace)
    routines.app_put(conn, boot["token"], namespace, APP, 100)
    routines.queue_put(conn, boot["token"], namespace, QUEUE, 100)
    dev = routines.credential_create(conn, boot["token"], namespace, "developer", DEV_SCOPES, "*")
    return {"admin_token": boot["token"], "token": dev["token"],
            **_publish_examples(conn, boot["token"], namespace)}


def _publish_examples(conn: db.Connection, admin_token: str, namespace: str = NAMESPACE) -> dict:
    """The example definitions (publishing unchanged content again is a no-op answering its version)."""
    published = []
    for path in sorted(EXAMPLES.glob("*.json")):
        definition = definitions.validate(path.read_bytes())
        row = routines.definition_publish(conn, admin_token, namespace, definition)
        published.append(f"{row['name']} v{row['version']}")
    return {"definitions": published}


class _Progress:
    """One line per start-up stage, with the time it took."""

    def __init__(self) -> None:
        self.started = self.last = time.monotonic()

    def __call__(self, text: str) -> None:
        now = time.monotonic()
        print(f"weave dev: {text} ({now - self.last:.1f} s)", flush=True)
        self.last = now


def _already_running(data_dir: Path) -> tuple[TextIO | None, str | None]:
    """Takes the directory's lock for this run; if another `weave dev` holds it, says who (pid and API)."""
    import fcntl

    data_dir.mkdir(parents=True, exist_ok=True)
    lock = open(data_dir / "dev.lock", "a+")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        lock.seek(0)
        holder = lock.read().strip() or "unknown"
        lock.close()
        return None, holder
    return lock, None


def _credentials(conn: db.Connection, data_dir: Path) -> dict | None:
    """The dev credentials of an earlier run, if they still work: a restart mints no new ones."""
    saved = data_dir / "dev-credentials.json"
    if not saved.exists():
        return None
    try:
        tokens = json.loads(saved.read_text())
        routines.definition_list(conn, tokens["token"], NAMESPACE)
        routines.app_list(conn, tokens["admin_token"], NAMESPACE)
    except (ValueError, KeyError, errors.WeaveError):
        return None
    return dict(tokens)


def _save_credentials(data_dir: Path, tokens: dict) -> None:
    saved = data_dir / "dev-credentials.json"
    saved.touch(mode=0o600)
    saved.write_text(json.dumps({k: tokens[k] for k in ("token", "admin_token")}))


def _status_line(conn: db.Connection) -> str:
    figures = routines.status(conn)
    running = figures["instances"].get("RUNNING", {"instances": 0})["instances"]
    waiting = figures["polls_waiting"] + figures["signals_pending"]
    due = sum(int(row["due"]) for row in figures["backlog"])
    return (f"instances running {running} (polls waiting and signals pending {waiting}), in review "
            f"{figures['instances_in_review']}, due backlog {due}")


def run_dev(data_dir: Path, dsn_text: str | None, bind: str = "127.0.0.1:8080", quiet: bool = False) -> int:
    configure_logging(settings.log_level("WARNING"))
    data_dir = data_dir.resolve()
    lock, holder = _already_running(data_dir)
    if lock is None or holder is not None:
        print(f"weave dev: already running in {data_dir} ({holder}); nothing was touched", file=sys.stderr)
        return 1
    why = _cannot_listen(bind)
    if why is not None:  # another API answering there would pass for ours: its /readyz answers 200 as ours would
        print(f"weave dev: cannot listen on {bind}: {why}; nothing was touched", file=sys.stderr)
        lock.close()
        return 1
    progress = _Progress()
    server = None
    stop = threading.Event()
    orch = worker = api = None
    try:
        if dsn_text:
            dsn = db.Dsn.parse(dsn_text)
            progress(f"using {dsn.redacted()}")
        else:
            server = EmbeddedServer(data_dir)
            first = not (server.directory / "data" / "mysql").exists()
            print(f"weave dev: {'initialising' if first else 'starting'} the private database in "
                  f"{server.directory} …", flush=True)
            dsn = server.start()
            progress("database started" + (" (initialised)" if first else ""))
        report = installer.migrate(dsn)
        progress(f"database at level {installer.shipped_level()}" + (" (migrated)" if report.changed else ""))
        with db.connect(dsn) as conn:
            tokens = _credentials(conn, data_dir)
            reused = tokens is not None
            if tokens is None:
                tokens = provision(conn)
                _save_credentials(data_dir, tokens)
            else:
                tokens = {**tokens, **_publish_examples(conn, tokens["admin_token"])}
        api = _start_api(dsn, bind, data_dir)
        orch = Orchestrator(dsn, concurrency=2)
        worker = Worker(dsn, queues=[QUEUE], concurrency=4)
        threads = [threading.Thread(target=orch.run, name="orchestrator", daemon=True),
                   threading.Thread(target=worker.run, name="worker", daemon=True)]
        for thread in threads:
            thread.start()
        if not _wait_ready(f"http://{bind}", api):
            print(f"weave dev: the API did not come up on {bind}; see {data_dir / 'api.log'}", file=sys.stderr)
            return 1
        lock.seek(0)
        lock.truncate()
        lock.write(f"pid {os.getpid()}, API on http://{bind}")
        lock.flush()
        progress("ready")
        _banner(dsn, tokens, f"http://{bind}", reused)
        signal.signal(signal.SIGTERM, on_signal(stop.set))
        signal.signal(signal.SIGINT, on_signal(stop.set))
        last_line, last_at = "", 0.0
        with db.connect(dsn) as conn:
            while not stop.wait(0.5):
                dead = [t.name for t in threads if not t.is_alive()] + (["api"] if api.poll() is not None else [])
                if dead and not stop.is_set():
                    print(f"weave dev: {', '.join(dead)} stopped unexpectedly; see {data_dir / 'api.log'}",
                          file=sys.stderr)
                    return 1
                if not quiet and time.monotonic() - last_at >= 10:
                    last_at = time.monotonic()
                    try:
                        line = _status_line(conn)
                    except errors.WeaveError:
                        continue
                    if line != last_line:
                        print(f"weave dev: {line}", flush=True)
                        last_line = line
        print("\nweave dev: stopping …", flush=True)
        return 0
    except (errors.WeaveError, RuntimeError, OSError, ValueError) as exc:
        print(f"weave dev: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}", file=sys.stderr)
        return 1
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
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
        print("weave dev: stopped", flush=True)
        lock.close()


def _cannot_listen(bind: str) -> str | None:
    """Why the API could not listen on ``bind`` (HOST:PORT) now, or None when it could."""
    host, _, port = bind.rpartition(":")
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host.strip("[]"), int(port), type=socket.SOCK_STREAM)[0]
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the API's server sets it
            probe.bind(address)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            return "it is already in use (another weave dev or weave api?); stop that, or pass --bind HOST:PORT"
        return f"{exc.strerror or exc}; pass --bind HOST:PORT"
    return None


def _start_api(dsn: db.Dsn, bind: str, data_dir: Path) -> subprocess.Popen:
    data_dir.mkdir(parents=True, exist_ok=True)
    log = open(data_dir / "api.log", "ab")
    # Its own session: Ctrl-C in the terminal reaches `weave dev`, which stops the API itself, in order.
    return subprocess.Popen([sys.executable, "-m", "orchestrator.cli", "api", "--bind", bind, "--workers", "2"],
                            env={**os.environ, "WEAVE_DSN": dsn.url()}, stdout=log, stderr=log,
                            cwd=Path(__file__).resolve().parent.parent, start_new_session=True)


def _wait_ready(base_url: str, api: subprocess.Popen, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and api.poll() is None:
        try:
            with urllib.request.urlopen(base_url + "/readyz", timeout=2) as resp:
                if resp.status == 200:
                    return True
        except OSError:
            time.sleep(0.2)
    return False


def _banner(dsn: db.Dsn, tokens: dict, base_url: str, reused: bool = False) -> None:
    ns_url = f"{base_url}/v1/namespaces/{NAMESPACE}"
    auth = f"-H 'Authorization: Bearer {tokens['token']}' -H 'Content-Type: application/json'"
    start = json.dumps({"definition": "order-flow", "app": APP, "input": {"order_id": "o-1"},
                        "deadline_ms": 3_600_000})
    approve = json.dumps({"name": "approval.decided", "payload_version": "1", "target_step_key": "approval",
                          "target_activation_sequence": 1, "correlation_key": "o-1",
                          "payload": {"approved": True}, "reason": "looks good"})
    weave = shlex.quote(str(Path(sys.executable).parent / "weave"))
    print(f"""
Weave is running: API {base_url}, orchestrator, example worker on queue {QUEUE}.
  console: {base_url}/console (sign in with namespace {NAMESPACE} and the token below)
  namespace {NAMESPACE}, app {APP}; definitions: {', '.join(tokens['definitions'])}
  token (workflows:*): {tokens['token']}{'  (kept from the last run)' if reused else ''}
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
