"""Real `weave` processes for process tests: started with the test database's DSN, killed with -9."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from api import client as sdk
from orchestrator.embedded import free_port  # noqa: F401 - one definition, for the product's private server too
from procedures.db import Dsn
from tests.support.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]


# Every process started and not yet closed, in start order: what a failed test left running is closed after it.
STARTED: list[WeaveProcess] = []


def close_started_since(count: int) -> None:
    """Close every process started after the first ``count`` of STARTED (closing one twice is harmless)."""
    while len(STARTED) > count:
        STARTED.pop().close()


class WeaveProcess:
    def __init__(self, dsn: Dsn, *args: str, env: dict[str, str] | None = None, log: Path | None = None):
        self.args = args
        full_env = {**os.environ, "WEAVE_DSN": dsn.url(), "PYTHONUNBUFFERED": "1", **(env or {})}
        self.log = open(log, "ab") if log else subprocess.DEVNULL
        self.proc = subprocess.Popen([sys.executable, "-m", "orchestrator.cli", *args], cwd=ROOT, env=full_env,
                                     stdout=self.log, stderr=self.log, start_new_session=True)
        STARTED.append(self)

    def kill9(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)

    def terminate(self, timeout: float = 15) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> None:
        if self.proc.poll() is None:
            self.kill9()
        if self.log is not subprocess.DEVNULL:
            self.log.close()


def start_api(dsn: Dsn, log: Path, workers: int = 2, env: dict[str, str] | None = None,
              args: tuple[str, ...] = ()) -> tuple[WeaveProcess, str]:
    """A `weave api` process on a free port (more of its options in ``args``), once /readyz answers ready:
    (process, base URL)."""
    port = free_port()
    proc = WeaveProcess(dsn, "api", "--bind", f"127.0.0.1:{port}", "--workers", str(workers), *args, env=env,
                        log=log)
    url = f"http://127.0.0.1:{port}"
    probe = sdk.WeaveClient(url, "none", "none", retries=1)

    def up() -> bool:
        try:
            return probe.ready()["status"] == "ready"
        except sdk.WeaveApiError:
            return False

    if not wait_for(up, timeout=30):
        proc.close()
        raise AssertionError(f"weave api did not become ready:\n{log.read_text()}")
    return proc, url


def hang(pid: int) -> None:
    """SIGSTOP ``pid`` and return once every one of its threads is stopped: the signal is only queued when
    ``kill`` returns, and a busy server's thread can still answer a request in between."""
    os.kill(pid, signal.SIGSTOP)

    def stopped() -> bool:
        tasks = Path(f"/proc/{pid}/task")
        states = [(t / "stat").read_text().rsplit(")", 1)[1].split()[0] for t in tasks.iterdir()]
        return all(s in ("T", "t") for s in states)

    assert wait_for(stopped, timeout=10, interval=0.01), f"process {pid} did not stop"
