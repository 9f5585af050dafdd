"""`weave dev`, the README's run command, as a person uses it: it prints its progress, refuses a second run
in the same directory without touching anything, stops on Ctrl-C saying "stopped" with exit code 0, and a
restart keeps the dev credentials instead of minting new ones."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.embedded import find_server_binary
from tests.support.processes import ROOT, free_port
from tests.support.waiting import wait_for

pytestmark = pytest.mark.process


def _dev(data_dir: Path, port: int, log: Path) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k != "WEAVE_DSN"}
    return subprocess.Popen([sys.executable, "-m", "orchestrator.cli", "dev", "--data-dir", str(data_dir),
                             "--bind", f"127.0.0.1:{port}", "--quiet"], cwd=ROOT, env={**env, "PYTHONUNBUFFERED": "1"},
                            stdout=open(log, "w"), stderr=subprocess.STDOUT)


def _wait_for_line(log: Path, pattern: str, proc: subprocess.Popen, timeout: float = 90) -> str:
    def seen() -> bool:
        text = log.read_text()
        assert re.search(pattern, text) or proc.poll() is None, text
        return re.search(pattern, text) is not None

    if wait_for(seen, timeout=timeout, interval=0.2):
        return log.read_text()
    raise AssertionError(f"no {pattern!r} in:\n{log.read_text()}")


def _interrupt(proc: subprocess.Popen) -> int:
    proc.send_signal(signal.SIGINT)
    return proc.wait(60)


def test_dev_refuses_a_second_run_stops_cleanly_on_ctrl_c_and_keeps_its_credentials(tmp_path):
    if not find_server_binary():
        pytest.fail("weave dev needs a mariadbd/mysqld binary on PATH")
    data, port = tmp_path / "weave", free_port()
    first = _dev(data, port, tmp_path / "first.log")
    try:
        text = _wait_for_line(tmp_path / "first.log", r"Weave is running", first)
        assert re.search(r"database started \(initialised\) \(\d+\.\d s\)", text) and "ready (" in text
        token = re.search(r"token \(workflows:\*\): (\S+)", text).group(1)
        second = subprocess.run([sys.executable, "-m", "orchestrator.cli", "dev", "--data-dir", str(data), "--bind",
                                 f"127.0.0.1:{free_port()}"], cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert second.returncode == 1 and "already running" in second.stderr
        assert f"pid {first.pid}, API on http://127.0.0.1:{port}" in second.stderr
        assert not list(data.glob("data.init-*"))
    finally:
        code = _interrupt(first)
    text = (tmp_path / "first.log").read_text()
    assert code == 0 and "stopped unexpectedly" not in text and text.rstrip().endswith("weave dev: stopped"), text
    again = _dev(data, port, tmp_path / "again.log")
    try:
        text = _wait_for_line(tmp_path / "again.log", r"Weave is running", again)
        assert f"token (workflows:*): {token}  (kept from the last run)" in text
        assert "(initialised)" not in text
    finally:
        assert _interrupt(again) == 0


def test_dev_refuses_an_address_in_use_before_it_touches_anything(tmp_path, database, db, capsys):
    """With another API already answering on the --bind address (an earlier `weave dev`, a `weave api`), `weave dev`
    took that API's /readyz for its own: it printed "Weave is running" with tokens the answering API knew nothing
    of, and only later stopped, its own API having failed to listen. It now refuses the address at once, before it
    migrates or provisions anything."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    from threading import Thread

    from orchestrator.cli import main

    class Ready(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802  (the name http.server calls)
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *_: object) -> None:
            pass

    other = ThreadingHTTPServer(("127.0.0.1", 0), Ready)
    Thread(target=other.serve_forever, daemon=True).start()
    try:
        code = main(["dev", "--dsn", database.url(), "--data-dir", str(tmp_path / "weave"), "--quiet",
                     "--bind", f"127.0.0.1:{other.server_address[1]}"])
    finally:
        other.shutdown()
        other.server_close()
    out = capsys.readouterr()
    assert code == 1 and "Weave is running" not in out.out
    assert f"cannot listen on 127.0.0.1:{other.server_address[1]}: it is already in use" in out.err
    assert "--bind" in out.err
    assert db.scalar("SELECT COUNT(*) FROM weave_namespaces") == 0
