"""Finding a real server for the suite (Q-1): WEAVE_TEST_DSN, else a private server from the binary on
PATH, else a MySQL 8 testcontainer where Docker runs, else a clear failure. Never a mock."""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from orchestrator.embedded import INSTALL_HINT, EmbeddedServer, find_server_binary
from procedures import installer
from procedures.db import Dsn


def _docker_available() -> bool:
    try:
        import docker

        docker.from_env().ping()
        return True
    except Exception:
        return False


def server_dsn() -> tuple[Dsn, str]:
    """A DSN of a server we may create databases on, and how it was found."""
    explicit = os.environ.get("WEAVE_TEST_DSN")
    if explicit:
        return Dsn.parse(explicit), "WEAVE_TEST_DSN"
    if find_server_binary():
        directory = Path(tempfile.mkdtemp(prefix="weave-test-server-"))
        # Over TCP: the tests of connection handling put a proxy between the engine and its server.
        server = EmbeddedServer(directory, database="weave_test", fast_commit=True, tcp=True)
        dsn = server.start()
        atexit.register(_remove, server)
        return dsn, f"private server in {directory}"
    if _docker_available():
        from testcontainers.mysql import MySqlContainer

        container = MySqlContainer("mysql:8.0", username="root", password="weave", dbname="weave_test")
        container.with_command("--log-bin-trust-function-creators=1")
        container.start()
        atexit.register(container.stop)
        return Dsn(host=container.get_container_host_ip(), port=int(container.get_exposed_port(3306)),
                   user="root", password="weave", database="weave_test"), "MySQL 8 testcontainer"
    raise RuntimeError(
        "The Weave test suite needs a real MariaDB/MySQL server and found none:\n"
        "  - WEAVE_TEST_DSN is not set (e.g. mysql://root@127.0.0.1:3306/weave_test),\n"
        "  - no server binary on PATH to start a private one, and\n"
        "  - no Docker for a MySQL 8 testcontainer.\n" + INSTALL_HINT)


def _remove(server: EmbeddedServer) -> None:
    """Stop a private server, woken first if a test left it stopped (SIGSTOP), and delete its directory: a
    data directory is a few hundred MB, and every run would leave one behind."""
    if server.process is not None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(server.process.pid, signal.SIGCONT)
    server.stop()
    shutil.rmtree(server.directory, ignore_errors=True)


@contextlib.contextmanager
def private_server(prefix: str, database: str, options: tuple[str, ...] = (),
                   migrated: bool = True, tcp: bool = False) -> Iterator[tuple[EmbeddedServer, Dsn]]:
    """A private server of a test's own (started with the server ``options``; reached over TCP when ``tcp``, as
    the hosts of a several-host DSN are), migrated with the test clock unless not ``migrated``, that the test may
    hang, kill or reconfigure; stopped and removed afterwards, whatever state the test left it in."""
    if not find_server_binary():
        raise RuntimeError("this test needs a mariadbd/mysqld binary on PATH to start a private server. "
                           + INSTALL_HINT)
    server = EmbeddedServer(Path(tempfile.mkdtemp(prefix=prefix)), database=database, fast_commit=True,
                            options=options, tcp=tcp)
    try:
        dsn = server.start()
        if migrated:
            installer.migrate(dsn, test_clock=True)
        yield server, dsn
    finally:
        _remove(server)


# Users and fencing on a private server, as docs/operations.md sets them up (the HA tests).
def create_user(admin: Any, name: str, grant: str, database: str, limits: str = "") -> None:
    """User ``name`` (password ``pw``) with ``grant`` on ``database``, from any host, ``WITH`` the given ``limits``
    (``MAX_USER_CONNECTIONS 1``, ``MAX_STATEMENT_TIME 0.5``) if any."""
    with admin.cursor() as cur:
        for host in ("%", "localhost"):
            cur.execute(f"CREATE USER '{name}'@'{host}' IDENTIFIED BY 'pw'" + (f" WITH {limits}" if limits else ""))
            cur.execute(f"GRANT {grant} ON `{database}`.* TO '{name}'@'{host}'")


def drop_user(admin: Any, name: str) -> None:
    """Drop user ``name`` from both hosts ``create_user`` made it for, if it is there."""
    with admin.cursor() as cur:
        for host in ("%", "localhost"):
            cur.execute(f"DROP USER IF EXISTS '{name}'@'{host}'")


def as_user(dsn: Dsn, user: str) -> Dsn:
    """``dsn`` as ``user`` (made by create_user)."""
    return Dsn.parse(dsn.url().replace(f"//{dsn.user}@", f"//{user}:pw@", 1))


def set_read_only(admin: Any, on: bool) -> None:
    with admin.cursor() as cur:
        cur.execute(f"SET GLOBAL read_only = {'ON' if on else 'OFF'}")


def two_host_dsn(dsn: Dsn, other: Dsn) -> Dsn:
    """``dsn`` listing ``other``'s host after its own, as a DSN naming a primary and its replica does."""
    return Dsn.parse(dsn.url().replace(f"@{dsn.host}:{dsn.port}/",
                                       f"@{dsn.host}:{dsn.port},{other.host}:{other.port}/", 1))
