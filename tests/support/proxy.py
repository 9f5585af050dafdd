"""A TCP forwarder in front of a real server, standing for one node of a cluster in tests that may not touch
the server itself: ``kill()`` makes it a dead node (every connection through it ends, new ones are refused),
``hang()`` a hung one (connections stay open and nothing more is forwarded either way, new ones included).
"""

from __future__ import annotations

import socket
import threading


class Proxy:
    def __init__(self, host: str, port: int):
        self.upstream = (host, port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._flowing = threading.Event()
        self._flowing.set()
        self._killed = False
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
            try:
                server = socket.create_connection(self.upstream, 5)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._sockets += [client, server]
            for src, dst in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                self._flowing.wait()
                if self._killed:
                    return
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                _shut(s)

    def hang(self) -> None:
        self._flowing.clear()

    def kill(self) -> None:
        """End every connection (the clients read end of file) and refuse new ones, like a server's death."""
        self._killed = True
        _shut(self._listener)
        with self._lock:
            for s in self._sockets:
                _shut(s)
        self._flowing.set()

    close = kill


def _shut(s: socket.socket) -> None:
    try:
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    s.close()
