"""The private server (`weave dev`'s, and the suite's own when WEAVE_TEST_DSN is not set): on a unix socket only by
default, so that it never collides with a system server; also on a free port of 127.0.0.1 when asked, as the suite
asks, since its tests of connection handling put a TCP proxy between the engine and its server. Its DSN says
where it listens."""

from __future__ import annotations

import socket

import pymysql
import pytest

from orchestrator import embedded
from orchestrator.embedded import EmbeddedServer, find_server_binary
from orchestrator.embedded import free_port as port_free
from tests.support.server import _remove

pytestmark = pytest.mark.process


@pytest.mark.parametrize("tcp", [False, True], ids=["socket-only", "tcp"])
def test_the_private_server_listens_where_its_dsn_says(tmp_path, tcp):
    if not find_server_binary():
        pytest.fail("this test needs a mariadbd/mysqld binary on PATH")
    server = EmbeddedServer(tmp_path / "server", database="weave_embedded", fast_commit=True, tcp=tcp)
    try:
        dsn = server.start()
        conn = pymysql.connect(host=dsn.host, port=dsn.port, unix_socket=dsn.unix_socket, user=dsn.user,
                               password=dsn.password)
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT @@skip_networking, @@port, @@bind_address")
                skip_networking, port, bind_address = cur.fetchone()
        finally:
            conn.close()
        if tcp:
            assert dsn.unix_socket is None and (dsn.host, dsn.port) == ("127.0.0.1", server.port)
            assert (skip_networking, port, bind_address) == (0, server.port, "127.0.0.1")
        else:
            assert dsn.unix_socket == str(server.socket) and server.port is None
            assert skip_networking == 1
    finally:
        _remove(server)


def test_a_private_servers_files_and_socket_are_its_users_alone(tmp_path):
    """The private server's root user has no password: whoever reaches its socket is the database's root, can read
    every row and mint an admin token for any namespace (weave bootstrap). Its folder, socket included, was
    readable and searchable by every user of the machine."""
    import stat

    if not find_server_binary():
        pytest.fail("this test needs a mariadbd/mysqld binary on PATH")
    server = EmbeddedServer(tmp_path / "server", database="weave_embedded", fast_commit=True)
    try:
        server.start()
        assert stat.S_IMODE(server.directory.stat().st_mode) == 0o700
    finally:
        _remove(server)


def test_a_private_server_whose_port_was_taken_meanwhile_starts_on_another(tmp_path, monkeypatch):
    """The port is picked free and bound by the server a moment later; another process may take it in between."""
    if not find_server_binary():
        pytest.fail("this test needs a mariadbd/mysqld binary on PATH")
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        taken = squatter.getsockname()[1]
        picks = iter([taken])
        monkeypatch.setattr(embedded, "free_port", lambda: next(picks, None) or port_free())
        server = EmbeddedServer(tmp_path / "server", database="weave_embedded", fast_commit=True, tcp=True)
        try:
            dsn = server.start()
            assert server.port not in (None, taken) and dsn.port == server.port
            pymysql.connect(host=dsn.host, port=dsn.port, user=dsn.user, password=dsn.password).close()
        finally:
            _remove(server)
