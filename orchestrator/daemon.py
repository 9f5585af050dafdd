"""How a long-running engine process (orchestrator, worker) starts and stops: SIGTERM and SIGINT ask it to
stop, it waits for its database and refuses a database at another level (R-16), and then it runs until
asked to stop."""

from __future__ import annotations

import logging
import signal
import threading
from typing import Protocol

from procedures import errors, installer


class Daemon(Protocol):
    @property
    def stopping(self) -> threading.Event: ...

    def stop(self, *_: object) -> None: ...

    def check_level(self) -> None: ...

    def run(self) -> object: ...


def serve(daemon: Daemon, process: str) -> int:
    """Run ``daemon`` as the process ``weave <process>``; the exit status: 0 after a stop, 1 when refused."""
    signal.signal(signal.SIGTERM, daemon.stop)
    signal.signal(signal.SIGINT, daemon.stop)
    try:
        if not installer.await_level(daemon.check_level, daemon.stopping, process):
            return 0
    except errors.SchemaMismatch as exc:
        logging.getLogger(f"weave.{process}").error("refusing to start", extra={"fields": {"error": str(exc)}})
        print(f"weave {process}: {exc}", flush=True)
        return 1
    daemon.run()
    return 0
