"""``weave api``: the Falcon app under gunicorn, refusing to start against another schema level (R-16).

Each worker serves with threads (gthread), so that a request waiting on the database never blocks
/healthz, and a request gunicorn refuses itself (a request line or headers too large, a malformed request)
is answered as problem+json like every other error, not as gunicorn's HTML page. A worker tells the arbiter
it is alive at most once a second, not once per request.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import socket
import tempfile
import time
from typing import Any

import falcon
from gunicorn import util
from gunicorn.app.base import BaseApplication
from gunicorn.workers import gthread
from gunicorn.workers.gthread import ThreadWorker

from procedures import db, errors, installer, settings
from procedures.logs import configure_logging, refuse

from . import traffic
from .http import PROBLEM, RequestTimeout, problem_text

_EDGE_CODES = {400: "BAD_REQUEST", 404: "NOT_FOUND", 414: "URI_TOO_LONG", 431: "HEADERS_TOO_LARGE", 501: "BAD_REQUEST",
               417: "BAD_REQUEST"}


# Under a path prefix (SCRIPT_NAME) gunicorn refuses a path outside it as a "configuration problem" with a 500. It is
# a request for a path this server does not serve: a 404, like any other (a load balancer probing /healthz without
# the prefix learns what is wrong, and INTERNAL stays what it means, a fault of this build).
_OUTSIDE_PREFIX = re.compile(r"Request path (?P<path>.+) does not start with SCRIPT_NAME (?P<prefix>.+)\Z", re.DOTALL)


def write_problem(sock: socket.socket, status_int: int, reason: str, mesg: str) -> None:
    """gunicorn's ``util.write_error``, answering problem+json."""
    outside = _OUTSIDE_PREFIX.search(mesg or "") if status_int == 500 else None
    if outside:
        status_int, reason = 404, "Not Found"
        mesg = (f"no such path: this server serves every path under SCRIPT_NAME {outside['prefix']}, "
                f"and {outside['path']} is not under it")
    code = _EDGE_CODES.get(status_int, "INTERNAL" if status_int >= 500 else "BAD_REQUEST")
    body = problem_text(status_int, code, mesg or reason).encode()
    head = (f"HTTP/1.1 {status_int} {reason}\r\nConnection: close\r\nContent-Type: {PROBLEM}\r\n"
            f"Cache-Control: no-store\r\nContent-Length: {len(body)}\r\n\r\n")
    util.write_nonblock(sock, head.encode("latin-1") + body)


# gthread's loop tells the arbiter that the worker is alive (a utime of the worker's file) on every turn, and it
# turns twice for every request answered on a kept-alive connection (strace: 4,003 utimes for 2,000 requests). The
# arbiter only needs to hear within its timeout (30 s, run_api's), and the loop turns at least once a second when
# idle, so once a second does.
NOTIFY_EVERY = 1.0


class ProgressSocket(socket.socket):
    """A client's socket whose ``sendall`` waits at most its timeout for each part of an answer to leave, not for the
    whole answer (the timeout of ``socket.sendall`` bounds the whole call): a client that reads a large answer slowly
    but steadily, such as a page of signals of 8 MiB over a slow link, gets all of it, and one that reads nothing is
    still dropped. A TLS socket sends in parts already, each waiting at most the timeout."""

    __slots__ = ()

    def sendall(self, data: Any, flags: int = 0) -> None:
        with memoryview(data) as whole, whole.cast("B") as view:
            sent = 0
            while sent < len(view):
                sent += self.send(view[sent:], flags)


