"""A TCP forwarder in front of a real server, standing for one node of a cluster in tests that may not touch
the server itself: ``kill()`` makes it a dead node (every connection through it ends, new ones are refused),
``hang()`` a hung one (connections stay open and nothing more is forwarded either way, new ones included),
``hang(answers_only=True)`` one whose answers are lost (statements still reach the server and commit), and
``resume()`` ends a hang, as a node that was only slow or cut off for a while answers again, and ``full()`` one
at its connection limit (a new connection is refused with 1040, those open go on) until ``resume()``.
"""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

from procedures.db import Dsn, forget_nodes


class Proxy:
    def __init__(self, host: str, port: int, listen_port: int = 0):
        self.upstream = (host, port)
        self._listener = socket.create_server(("127.0.0.1", listen_port))  # 0: a free port
        self.port = self._listener.getsockname()[1]
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._to_server, self._to_client = threading.Event(), threading.Event()
        self._to_server.set()
        self._to_client.set()
        self._killed = False
        self._full = False
        self.holding = threading.Event()  # set once bytes wait at a gate that hang() closed
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:  # killed
                return
            if self._full:  # the server's greeting replaced by its refusal, as at max_connections
                _shut(client, TOO_MANY)
                continue
            try:
                server = socket.create_connection(self.upstream, 5)
            except OSError:
                client.close()
                continue
            server.settimeout(None)  # the 5 s were the connect's: a hung node's connections stay open, as they do
            with self._lock:
                self._sockets += [client, server]
            for src, dst, gate in ((client, server, self._to_server), (server, client, self._to_client)):
                threading.Thread(target=self._pump, args=(src, dst, gate), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, gate: threading.Event) -> None:
        try:
            while data := src.recv(65536):
                if not gate.is_set():
                    self.holding.set()
                gate.wait()
                if self._killed:
                    return
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                _shut(s)

    def hang(self, answers_only: bool = False) -> None:
        self._to_client.clear()
        if not answers_only:
            self._to_server.clear()

    def resume(self) -> None:
        self._full = False
        self._to_server.set()
        self._to_client.set()

    def full(self) -> None:
        self._full = True

    def kill(self) -> None:
        """End every connection (the clients read end of file) and refuse new ones, like a server's death."""
        self._killed = True
        _shut(self._listener)
        with self._lock:
            for s in self._sockets:
                _shut(s)
        self._to_server.set()
        self._to_client.set()

    close = kill


# An error packet as the first packet of a connection: 1040, SQLSTATE 08004, "Too many connections".
_REFUSAL = b"\xff" + struct.pack("<H", 1040) + b"#08004Too many connections"
TOO_MANY = len(_REFUSAL).to_bytes(3, "little") + b"\x00" + _REFUSAL


def _shut(s: socket.socket, last: bytes = b"") -> None:
    try:
        if last:
            s.sendall(last)
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    s.close()


@contextmanager
def two_nodes(server: Dsn, **options: float) -> Iterator[tuple[list[Proxy], Dsn]]:
    """Two "nodes" in front of the server of ``server`` and a DSN listing both, with ``options``. What the
    process knew of nodes is forgotten before and after (ports are reused)."""
    if server.unix_socket:
        raise RuntimeError("this needs a TCP server (WEAVE_TEST_DSN=mysql://...@host:port/...)")
    forget_nodes()
    pair = [Proxy(server.host, server.port), Proxy(server.host, server.port)]
    hosts = tuple(("127.0.0.1", p.port) for p in pair)
    try:
        yield pair, replace(server, host="127.0.0.1", port=pair[0].port, hosts=hosts).with_options(**options)
    finally:
        for p in pair:
            p.close()
        forget_nodes()
