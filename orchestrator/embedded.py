"""A private MariaDB/MySQL server process for ``weave dev`` and for the test suite.

It is started from the server binary on PATH, listens on a unix socket only (no TCP port, so it
never collides with a system server) unless asked for TCP, when it takes a free port of 127.0.0.1, keeps
its data in a directory we own, and is stopped cleanly.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pymysql

from procedures import settings
from procedures.db import Dsn

_SEARCH_PATH = settings.search_path()


class NoServerBinary(RuntimeError):
    pass


class ServerStartFailed(RuntimeError):
    """The private server could not be initialised or started; the message is one line a person can act on."""


class PortTaken(ServerStartFailed):
    """The private server could not bind its TCP port: another process listens there."""


def find_server_binary() -> tuple[str, str] | None:
    """(flavour, path) of a mariadbd or mysqld binary, or None."""
    for name, flavour in (("mariadbd", "mariadb"), ("mysqld", "mysql")):
        path = shutil.which(name, path=_SEARCH_PATH)
        if path:
            real = os.path.realpath(path)
            if "mariadb" in os.path.basename(real) or flavour == "mariadb":
                return "mariadb", path
            out = subprocess.run([path, "--version"], capture_output=True, text=True).stdout.lower()
            return ("mariadb" if "mariadb" in out else "mysql"), path
    return None


INSTALL_HINT = (
    "No MariaDB/MySQL server binary (mariadbd or mysqld) was found on PATH.\n"
    "Install one (Debian/Ubuntu: `apt-get install mariadb-server`; macOS: `brew install mariadb`),\n"
    "or point Weave at an existing server: export WEAVE_DSN=mysql://user:password@host:3306/weave")


def free_port() -> int:
    """A TCP port of 127.0.0.1 that nothing listens on now (the server takes it a moment later)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class ServerFiles:
    """Where a private server keeps its files: all of them under its own ``directory``. Its temporary files
    too, never the shared /tmp: on a busy machine initialisation failed there (Errcode 2), and a server
    starting on a shared one deletes every other server's live temporary tables ("Error on delete of
    /tmp/#sql-temptable...")."""

    directory: Path

    @property
    def datadir(self) -> Path:
        return self.directory / "data"

    @property
    def socket(self) -> Path:
        return self.directory / "mysqld.sock"

    @property
    def tmpdir(self) -> Path:
        return self.directory / "tmp"

    @property
    def log(self) -> Path:
        return self.directory / "error.log"

    def file_options(self) -> list[str]:
        """The server options that put its files there; no option file of the machine is read."""
        return ["--no-defaults", f"--datadir={self.datadir}", f"--socket={self.socket}", f"--tmpdir={self.tmpdir}",
                f"--pid-file={self.directory / 'mysqld.pid'}", f"--log-error={self.log}",
                "--character-set-server=utf8mb4"]