class RequestReads:
    """The client's socket as the request parser reads it: no read past ``deadline`` (a ``time.monotonic()``), each
    read waiting at most the socket's own timeout and never past the deadline. What a read finds past the deadline is
    a RequestTimeout; writes go to the socket itself and are not counted."""

    __slots__ = ("sock", "deadline", "seconds")
    clock = staticmethod(time.monotonic)

    def __init__(self, sock: socket.socket) -> None:
        self.sock, self.deadline, self.seconds = sock, float("inf"), 0.0

    def start(self, seconds: float) -> None:
        """A new request: its reads may go on for ``seconds`` from now."""
        self.deadline, self.seconds = self.clock() + seconds, seconds

    def recv(self, size: int, flags: int = 0) -> bytes:
        left = self.deadline - self.clock()
        if left <= 0:
            raise RequestTimeout(f"the request had not arrived whole after {self.seconds} s")
        own = self.sock.gettimeout()
        if own is not None and own <= left:
            return self.sock.recv(size, flags)
        self.sock.settimeout(left)
        try:
            return self.sock.recv(size, flags)
        except TimeoutError:
            raise RequestTimeout(f"the request had not arrived whole after {self.seconds} s") from None
        finally:
            self.sock.settimeout(own)

    # The parser's drain of a body the app left unread bounds each of its reads by setting a timeout.
    def gettimeout(self) -> float | None:
        return self.sock.gettimeout()

    def settimeout(self, value: float | None) -> None:
        self.sock.settimeout(value)


class ClientTimedConnection(gthread.TConn):
    """A client connection whose every read of a request and write of its answer waits at most ``client_timeout``
    seconds, and whose request (its line, headers and body) must have arrived whole ``request_timeout`` seconds
    after its first byte. gthread reads a request on a serving thread with a blocking socket that never times out:
    a client that sends half a request and then nothing would hold that thread for as long as it keeps the
    connection open. The limit on each read ends that, but not a client that sends one byte every few seconds,
    each within it: 20 such connections, no token needed, held every thread of the API (/healthz too) for as long as
    they went on. The deadline ends those. It counts from when a serving thread takes the request up, which gthread
    does once the connection is readable (its first byte has arrived), and starts again for each request of a
    kept-alive connection; the time the app takes to answer is not counted, though a body it reads is.

    Each connection still holds a thread for up to the deadline: many more such clients than threads, reconnecting,
    still can keep them busy. A reverse proxy that buffers whole requests before passing them on keeps them off the
    API (docs/operations.md). The serving thread sets the socket blocking again before each request, then calls
    ``init``."""

    client_timeout = 10.0
    request_timeout = 30.0

    def init(self) -> None:
        super().init()
        self.sock.settimeout(self.client_timeout)
        if type(self.sock) is socket.socket:
            self.sock.__class__ = ProgressSocket  # the same socket, its answers sent part by part
        unreader = getattr(self.parser, "unreader", None)  # an HTTP/1.x parser's source of bytes
        if unreader is not None:
            if not isinstance(unreader.sock, RequestReads):
                unreader.sock = RequestReads(unreader.sock)
            unreader.sock.start(self.request_timeout)


