"""``weave dev``: the whole engine on one machine, on its embedded default database.

With no WEAVE_DSN it starts a private MariaDB/MySQL server from the binary on PATH (data under
``.weave/``, unix socket only), migrates it, bootstraps a ``dev`` namespace with an app, a queue and a
credential, publishes the example definitions, and runs the orchestrator until Ctrl-C, then stops
everything cleanly.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import sys
import threading
from pathlib import Path

from procedures import db, errors, installer, routines

from . import definitions
from .embedded import EmbeddedServer, NoServerBinary
from .logs import configure_logging
from .loop import Orchestrator

EXAMPLES = Path(__file__).resolve().parent.parent / "docs" / "examples"
NAMESPACE, APP, QUEUE = "dev", "dev-app", "dev-queue"
DEV_SCOPES = ["workflows:read", "workflows:start", "workflows:signal", "workflows:control", "workflows:review"]


def provision(conn, namespace: str = NAMESPACE) -> dict:
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


def run_dev(data_dir: Path, dsn_text: str | None) -> int:
    configure_logging(os.environ.get("WEAVE_LOG_LEVEL", "WARNING"))
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
    orch = None
    try:
        report = installer.migrate(dsn)
        print(f"weave dev: database at level {installer.shipped_level()}"
              + (" (migrated)" if report.changed else ""))
        with db.connect(dsn) as conn:
            tokens = provision(conn)
        orch = Orchestrator(dsn, concurrency=2)
        thread = threading.Thread(target=orch.run, name="orchestrator", daemon=True)
        thread.start()
        _banner(dsn, tokens)
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        try:
            while not stop.wait(0.5):
                if not thread.is_alive():
                    print("weave dev: the orchestrator stopped unexpectedly", file=sys.stderr)
                    return 1
        except KeyboardInterrupt:
            pass
        print("\nweave dev: stopping …", flush=True)
        return 0
    except errors.WeaveError as exc:
        print(f"weave dev: {exc}", file=sys.stderr)
        return 1
    finally:
        if orch is not None:
            orch.stop()
            orch.close()
        if server is not None:
            server.stop()
            print("weave dev: database server stopped; data kept in", server.directory)


def _banner(dsn: db.Dsn, tokens: dict) -> None:
    env = f"WEAVE_DSN={shlex.quote(dsn.url())} WEAVE_NAMESPACE={NAMESPACE} WEAVE_TOKEN={tokens['token']}"
    weave = shlex.quote(str(Path(sys.executable).parent / "weave"))
    start = json.dumps({"order_id": "o-1"})
    print(f"""
Weave is running (namespace {NAMESPACE}, app {APP}, queue {QUEUE}).
  definitions: {', '.join(tokens['definitions'])}
  token (workflows:*): {tokens['token']}
  admin token:         {tokens['admin_token']}

Try it (another terminal):
  export {env}
  {weave} workflows start cool-off --app {APP} --deadline-ms 3600000 --input '{start}'
  {weave} workflows show <workflow_id>
  {weave} workflows events <workflow_id>

Ctrl-C stops everything.""", flush=True)