@dataclass
class EmbeddedServer(ServerFiles):
    """A server process whose files live in ``directory``; ``start()`` returns its DSN."""

    directory: Path
    database: str = "weave"
    fast_commit: bool = False   # tests trade crash durability for speed; `weave dev` keeps the default
    options: tuple[str, ...] = ()  # more server options, after the engine's own
    tcp: bool = False  # also listen on a free port of 127.0.0.1, and answer a DSN that connects there
    process: subprocess.Popen | None = None
    port: int | None = None  # the TCP port of the running server, when ``tcp``

    @property
    def dsn(self) -> Dsn:
        if self.port is not None:
            return Dsn(host="127.0.0.1", port=self.port, user="root", password="", database=self.database)
        return Dsn(user="root", password="", database=self.database, unix_socket=str(self.socket))

    def start(self, timeout: float = 60.0) -> Dsn:
        found = find_server_binary()
        if not found:
            raise NoServerBinary(INSTALL_HINT)
        flavour, binary = found
        # Its root user has no password: whoever reaches the socket is the database's root (every row, and an admin
        # token for any namespace by weave bootstrap). The folder is its user's alone, a folder made before too.
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.directory.chmod(0o700)
        self.tmpdir.mkdir(exist_ok=True)  # for initialisation too
        user = ["--user=root"] if os.geteuid() == 0 else []
        if not (self.datadir / "mysql").exists():
            self._initialise(flavour, binary, user)
        engine = [binary, *self.file_options(), "--max-connections=500", *user]
        if self.fast_commit:
            engine += ["--innodb-flush-log-at-trx-commit=2", "--sync-binlog=0"]
        if flavour == "mysql":
            engine += ["--mysqlx=OFF", "--log-bin-trust-function-creators=1"]
        if not self.tcp:
            self._launch([*engine, "--skip-networking", *self.options], timeout)
            return self.dsn
        # A free port is free when it is picked, not necessarily a moment later when the server binds it: a
        # start that lost its port to another process is made again on another one, three tries in all (the last
        # one raises what it meets).
        for _ in range(2):
            try:
                return self._launch_tcp(engine, timeout)
            except PortTaken:
                pass
        return self._launch_tcp(engine, timeout)

    def _launch_tcp(self, engine: list[str], timeout: float) -> Dsn:
        self.port = free_port()
        self._launch([*engine, f"--port={self.port}", "--bind-address=127.0.0.1", *self.options], timeout)
        return self.dsn

    def _launch(self, args: list[str], timeout: float) -> None:
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                        start_new_session=True)
        self._wait_ready(timeout)

    def _initialise(self, flavour: str, binary: str, user: list[str]) -> None:
        """Initialises into a fresh directory beside the data directory and renames it into place only once that
        succeeded: a failed first start never leaves a data directory that a later start would trust."""
        datadir = self.datadir
        staging = datadir.with_name(f"{datadir.name}.init-{os.getpid()}")
        shutil.rmtree(staging, ignore_errors=True)
        if datadir.exists():  # left half-built by an older version: kept aside, never trusted
            datadir.rename(datadir.with_name(f"{datadir.name}.broken-{int(time.time())}"))
        try:
            self._install(flavour, binary, staging, user)
            staging.rename(datadir)
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def _install(self, flavour: str, binary: str, datadir: Path, user: list[str]) -> None:
        if flavour == "mariadb":
            installer = shutil.which("mariadb-install-db", path=_SEARCH_PATH) or shutil.which(
                "mysql_install_db", path=_SEARCH_PATH)
            if not installer:
                raise NoServerBinary("mariadbd was found but mariadb-install-db was not. " + INSTALL_HINT)
            cmd = [installer, "--no-defaults", f"--datadir={datadir}", "--auth-root-authentication-method=normal",
                   "--skip-test-db", f"--tmpdir={self.tmpdir}", *user]
        else:
            cmd = [binary, "--no-defaults", "--initialize-insecure", f"--datadir={datadir}", f"--tmpdir={self.tmpdir}",
                   *user]
        result = subprocess.run(cmd, capture_output=True, text=True)
        if result.returncode != 0:
            lines = [line for line in (result.stderr + result.stdout).splitlines() if line.strip()]
            raise ServerStartFailed("initialising the private database failed: "
                                    + (lines[-1] if lines else f"exit code {result.returncode}"))

    def _wait_ready(self, timeout: float) -> None:
        # Readiness is polled, not timed: the loop ends as soon as the socket answers.
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process and self.process.poll() is not None:
                log = self.log
                tail = log.read_text()[-2000:] if log.exists() else ""
                # The server's last ERROR line is its "Aborting"; the one before says why.
                last = [line for line in tail.splitlines() if "ERROR" in line and not line.endswith("Aborting")] \
                    or tail.splitlines()[-1:]
                failed = PortTaken if "Address already in use" in tail else ServerStartFailed
                raise failed("the private database exited at start: "
                             + (last[-1] if last else "no log") + f" (log: {log})")
            try:
                pymysql.connect(unix_socket=str(self.socket), user="root").close()
                return
            except pymysql.err.MySQLError:
                time.sleep(0.05)
        raise ServerStartFailed(f"the private database did not answer on {self.socket} within {timeout:.0f}s")

    def stop(self, timeout: float = 30.0) -> None:
        if not self.process or self.process.poll() is not None:
            return
        self.process.terminate()  # SIGTERM is a clean shutdown for mariadbd/mysqld
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
