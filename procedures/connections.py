"""One connection per thread, and the one retry wrapper for routine calls (R-12).

The API's serving threads, the orchestrator's advance threads and the worker's threads each keep one
connection of their own: opened on first use, dropped after a failure and reopened on the next call. Before
each use it is checked without a round trip (``db.usable``): a connection the server closed, or to a node
that any thread of the process saw fail, is replaced before a statement is sent, so a request on it goes to a
ready node as if nothing had happened, and only statements in flight when a node dies see its death.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

from tenacity import wait_random_exponential

from . import db, errors
from .retrying import retry_after_first

T = TypeVar("T")
WAIT = wait_random_exponential(multiplier=0.02, max=1.0)  # between tries of a routine call (stateless, shared)


def retry_transient(fn: Callable[[], T], *, attempts: int = 5, on_retry: Callable[[], None] | None = None,
                    seconds: float | None = None,
                    retryable: Callable[[BaseException], bool] = errors.is_transient) -> T:
    """``fn()``, tried again on transient database errors (deadlock, lock wait timeout, lost connection) with
    jittered exponential backoff, ``attempts`` tries in all or, with ``seconds``, for that long; ``on_retry`` runs
    after each transient failure. Any other error, and the last transient one, is raised as it is. The first try is
    a plain call (``retry_after_first``). ``retryable`` may take more failures than transient ones."""
    return retry_after_first(fn, retryable, attempts, WAIT, on_retry, seconds)


class Connections:
    """One connection per thread, reopened after a failure. ``open`` makes a connection (default
    ``db.connect(dsn)``); every connection made is closed by ``close_all``. A thread that ends can ``release`` its
    connection to the next thread that needs one (a worker's task threads, started again by each run): it stays
    open, with the routines it has called still parsed, instead of a new one being opened and warmed."""

    def __init__(self, dsn: db.Dsn | None, open: Callable[[], db.Connection] | None = None):
        self.dsn = dsn
        self._open = open or (lambda: db.connect(self._dsn()))
        self._local = threading.local()
        self._lock = threading.Lock()
        self._all: set[db.Connection] = set()
        self._idle: list[db.Connection] = []  # released by threads that ended, for the next thread (guarded)

    def _dsn(self) -> db.Dsn:
        if self.dsn is None:
            raise errors.TransientDatabaseError("no database configured")
        return self.dsn

    def get(self) -> db.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is not None and not db.usable(conn):
            self.discard()
            conn = None
        if conn is None:
            conn = self._local.conn = self._take_idle() or self._open()
            with self._lock:
                self._all.add(conn)
        return conn

    def spare(self) -> None:
        """Open a connection now, for the next thread that asks for one (it waits with those released): proof that a
        connection can be had, kept for the thread that needs one. Raises as opening one does."""
        conn = self._open()
        with self._lock:
            self._all.add(conn)
            self._idle.append(conn)

    def _take_idle(self) -> db.Connection | None:
        while True:
            with self._lock:
                if not self._idle:
                    return None
                conn = self._idle.pop()
            if db.usable(conn):
                return conn
            self._close(conn)

    def _detach(self) -> db.Connection | None:
        """This thread's connection, taken from it (the thread's next call gets another)."""
        conn = getattr(self._local, "conn", None)
        self._local.conn = None
        return conn

    def release(self) -> None:
        """Hand this thread's connection over to the next thread that asks for one (this thread is ending)."""
        conn = self._detach()
        if conn is not None:
            with self._lock:
                self._idle.append(conn)

    def discard(self) -> None:
        """Drop this thread's connection (after a failure: the next call opens a new one)."""
        conn = self._detach()
        if conn is not None:
            self._close(conn)

    def close_all(self) -> None:
        with self._lock:
            conns, self._all, self._idle = self._all, set(), []
        for conn in conns:
            self._close(conn)
        self._local = threading.local()

    def _close(self, conn: db.Connection) -> None:
        with self._lock:
            self._all.discard(conn)
        try:
            conn.close()
        except Exception:  # the connection is already broken; nothing to release
            pass

    def retrying(self, fn: Callable[[db.Connection], T], attempts: int = 5, seconds: float | None = None,
                 retryable: Callable[[BaseException], bool] = errors.is_transient,
                 on_retry: Callable[[], None] | None = None) -> T:
        """``fn(connection)`` with the retry wrapper (``attempts`` tries, or ``seconds`` of them); a retryable
        failure drops this thread's connection, then runs ``on_retry``."""
        def again() -> None:
            self.discard()
            if on_retry is not None:
                on_retry()

        return retry_transient(lambda: fn(self.get()), attempts=attempts, on_retry=again, seconds=seconds,
                               retryable=retryable)

    def elsewhere_once(self, fn: Callable[[], T], repeatable: Callable[[], bool]) -> T:
        """``fn()``, run once more on a fresh connection when the node it used was lost under it (``db.node_lost``)
        and ``repeatable()`` says that running it again cannot do anything twice: it only reads, or each of its
        writes carries an idempotency key, so that a first run whose commit went through but whose answer was
        lost is replayed, not repeated. Only with several hosts: the fresh connection goes to a ready node."""
        try:
            return fn()
        except Exception as exc:
            if not (self.dsn is not None and self.dsn.clustered and db.node_lost(exc) and repeatable()):
                raise
        self.discard()
        return fn()

    def call(self, routine: str, *args: Any, attempts: int = 5) -> list[list[dict]]:
        """A routine call (every result set), retried on transient errors."""
        return self.retrying(lambda conn: db.call(conn, routine, *args), attempts)