class ClientTimeoutLine(logging.Filter):
    """gunicorn logs a connection dropped for its client's silence or slowness (ClientTimedConnection) as a socket
    error with its stack trace, at ERROR: one line at INFO says what happened, so that clients that stop sending
    cannot flood the log with traces, and a real socket error still stands out."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and isinstance(record.exc_info[1], RequestTimeout):
            record.msg, record.args = "dropped a client whose request had not arrived whole %s s after it began", (
                ClientTimedConnection.request_timeout,)
        elif record.exc_info and isinstance(record.exc_info[1], TimeoutError):
            record.msg, record.args = "dropped a client that sent or read nothing for %s s", (
                ClientTimedConnection.client_timeout,)
        else:
            return True
        record.exc_info, record.exc_text, record.levelno, record.levelname = None, None, logging.INFO, "INFO"
        return True


class ProblemWorker(ThreadWorker):
    """The gthread worker with gunicorn's own refusals answered as problem+json, a time limit on every wait for a
    client and on the whole of a request's arrival (ClientTimedConnection), telling the arbiter it is alive at most
    once every NOTIFY_EVERY seconds."""

    _notified = float("-inf")  # time.monotonic() of the last notice

    def init_process(self) -> None:
        util.write_error = write_problem
        ClientTimedConnection.client_timeout = settings.api_client_timeout()
        ClientTimedConnection.request_timeout = settings.api_request_read_timeout()
        gthread.TConn = ClientTimedConnection  # what the worker's accept makes of each new connection
        self.log.error_log.addFilter(ClientTimeoutLine())
        super().init_process()

    def notify(self) -> None:
        now = time.monotonic()
        if now - self._notified >= NOTIFY_EVERY:
            self._notified = now
            super().notify()


# gunicorn 25.1 and later open a control socket at one path per user ($XDG_RUNTIME_DIR/gunicorn.ctl, else
# ~/.gunicorn/gunicorn.ctl, creating the folder): a second `weave api` on the host takes the socket over, and the
# first of them to stop removes it. Weave's API has no use for it; older gunicorns have no such setting.
_WHERE_SUPPORTED = {"control_socket_disable": True}


class _Gunicorn(BaseApplication):
    def __init__(self, dsn: str, options: dict[str, Any]):
        self.dsn, self.options = dsn, options
        super().__init__()

    def load_config(self) -> None:
        for key, value in self.options.items():
            self.cfg.set(key, value)
        for key, value in _WHERE_SUPPORTED.items():
            if key in self.cfg.settings:
                self.cfg.set(key, value)

    def load(self) -> falcon.App:
        from api.app import get_app

        return get_app(self.dsn)


def _connection_budget(conn: db.Connection, workers: int, threads: int) -> str | None:
    """A warning when the API's connections at most (one per serving thread) pass the server's max_connections:
    under load, requests and every other client of the server would then be refused connections (1040)."""
    with conn.cursor() as cur:
        cur.execute("SELECT @@max_connections AS m")
        limit = int(cur.fetchall()[0]["m"])
    if workers * threads <= limit:
        return None
    return (f"--workers {workers} x --threads {threads} = {workers * threads} database connections at most, more "
            f"than the server's max_connections ({limit}): under load, requests (503) and the orchestrators and "
            "workers would be refused connections; use fewer, or raise max_connections")


def run_api(dsn: db.Dsn, bind: str, workers: int, timeout: int = 30, threads: int = 8, access_log: bool = True,
            json_errors: bool = False) -> int:
    """Serve the API until stopped; ``weave api`` has checked the bind address and that workers and threads are
    at least 1. ``access_log``: gunicorn's access log on stdout. ``json_errors``: a refusal to start as JSON on
    stderr (``--json``)."""
    # What each worker reads as it boots, read here first: a bad value is one line now, not a worker that
    # fails to boot under gunicorn's own message.
    settings.api_db_timeout()
    settings.console_session_ttl()
    settings.api_client_timeout()
    settings.api_request_read_timeout()
    settings.log_level()
    # The start's own lines are JSON lines, as every later one of the API and the daemons is (the guide's jq filter
    # drops what is not).
    configure_logging()
    log = logging.getLogger("weave.api")
    try:
        # A hung database must not hang the start.
        with db.connect(dsn.with_options(connect_timeout=2, read_timeout=2, write_timeout=2)) as conn:
            installer.check_level(conn)
            budget_warning = _connection_budget(conn, workers, threads)
        if budget_warning:
            log.warning(budget_warning, extra={"fields": {"workers": workers, "threads": threads}})
    except errors.SchemaMismatch as exc:
        log.error("refusing to start", extra={"fields": {"error": str(exc)}})
        return refuse("api", exc.code, exc.detail, 1, json_errors)
    except errors.WeaveError as exc:
        log.warning("the database is not reachable; starting anyway, requests answer 503 until it is",
                    extra={"fields": {"database": dsn.redacted(), "error": exc.detail}})
    # The workers' request metrics, summed by whichever worker answers a scrape (api.traffic): a folder of this
    # run's own, named before any worker starts, removed when the API stops.
    folder, arbiter = tempfile.mkdtemp(prefix="weave-api-metrics-"), os.getpid()
    os.environ[traffic.FOLDER] = folder
    try:
        _Gunicorn(dsn.url(), {"bind": bind, "workers": workers, "threads": threads, "timeout": timeout,
                              "accesslog": "-" if access_log else None, "worker_class": "api.server.ProblemWorker",
                              "graceful_timeout": 10, "child_exit": _worker_exited}).run()
    finally:
        if os.getpid() == arbiter:  # a worker forked inside run() leaves through here too
            shutil.rmtree(folder, ignore_errors=True)
    return 0


def _worker_exited(server: Any, worker: Any) -> None:
    traffic.worker_exited(worker.pid)
