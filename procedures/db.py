"""Connections and routine calls. Python never builds SQL here beyond ``CALL name(%s, ...)``."""

from __future__ import annotations

import contextlib
import logging
import os
import random
import select
import socket
import ssl
import struct
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, TypeAlias
from urllib.parse import parse_qs, quote, unquote, urlencode, urlparse

import pymysql
import pymysql.cursors
from pymysql.constants import SERVER_STATUS

from . import errors, settings

# One sql_mode for installing routines and for calling them: routine parameters follow the caller's
# mode, and a lax mode would silently truncate a too-long argument. Both MariaDB and MySQL 8 accept it.
SQL_MODE = "STRICT_ALL_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION"
DEFAULT_DSN = settings.DEFAULT_DSN
log = logging.getLogger("weave.db")
# A routine the server interrupts part way (max_statement_time, KILL QUERY) fails the statement it is in, and its
# exit handler rolls back; but an interrupt that lands between two of its statements stops it there, where no
# handler of its own runs (seen on MariaDB 10.11: 30 of 62 interrupted starts), and one that began its own
# transaction leaves it open, half done. The engine's connections take no statement time limit (a limit the server
# sets for every session, meant for runaway reports, would cut decisions in half); MySQL has no such variable and
# ignores the MariaDB-only part.
# Nor a cap on the rows a plain SELECT answers (sql_select_limit, which a server's init_connect may set for every
# session): the installer's read of its recorded routines came back cut short, and every node refused the database
# as another build's.
INIT_COMMAND = (f"SET SESSION sql_mode='{SQL_MODE}', time_zone='+00:00', sql_select_limit = DEFAULT"
                " /*M!100101 , max_statement_time = 0 */")
# The server's interrupts of a statement: what is left open after one is the interrupted routine's own transaction.
INTERRUPTED = errors.INTERRUPTED_ERRNOS
IN_TRANSACTION_ERRNO = errors.ERRORS["IN_TRANSACTION"][0]  # a routine that owns its transaction, called inside one
# Every connection reads rows as dicts.
Connection: TypeAlias = "pymysql.connections.Connection[pymysql.cursors.DictCursor]"


# Connection timeouts (seconds), overridable per DSN: ``?connect_timeout=2&read_timeout=10&write_timeout=10``.
# A node that is hung rather than dead (SIGSTOP, a frozen VM) answers nothing at all: only these bound the wait.
TIMEOUTS = {"connect_timeout": 5.0, "read_timeout": 120.0, "write_timeout": 120.0}
FAILOVER_MODES = ("stable", "sequential", "loadbalance")
# TLS to the database, named as the MySQL and MariaDB clients name it (``--ssl-mode``, ``--ssl-ca``, ...):
# ``?ssl_mode=VERIFY_IDENTITY&ssl_ca=/etc/weave/db-ca.pem`` (and ``ssl_cert`` / ``ssl_key`` for a client
# certificate). PREFERRED, the default, is TLS when the server offers it, without checking whose certificate it is:
# it keeps a passive listener out, not a man in the middle. REQUIRED refuses a server without TLS; VERIFY_CA also
# refuses a certificate that ssl_ca (else the system's store) does not vouch for; VERIFY_IDENTITY also one that does
# not name the host connected to. An ssl_ca without a mode means VERIFY_CA, a client certificate alone REQUIRED.
SSL_MODES = ("DISABLED", "PREFERRED", "REQUIRED", "VERIFY_CA", "VERIFY_IDENTITY")
SSL_FILES = ("ssl_ca", "ssl_cert", "ssl_key")


def is_port(text: str) -> bool:
    """A TCP port as written in a DSN or a bind address: 1-65535 in ASCII decimal digits (``str.isdigit`` alone
    also takes '²', which ``int`` refuses, and other scripts' digits)."""
    return text.isascii() and text.isdigit() and 1 <= int(text) <= 65535


def _split_hosts(hostlist: str) -> tuple[tuple[str, int], ...]:
    """``h1:p1,h2,[::1]:p3`` -> ((h1, p1), (h2, 3306), (::1, p3))."""
    hosts = []
    for item in hostlist.split(","):
        item = item.strip()
        if not item:
            raise ValueError(f"empty host in {hostlist!r}")
        if item.startswith("["):
            host, _, rest = item[1:].partition("]")
            port = rest.lstrip(":")
        else:
            host, _, port = item.rpartition(":") if item.count(":") == 1 else (item, "", "")
        if port and not is_port(port):
            raise ValueError(f"bad port in {item!r}: a port is 1-65535")
        hosts.append((host or "127.0.0.1", int(port) if port else 3306))
    return tuple(hosts)


@dataclass(frozen=True)
class Dsn:
    """A parsed ``mysql://user:password@host:port[,host:port...]/database[?option=value...]`` URL.

    With several hosts (the nodes of a Galera cluster), a connection goes to a node that is ready, chosen by
    the ``failover`` option (see ``connect``). ``host`` and ``port`` are the first listed host. Options:
    ``unix_socket``, ``connect_timeout``, ``read_timeout``, ``write_timeout`` (seconds), ``failover``, and TLS:
    ``ssl_mode``, ``ssl_ca``, ``ssl_cert`` and ``ssl_key`` (see SSL_MODES).
    """

    host: str = "127.0.0.1"
    port: int = 3306
    user: str = "root"
    password: str = field(default="", repr=False)  # never in a repr: a log line or a traceback's locals
    database: str = "weave"
    unix_socket: str | None = None
    options: dict[str, str] = field(default_factory=dict)
    hosts: tuple[tuple[str, int], ...] = ()

    @classmethod
    def parse(cls, url: str) -> Dsn:
        """The DSN of ``url``. A refusal never quotes the URL's user part: its message is printed and logged, and
        the password is in that part (or, when a bare '/', '?' or '#' in it ended the user part early, in what
        was read as the host, the port or the database)."""
        try:
            return cls._parse(url)
        except ValueError as exc:
            refusal = str(exc)
        scheme, sep, rest = url.partition("://")
        try:
            netloc = urlparse(url).netloc
        except ValueError:  # e.g. an unclosed '[': no host can be told from the rest
            netloc = rest
        if not sep or scheme.lower() not in ("mysql", "mariadb", "mysql+pymysql"):
            refusal = "WEAVE_DSN must be a mysql:// URL: mysql://user:password@host:port/database"
        elif "@" in rest[len(netloc):]:
            refusal = ("the user part of WEAVE_DSN holds a bare '/', '?' or '#' (or the URL has an '@' past its host): "
                       "percent-encode them in the user and password (%2F, %3F, %23, %40)")
        raise ValueError(refusal) from None

    @classmethod
    def _parse(cls, url: str) -> Dsn:
        parsed = urlparse(url)
        if parsed.scheme not in ("mysql", "mariadb", "mysql+pymysql"):
            raise ValueError("WEAVE_DSN must be a mysql:// URL")
        query = {k: v[-1] for k, v in parse_qs(parsed.query).items()}
        socket = query.pop("unix_socket", None)
        userinfo, _, hostlist = parsed.netloc.rpartition("@")
        user, _, password = userinfo.partition(":")
        hosts = _split_hosts(hostlist) if hostlist else (("127.0.0.1", 3306),)
        for name in TIMEOUTS:
            if name in query:
                try:
                    if not settings.timeout_valid(float(query[name])):
                        raise ValueError
                except ValueError:
                    raise ValueError(f"{name} must be a number of seconds above 0 and at most "
                                     f"{settings.TIMEOUT_MAX_S}, got {query[name]!r}") from None
        database = (parsed.path or "/weave").lstrip("/") or "weave"
        if len(database) > 64 or database.endswith(" ") or any(c in database for c in "`/\\\0"):
            raise ValueError(f"the database name must be 1-64 characters without ` / \\ or a trailing space, got "
                             f"{database!r}")
        if query.get("failover", "stable") not in FAILOVER_MODES:
            raise ValueError(f"failover must be one of {', '.join(FAILOVER_MODES)}, got {query['failover']!r}")
        _check_tls(query)
        return cls(host=hosts[0][0], port=hosts[0][1], user=unquote(user or "root"), password=unquote(password),
                   database=database, unix_socket=socket,
                   options=query, hosts=hosts if len(hosts) > 1 else ())

    @property
    def addresses(self) -> tuple[tuple[str, int], ...]:
        """Every host of the DSN, in the order it lists them."""
        return self.hosts or ((self.host, self.port),)

    @property
    def clustered(self) -> bool:
        return len(self.addresses) > 1

    def timeout(self, name: str) -> float:
        return float(self.options.get(name, TIMEOUTS[name]))

    @property
    def ssl_mode(self) -> str:
        """The TLS mode in force: the one named, else VERIFY_CA with a CA, REQUIRED with a client certificate,
        else PREFERRED."""
        named = self.options.get("ssl_mode")
        if named:
            return named.upper()
        if self.options.get("ssl_ca"):
            return "VERIFY_CA"
        return "REQUIRED" if self.options.get("ssl_cert") else "PREFERRED"

    def with_database(self, database: str) -> Dsn:
        return replace(self, database=database)

    def with_options(self, **options: str | float) -> Dsn:
        return replace(self, options={**self.options, **{k: str(v) for k, v in options.items()}})

    def single(self, host: str, port: int) -> Dsn:
        """The same DSN for one of its hosts."""
        return replace(self, host=host, port=port, hosts=())

    def url(self, *, options: bool = True) -> str:
        """The DSN as a URL that parses back to it: the user and password percent-encoded, as the operator wrote
        them (a bare ``@``, ``/`` or ``:`` in a password would name another host to whatever reads the URL)."""
        auth = quote(self.user, safe="") + (f":{quote(self.password, safe='')}" if self.password else "")
        hosts = ",".join(f"[{h}]:{p}" if ":" in h else f"{h}:{p}" for h, p in self.addresses)
        query = {"unix_socket": self.unix_socket} if self.unix_socket else {}
        if options:
            query.update(self.options)
        return f"mysql://{auth}@{hosts}/{self.database}" + ("?" + urlencode(query, safe="/") if query else "")

    def redacted(self) -> str:
        return replace(self, password="***").url().replace(":%2A%2A%2A@", ":***@") if self.password else self.url()


def _check_tls(query: dict[str, str]) -> None:
    """Refuse TLS options that would not be applied as written: a misspelt name or mode would otherwise leave the
    connection as unchecked as if none were given."""
    for name in query:
        if name.lower().startswith(("ssl", "tls")) and name not in ("ssl_mode", *SSL_FILES):
            raise ValueError(f"unknown TLS option {name!r}: the TLS options are ssl_mode, ssl_ca, ssl_cert and ssl_key")
    mode = query.get("ssl_mode")
    if mode is not None and mode.upper() not in SSL_MODES:
        raise ValueError(f"ssl_mode must be one of {', '.join(SSL_MODES)}, got {mode!r}")
    if mode is not None and mode.upper() == "DISABLED" and any(query.get(name) for name in SSL_FILES):
        raise ValueError("ssl_mode=DISABLED cannot take ssl_ca, ssl_cert or ssl_key")
    if query.get("ssl_key") and not query.get("ssl_cert"):
        raise ValueError("ssl_key needs the client certificate it belongs to: ssl_cert")
    for name in SSL_FILES:
        if name in query and not os.path.isfile(query[name]):
            raise ValueError(f"{name} must name a readable PEM file, got {query[name]!r}")


def _tls_files(dsn: Dsn) -> tuple[tuple[str, float] | None, ...]:
    """Each TLS file of the DSN with its modification time: a file replaced on disk (a certificate rotated)
    makes a new context for the next connection."""
    files = []
    for name in SSL_FILES:
        path = dsn.options.get(name)
        try:
            files.append((path, os.stat(path).st_mtime) if path else None)
        except OSError as exc:
            raise errors.TransientDatabaseError(f"TLS: cannot read {name} {path!r}: {exc.strerror}") from None
    return tuple(files)


_tls_contexts: dict[tuple, ssl.SSLContext] = {}


def _tls_arguments(dsn: Dsn) -> dict[str, Any]:
    """PyMySQL's TLS arguments for the DSN's mode: none for PREFERRED (its default, one shared context), TLS off
    for DISABLED, else a context that requires TLS and checks what the mode checks, made once per mode and
    files."""
    mode = dsn.ssl_mode
    if mode == "PREFERRED":
        return {}
    if mode == "DISABLED":
        return {"ssl_disabled": True}
    key = (mode, _tls_files(dsn))
    with _default_tls_lock:
        context = _tls_contexts.get(key)
    if context is None:
        ca, cert, client_key = (dsn.options.get(name) for name in SSL_FILES)
        if mode in ("VERIFY_CA", "VERIFY_IDENTITY"):
            context = ssl.create_default_context(cafile=ca)
            context.check_hostname = mode == "VERIFY_IDENTITY"
        else:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
        # The servers' own self-made certificates lack extensions that strict X.509 checking asks for.
        context.verify_flags &= ~ssl.VERIFY_X509_STRICT
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        if cert:
            context.load_cert_chain(cert, keyfile=client_key)
        with _default_tls_lock:
            _tls_contexts[key] = context
    return {"ssl": context}


def dsn_from_env(explicit: str | None = None) -> Dsn:
    return Dsn.parse(settings.dsn(explicit))


# --- What this process knows of each node ---------------------------------------------------------------
# Every connection and thread of a process shares one view of the nodes, the way a cluster-aware driver keeps
# it: a node seen dead or not ready (a refused or timed-out connect, a statement timed out or refused with
# 1047, a connection dropped while the node refuses a new one) is down for every thread at once. A down node
# gets no new connections, and every connection opened to it before is dropped on its next use (``usable``),
# without a round trip and without each thread finding out by itself. A down node is probed again by one
# caller at a time, after a backoff that grows from PROBE_SECONDS to SUSPECT_SECONDS; it is up again only once
# a probe saw it ready. With failover=stable a down node is probed even while the process writes elsewhere (on a
# thread of its own, started by the next connection checked before use), so that the process goes back to a node it
# left which did not restart: that node is still the one every other process, and every process started now, writes
# to.
PROBE_SECONDS = 0.5
SUSPECT_SECONDS = 5.0
Address: TypeAlias = tuple[str, int]


@dataclass
class _Node:
    down: bool = False
    epoch: int = 0          # bumped each time the node goes down: connections of an older epoch are stale
    probe_at: float = 0.0   # monotonic time from which a down node may be probed again
    backoff: float = PROBE_SECONDS
    started: float | None = None  # monotonic time the server started at (now - its uptime), when last seen ready


@dataclass(frozen=True)
class _Origin:
    """Where a connection of a several-host DSN went, and the node's epoch when it was opened."""

    dsn: Dsn
    address: Address
    epoch: int
    galera: bool = False  # the node is a Galera node (it shows wsrep_local_state)


_nodes: dict[Address, _Node] = {}
_origins: weakref.WeakKeyDictionary[Any, _Origin] = weakref.WeakKeyDictionary()
# DSN hosts -> the node this process writes to with failover=stable, kept for as long as it stays ready.
_writers: dict[tuple[Address, ...], Address] = {}
_lock = threading.Lock()
_down: set[Address] = set()  # the nodes that are down (guarded by _lock): nothing to probe while it is empty
# Nodes whose uptimes differ by less than this are equally old: the listed order decides between them.
STABLE_TIE_SECONDS = 5


def _seen_down(address: Address, probed: bool = True) -> None:
    """``address`` failed: down for every connection of this process. A failure seen on a connection in use
    allows a probe at once (it may have been one slow answer); a failed probe or connect waits for the next
    one, twice as long after each failure in a row."""
    now = time.monotonic()
    with _lock:
        node = _nodes.setdefault(address, _Node())
        _down.add(address)
        if not node.down:
            node.down, node.epoch, node.backoff = True, node.epoch + 1, PROBE_SECONDS
            node.probe_at = now + (node.backoff if probed else 0.0)
        else:
            node.backoff = min(node.backoff * 2, SUSPECT_SECONDS) if probed else node.backoff
            node.probe_at = now + node.backoff if probed else node.probe_at


def _seen_ready(address: Address, uptime: int | None = None) -> None:
    """``address`` answered ready (its server up for ``uptime`` seconds, when known)."""
    now = time.monotonic()
    with _lock:
        node = _nodes.setdefault(address, _Node())
        node.down, node.backoff = False, PROBE_SECONDS
        _down.discard(address)
        if uptime is not None:
            node.started = now - uptime


def _suspect(address: Address, yes: bool) -> None:
    """Mark ``address`` down (as after a failure) or up (as after a probe that saw it ready)."""
    (_seen_down if yes else _seen_ready)(address)


def forget_nodes() -> None:
    """Forget what this process learnt of every node (tests that start from a known state)."""
    with _lock:
        _nodes.clear()
        _writers.clear()
        _down.clear()


def _candidates(dsn: Dsn) -> list[Address]:
    """The hosts to try, in order: every host that is up, and each down host whose probe is due (claimed here,
    so that other callers skip it until its next probe time). Down hosts go last in ``stable`` mode; in the
    other modes they keep their place, so that a node that rejoined takes new connections again."""
    hosts = list(dsn.addresses)
    if dsn.options.get("failover") == "loadbalance":
        random.shuffle(hosts)
    up, probed = _up_and_probed(hosts)
    if _stable(dsn):
        return up + probed
    return [address for address in hosts if address in up or address in probed]


def _up_and_probed(hosts: list[Address]) -> tuple[list[Address], list[Address]]:
    """The hosts that are up, and the down ones whose probe is due (claimed), each in the order given."""
    now = time.monotonic()
    with _lock:
        up = [address for address in hosts if address not in _down]
        return up, _claim_probes(tuple(hosts), now)


def usable(conn: Connection) -> bool:
    """Whether ``conn`` may take the next statement, known without a round trip: it is open, the server has
    not closed it (nothing is waiting to be read on an idle connection), its node did not go down since it was
    opened and, with failover=stable, the process still writes to that node. A socket the server closed, on a
    node that then refuses a new connection, marks the node down for every connection of the process."""
    if not conn.open:
        return False
    due: list[Address] = []
    with _lock:
        origin = _origins.get(conn)
        if origin is not None:
            node = _nodes.get(origin.address)
            if node is not None and (node.down or node.epoch != origin.epoch):
                return False
            if _stable(origin.dsn):
                if _writers.get(origin.dsn.addresses, origin.address) != origin.address:
                    return False
                if _down:
                    due = _claim_probes(origin.dsn.addresses, time.monotonic())
    for address in due:
        _reconsider_soon(origin.dsn, address)  # type: ignore[union-attr]  # due only with an origin
    state = _idle_state(conn)
    if state == "gone" and origin is not None:
        _probe(origin)
    return state == "open"


def _stable(dsn: Dsn) -> bool:
    return dsn.options.get("failover", "stable") == "stable"


def _claim_probes(addresses: tuple[Address, ...], now: float) -> list[Address]:
    """The down nodes among ``addresses`` whose probe is due, each claimed until its next probe time (so that one
    caller probes it). Called with ``_lock`` held."""
    due = []
    for address in addresses:
        node = _nodes.get(address)
        if node is not None and node.down and now >= node.probe_at:
            node.probe_at = now + node.backoff
            due.append(address)
    return due


def _reconsider_soon(dsn: Dsn, address: Address) -> None:
    """Probe the down node ``address`` on a thread of its own (the caller's statement does not wait for it)."""
    threading.Thread(target=_reconsider, args=(dsn, address), name="weave-node-probe", daemon=True).start()


def _reconsider(dsn: Dsn, address: Address) -> None:
    """Probe ``address``, a node this process left; when it is ready again and a stable election prefers it to the
    node the process writes to now (it is older: it did not restart while away), write to it again. The connections
    of the node left are then replaced before their next statement (``usable``)."""
    opened = _open_ready(dsn, address, False, True, [])
    if not opened:
        return  # still down, until its next probe
    opened[0].close()
    with _lock:
        current = _writers.get(dsn.addresses)
        if current is not None and current != address and _preferred(dsn, address, current):
            _writers[dsn.addresses] = address


def _preferred(dsn: Dsn, address: Address, than: Address) -> bool:
    """Whether a stable election chooses ``address`` over ``than``: its server started earlier by more than
    STABLE_TIE_SECONDS, or about as early and listed before it. Called with ``_lock`` held."""
    mine, theirs = _nodes.get(address), _nodes.get(than)
    if mine is None or theirs is None or mine.started is None or theirs.started is None:
        return False
    if abs(mine.started - theirs.started) < STABLE_TIE_SECONDS:
        return dsn.addresses.index(address) < dsn.addresses.index(than)
    return mine.started < theirs.started


def _probe(origin: _Origin) -> None:
    """One connection of ``origin``'s node was dropped: a server that died refuses a new one (or its host does
    not answer) and is then down for every connection, while one that dropped a single session (KILL, an idle
    timeout) is still ready. Costs a connect, and only when a connection was found dropped."""
    opened = _open_ready(origin.dsn, origin.address, False, True, [])
    if opened:
        opened[0].close()


def _idle_state(conn: Connection) -> str:
    """Between statements the server sends nothing. ``open``: nothing to read, the connection can take a
    statement. ``gone``: end of file or a reset, as when the server died or dropped the session. ``closed``:
    anything else waiting (the server said something unasked)."""
    sock = conn._sock  # type: ignore[attr-defined]  # not in the stubs
    if sock is None:
        return "closed"
    try:
        poller = select.poll()
        poller.register(sock, select.POLLIN | select.POLLPRI)
        if not poller.poll(0):
            return "open"
        if isinstance(sock, ssl.SSLSocket):  # peek beneath TLS, on a duplicate of the descriptor
            with socket.fromfd(sock.fileno(), sock.family, sock.type) as raw:
                return "closed" if raw.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) else "gone"
        return "closed" if sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) else "gone"
    except BlockingIOError:
        return "open"
    except (OSError, ValueError):
        return "gone"


def _reply_left(conn: Connection) -> bool:
    """After a call failed: whether anything of its reply is still to be read, in the driver's reader or on the
    socket. Only there: the look at the reader costs three system calls (3.7 us), twice what ``usable`` costs
    before every call, and a connection whose last reply was read to its end has nothing in its reader."""
    sock = conn._sock  # type: ignore[attr-defined]  # not in the stubs
    return sock is None or _buffered(conn, sock) or _idle_state(conn) != "open"


def _buffered(conn: Connection, sock: socket.socket) -> bool:
    """Bytes the driver has already taken from the socket into its reader and not parsed (the rest of a reply it
    stopped reading, or an answer nobody asked for): a look at the socket alone does not see them. The reader is
    asked without blocking: with nothing buffered it tries one read of the socket, which answers at once."""
    reader = getattr(conn, "_rfile", None)
    if reader is None:
        return False
    timeout = sock.gettimeout()
    try:
        sock.setblocking(False)
        return bool(reader.peek(1))
    except (OSError, ValueError):  # nothing to read now (BlockingIOError), or the reader or socket is closed
        return False
    finally:
        with contextlib.suppress(OSError):
            sock.settimeout(timeout)


def _origin_of(conn: Connection) -> _Origin | None:
    """The host entry ``conn`` was opened to (None for a single-host DSN's connections)."""
    with _lock:
        return _origins.get(conn)


def _node_failed(conn: Connection, exc: BaseException) -> None:
    """A statement on ``conn`` failed: when its node is not ready, does not answer, or dropped the connection
    and refuses a new one, the node is down for every connection of the process."""
    origin = _origin_of(conn)
    if origin is None:
        return
    if errors.refuses_writes(exc) or isinstance(exc.__context__, TimeoutError):
        _seen_down(origin.address, probed=False)  # not ready, read-only or not answering: a probe may follow at once
    elif errors.is_connection_lost(exc):
        _probe(origin)


# A Galera node that is not ready (not Synced, or cut off from the primary component) refuses statements so.
NOT_READY_ERRNO = 1047


def node_lost(exc: BaseException) -> bool:
    """The node under a statement died, stopped answering, dropped the connection or refused as not ready, or the
    connection fell out of step with it and was closed: the statement may be repeated on a fresh connection (on
    another node) if repeating it cannot do anything twice."""
    return (errors.is_connection_lost(exc) or errors.server_errno(exc) == NOT_READY_ERRNO
            or isinstance(exc, errors.ConnectionOutOfStep))


def node_state(conn: Connection) -> dict[str, str]:
    """wsrep_ready / wsrep_local_state and Uptime of the server, and whether it takes writes (read_only, and MySQL's
    super_read_only). A SHOW is answered even by a node that refuses every other statement. MySQL shows no wsrep
    status; MariaDB without a Galera provider only wsrep_ready."""
    with conn.cursor(pymysql.cursors.Cursor) as cur:
        cur.execute("SHOW GLOBAL STATUS WHERE Variable_name IN ('wsrep_ready', 'wsrep_local_state', 'Uptime')")
        state = {name.lower(): value for name, value in cur.fetchall()}
    return {**state, **write_settings(conn)}


def write_settings(conn: Connection) -> dict[str, str]:
    """The server's settings that decide whether it takes the engine's writes (``why_writes_refused``), in one
    statement."""
    with conn.cursor(pymysql.cursors.Cursor) as cur:
        cur.execute("SHOW GLOBAL VARIABLES WHERE Variable_name IN ('read_only', 'super_read_only', 'log_bin', "
                    "'binlog_format')")
        return {name.lower(): value for name, value in cur.fetchall()}


def logs_statements(state: dict[str, str]) -> bool:
    """Whether a server in ``state`` logs statements (binlog_format = STATEMENT with the binary log on): it refuses
    every write of a READ COMMITTED transaction, as the engine's decisions are, with 1665 (MIXED logs those as
    rows)."""
    return state.get("log_bin", "OFF").upper() in ("ON", "1") and state.get("binlog_format", "").upper() == "STATEMENT"


def why_writes_refused(state: dict[str, str]) -> str | None:
    """Why a server in ``state`` (``write_settings`` or ``node_state``) refuses the engine's writes, as what it is,
    or None."""
    if read_only(state):
        return "read-only"
    if logs_statements(state):
        return "logging statements (binlog_format = STATEMENT), which refuses the engine's writes"
    return None


def node_ready(conn: Connection, state: dict[str, str] | None = None) -> bool:
    """True on a server a connection may go to (``why_not_ready`` says nothing against it)."""
    return why_not_ready(node_state(conn) if state is None else state) is None


def read_only(state: dict[str, str]) -> bool:
    """Whether a server in ``state`` (``node_state``) is set read-only (a replica, or a primary fenced for a
    failover: every routine's write is refused, 1290). Any value but OFF: newer servers know more than ON."""
    return any(state.get(name, "OFF").upper() not in ("OFF", "0") for name in ("read_only", "super_read_only"))


def not_writable(conn: Connection) -> None:
    """``conn``'s server was found read-only: with several hosts its node is down for every connection of the
    process (as after a write refused with 1290), and a connect goes to another node."""
    origin = _origin_of(conn)
    if origin is not None:
        _seen_down(origin.address, probed=False)


def why_not_ready(state: dict[str, str]) -> str | None:
    """Why a server in ``state`` (``node_state``) is no node to connect to, or None when it is one: it is read-only
    (``read_only``), or a Galera node that is not ready (wsrep_ready OFF) or not Synced (local state other than 4).
    A server that is not a Galera node shows no wsrep_local_state."""
    if read_only(state):
        return "read-only"
    if "wsrep_local_state" in state and (state.get("wsrep_ready") != "ON" or state["wsrep_local_state"] != "4"):
        return (f"a Galera node not ready (wsrep_ready {state.get('wsrep_ready')}, "
                f"local state {state['wsrep_local_state']})")
    return None


_default_tls: list[ssl.SSLContext] = []
_default_tls_lock = threading.Lock()
_make_tls = pymysql.connections.Connection._create_ssl_ctx  # type: ignore[attr-defined]  # not in the stubs


def _shared_default_tls(conn: Connection, sslp: Any) -> ssl.SSLContext:
    """PyMySQL's TLS context for its default mode (TLS when the server offers it, no certificate check), made
    once per process instead of on every connect: building it loads the system's CA store, about 50 ms of CPU,
    more than everything else a connect costs. One context may serve many connections. Other TLS settings
    are built as before."""
    if sslp != {}:
        return _make_tls(conn, sslp)
    with _default_tls_lock:
        if not _default_tls:
            _default_tls.append(_make_tls(conn, sslp))
        return _default_tls[0]


# Set on the class, so that every PyMySQL connection of the process has it, subclasses included.
pymysql.connections.Connection._create_ssl_ctx = _shared_default_tls  # type: ignore[attr-defined]


# PyMySQL parses every column's descriptor packet of every result set in Python (six length-coded strings and a
# struct each), although a routine's result sets describe the same columns call after call: an instance read
# (five sets, 53 columns) spent 2.3-2.4 ms of its caller's CPU per call, against 1.4-1.7 ms with the parsed
# descriptors kept (alternating runs); the database spends less than that on it. A descriptor is a function of its
# packet's bytes and the connection's encoding, and is only read once parsed, so one parse per distinct packet
# serves every connection of the process; the table is bounded (a process that meets more distinct columns parses
# the rest each time).
_parse_field = pymysql.connections.FieldDescriptorPacket  # type: ignore[attr-defined]  # not in the stubs
_parsed_fields: dict[tuple[bytes, str], Any] = {}
PARSED_FIELDS_MAX = 4096


def _field_descriptor(data: bytes, encoding: str) -> Any:
    """PyMySQL's FieldDescriptorPacket for a descriptor packet, parsed once per distinct packet."""
    key = (data, encoding)
    field = _parsed_fields.get(key)
    if field is None:
        field = _parse_field(data, encoding)
        described = field.description()  # its PEP 249 tuple, built on every read otherwise
        field.description = lambda: described
        if len(_parsed_fields) < PARSED_FIELDS_MAX:
            _parsed_fields[key] = field
    return field


# The name PyMySQL's result reader builds each column's descriptor with.
pymysql.connections.FieldDescriptorPacket = _field_descriptor  # type: ignore[attr-defined]


def _connect_one(dsn: Dsn, host: str, port: int, database: bool, autocommit: bool,
                 check: Callable[[Connection], Any] | None = None) -> tuple[Connection, Any]:
    """Open one connection (and run ``check`` on it). The handshake and the check are bounded by
    connect_timeout, the work after them by read/write_timeout: a hung server accepts the TCP connection
    and then says nothing, and its greeting would otherwise be awaited for the whole read_timeout."""
    short = dsn.timeout("connect_timeout")
    conn = pymysql.connect(
        host=host, port=port, user=dsn.user, password=dsn.password,
        database=dsn.database if database else None, unix_socket=dsn.unix_socket,
        charset="utf8mb4", autocommit=autocommit, cursorclass=pymysql.cursors.DictCursor,
        connect_timeout=short, read_timeout=short, write_timeout=short, defer_connect=True,
        init_command=INIT_COMMAND, **_tls_arguments(dsn),
    )
    conn.connect()
    try:
        result = check(conn) if check else None
    except BaseException:
        conn.close()
        raise
    # PyMySQL applies these per read and write; they are only constructor arguments otherwise.
    conn._read_timeout, conn._write_timeout = dsn.timeout("read_timeout"), dsn.timeout("write_timeout")  # type: ignore[attr-defined]
    return conn, result


def migration_connection(dsn: Dsn) -> pymysql.connections.Connection:
    """A connection for the migration tool, to one host: the engine's session settings (INIT_COMMAND) and the DSN's
    TLS as every other connection has them, plain rows and no autocommit as the tool expects, and no read timeout
    (a migration's statement may rebuild a large table for minutes)."""
    conn: Any = _connect_one(dsn, dsn.host, dsn.port, database=True, autocommit=False)[0]
    conn.cursorclass = pymysql.cursors.Cursor  # the tool's rows are tuples
    conn._read_timeout = conn._write_timeout = None  # PyMySQL's, as _connect_one set them
    return conn


# A server at its connection limit (max_connections, or a user's max_connections / max_user_connections) refuses
# a new connection and serves every open one: it is full, not down.
FULL_ERRNOS = frozenset({1040, 1203, 1226})


def _open_ready(dsn: Dsn, address: Address, database: bool, autocommit: bool, failures: list[str],
                refusals: list[pymysql.err.MySQLError] | None = None,
                full_fails: bool = False) -> tuple[Connection, int] | None:
    """A connection to ``address`` and the node's uptime when it answers and is ready, else None (noted, and
    the node is down for the whole process). A node at its connection limit is not down: it is skipped, or with
    ``full_fails`` its refusal is raised (transient)."""
    host, port = address
    with _lock:
        node = _nodes.get(address)
        epoch = node.epoch if node else 0
    try:
        conn, state = _connect_one(dsn, host, port, database, autocommit, check=node_state)
    except pymysql.err.MySQLError as exc:
        failures.append(f"{host}:{port} {errors.errno_of(exc)}")
        if errors.errno_of(exc) in FULL_ERRNOS:  # not down: its open connections serve on
            if full_fails:
                raise errors.translate(exc) from exc
            return None
        _seen_down(address)
        if refusals is not None and not errors.is_transient(exc):
            refusals.append(exc)  # the node answered, and refused this user or database
        return None
    if node_ready(conn, state):
        uptime = int(state.get("uptime", 0))
        _seen_ready(address, uptime)
        with _lock:
            _origins[conn] = _Origin(dsn, address, epoch, "wsrep_local_state" in state)
        return conn, uptime
    failures.append(f"{host}:{port} not ready: {why_not_ready(state)}")
    conn.close()
    _seen_down(address)
    return None


def _no_ready_node(dsn: Dsn, failures: list[str], refusals: list[pymysql.err.MySQLError]) -> BaseException:
    """What a connect that found no ready node raises: the refusal every listed node answered alike (a wrong password
    or database name: the same on every node of a cluster, and an error as with one host), else a transient error
    naming what each node did (a node that did not answer, or answered otherwise, may be the one to serve)."""
    if len(refusals) == len(dsn.addresses) and len({errors.errno_of(exc) for exc in refusals}) == 1:
        return errors.translate(refusals[0])
    skipped = [f"{h}:{p} down" for h, p in dsn.addresses if not any(f.startswith(f"{h}:{p} ") for f in failures)]
    return errors.TransientDatabaseError("NO_READY_NODE: no ready node among " + ", ".join(failures + skipped))


def connect(dsn: Dsn | str, *, database: bool = True, autocommit: bool = True) -> Connection:
    """A connection for routine calls: autocommit on, so each routine owns its own transaction.

    With several hosts, only to a node that answers and is ready (``node_ready``), chosen by the DSN's
    ``failover`` mode:

    - ``stable`` (the default): the ready node that has been up longest, the listed order deciding between
      nodes of about the same age; this process's current node while it stays ready and no node it left is
      ready again and older. Every process sees the same uptimes, so all of them write to one node, move
      together when it fails, do not move back to a node that rejoins (it restarted: it is the youngest), and
      go back to one that was away without restarting (cut off, hung, a donor), as a process started then
      would choose it: one writer at a time, without a proxy.
    - ``sequential``: the first ready node in the listed order (a rejoined node takes new connections again).
    - ``loadbalance``: a random ready node (writes spread over every node).

    A node that failed is skipped by every thread of the process until a probe sees it ready again (see
    ``_candidates``). No ready host at all is transient (``TransientDatabaseError``), and answered at once
    while every node is down and waiting for its next probe: callers retry, and so find a node that rejoined.
    """
    if isinstance(dsn, str):
        dsn = Dsn.parse(dsn)
    if not dsn.clustered:
        try:
            return _connect_one(dsn, dsn.host, dsn.port, database, autocommit)[0]
        except pymysql.err.MySQLError as exc:
            raise errors.translate(exc) from exc
    failures: list[str] = []
    refusals: list[pymysql.err.MySQLError] = []
    order = _candidates(dsn)  # claims the probes of down nodes that are due: each is probed below
    if not _stable(dsn):
        for address in order:
            opened = _open_ready(dsn, address, database, autocommit, failures, refusals)
            if opened:
                return _caught_up(opened[0])
        raise _no_ready_node(dsn, failures, refusals)

    with _lock:
        current = _writers.get(dsn.addresses)
    # A node at its connection limit fails the connect (transient) rather than send this process to another node:
    # the current one is where every process writes, and in an election it may be the one every process chooses.
    if current in order:
        opened = _open_ready(dsn, current, database, autocommit, failures, refusals, full_fails=True)
        if opened:
            for address in order:  # down nodes whose probe was due: one may be older than the current one
                if address != current and address in _down:
                    _reconsider_soon(dsn, address)
            return _caught_up(opened[0])
    ready: list[tuple[int, int, Address, Connection]] = []
    for address in order:
        if address != current:
            try:
                opened = _open_ready(dsn, address, database, autocommit, failures, refusals, full_fails=True)
            except errors.TransientDatabaseError:
                for r in ready:
                    r[3].close()
                raise
            if opened:
                ready.append((opened[1], dsn.addresses.index(address), address, opened[0]))
    if not ready:
        raise _no_ready_node(dsn, failures, refusals)
    oldest = max(uptime for uptime, *_ in ready)
    chosen = min((r for r in ready if r[0] >= oldest - STABLE_TIE_SECONDS), key=lambda r: r[1])
    for r in ready:
        if r is not chosen:
            r[3].close()
    with _lock:
        _writers[dsn.addresses] = chosen[2]
    return _caught_up(chosen[3])


def _caught_up(conn: Connection) -> Connection:
    """``conn``, once its node has applied every transaction the cluster committed before (on a Galera node: a causal
    read, ``wsrep_sync_wait`` for that one statement). Each node applies a commit in its own time, and a process that
    moves to another node (its node failed, or it goes back to one that was away) must read there what it committed
    on the node it left: a worker's report, the attempt its claim created a moment before. The wait is bounded by
    read_timeout, like any statement; while the cluster stalls (a node dying, not yet evicted) it waits as writes do.
    A failure closes the connection and is the connect's, noted as a statement's failure on that node."""
    origin = _origin_of(conn)
    if origin is None or not origin.galera:
        return conn
    try:
        with conn.cursor() as cur:
            if "MariaDB" in conn.get_server_info():
                cur.execute("SET STATEMENT wsrep_sync_wait = 1 FOR SELECT 1")
            else:  # MySQL-based clusters (Percona XtraDB Cluster) have no SET STATEMENT: set it, read, set it back
                cur.execute("SET @weave_sync_wait = @@session.wsrep_sync_wait, SESSION wsrep_sync_wait = 1")
                cur.execute("SELECT 1")
                cur.execute("SET SESSION wsrep_sync_wait = @weave_sync_wait")
            cur.fetchall()
    except pymysql.err.MySQLError as exc:
        _node_failed(conn, exc)
        with contextlib.suppress(Exception):
            conn.close()
        raise errors.translate(exc) from exc
    return conn


def pinned(dsn: Dsn) -> Dsn:
    """The DSN of one ready host of ``dsn`` (itself when it has one host), for tools that take one host."""
    if not dsn.clustered:
        return dsn
    with connect(dsn, database=False) as conn:
        return dsn.single(conn.host, conn.port)


# A deadlock, or a Galera certification conflict (both 1213), rolled the routine's whole transaction back.
# When the routine owned that transaction, calling it again retries the whole decision at once,
# instead of reporting a conflict that the engine can resolve by itself. Inside a caller's transaction the
# caller's work is gone too, so the error goes back to the caller. The tries are spread over up to about 0.9 s
# (jittered, doubling, each wait at most CONFLICT_WAIT_MAX): on a cluster whose nodes all take writes, a burst
# of starts that each take a slot of one app conflicts for longer than four quick tries outlast (the HTTP API,
# which has no retry of its own around a call, answered a start 503 that way), and an answer still comes well
# within the API's 2 s. ROOM_TAKEN is the same for a decision that creates a task: another creator took the last slot
# of its app or queue between its room check and its guarded update, and its whole decision was undone; the next
# try finds no room and defers. Answered as it was, a start racing for a queue's last slot was a 503 saying
# the database was unavailable.
CONFLICT_ERRNOS = frozenset({1213, errors.TRANSIENT_CODES["ROOM_TAKEN"]})
CONFLICT_RETRIES = 8
CONFLICT_WAIT_MAX = 0.2


# What the driver raises when a reply does not parse: the connection is out of step with the server (a packet of
# an earlier reply still unread), and every later statement on it would read another statement's answer.
UNPARSED = (struct.error, IndexError, UnicodeDecodeError)


def _out_of_step(conn: Connection, exc: BaseException | str, conflicts: int) -> errors.ConnectionOutOfStep:
    """Close a connection whose replies no longer line up with its statements; what to raise instead: a lost
    connection's failure, which every caller already retries on a fresh one (R-12). ``conflicts``: the conflicts
    the call had met on this connection before (0: its first reply)."""
    with contextlib.suppress(Exception):
        conn.close()
    return errors.ConnectionOutOfStep(f"PROTOCOL: the connection's replies were out of step after {conflicts} "
                                      f"conflict(s), closed: {exc}")


# Past this many bytes of arguments, a call is measured against the server's packet limit before it is sent.
LARGE_CALL = 1024 * 1024


def _fits(conn: Connection, routine: str, args: tuple) -> None:
    """A call larger than the server takes in one packet (``max_allowed_packet``, 16 MiB by default) is refused
    here, saying so: sent, the server drops the connection as it arrives, which reads as the database gone away
    (2006), and a retry meets the same."""
    if sum(len(a) for a in args if isinstance(a, (str, bytes, bytearray))) < LARGE_CALL:
        return
    with conn.cursor() as cur:
        statement = cur.mogrify(f"CALL {routine}({', '.join(['%s'] * len(args))})", args)
        limit = getattr(conn, "_weave_packet_limit", None)
        if limit is None:
            try:
                cur.execute("SELECT @@max_allowed_packet AS m")
                limit = int(cur.fetchall()[0]["m"])
            except pymysql.err.MySQLError as exc:  # as any call's failure: a lost connection is transient
                _node_failed(conn, exc)
                raise errors.translate(exc) from exc
            conn._weave_packet_limit = limit  # type: ignore[attr-defined]  # the server's, for this connection's life
    size = len(statement.encode(conn.encoding, "surrogateescape"))
    if size + 1 > limit:
        raise errors.ValidationFailed(
            f"PAYLOAD_TOO_LARGE: {routine} would be sent as {size} bytes; the database server takes at most {limit} "
            "in one statement (its max_allowed_packet)", field_code="PAYLOAD_TOO_LARGE")


def call(conn: Connection, routine: str, *args: Any) -> list[list[dict]]:
    """CALL a routine and return every result set it produced.

    All sets are drained: a routine that fails after its first result set raises only while the
    remaining sets are read, and an undrained cursor would raise on the next statement instead.
    A conflict is tried again on the same connection only when nothing of the failed reply is left to read.
    """
    _fits(conn, routine, args)
    for attempt in range(CONFLICT_RETRIES + 1):
        owned = conn.get_autocommit() and not conn.server_status & SERVER_STATUS.SERVER_STATUS_IN_TRANS  # type: ignore[attr-defined]  # not in the stubs
        try:
            return _call_once(conn, routine, args)
        except pymysql.err.MySQLError as exc:
            if isinstance(exc, pymysql.err.InternalError) and "Packet sequence number wrong" in str(exc):
                raise _out_of_step(conn, exc, attempt) from exc
            if not (owned and attempt < CONFLICT_RETRIES and errors.errno_of(exc) in CONFLICT_ERRNOS):
                if owned and errors.errno_of(exc) in INTERRUPTED:
                    _roll_back_left_open(conn)
                if owned and errors.errno_of(exc) == IN_TRANSACTION_ERRNO:
                    # Refused as inside a transaction this connection did not have open: a KILL QUERY landed in the
                    # routine's own check of the session (seen on MariaDB 10.11). Nothing was done; it is the
                    # interrupt it is.
                    _roll_back_left_open(conn)
                    log.warning("a routine refused as inside a transaction this connection had not opened: taken "
                                "for an interrupt", extra={"fields": {"routine": routine}})
                    raise errors.TransientDatabaseError(
                        "1317: interrupted: the routine's check found a transaction this connection had not "
                        "opened; nothing was done") from exc
                _node_failed(conn, exc)
                raise errors.translate(exc) from exc
        except UNPARSED as exc:
            raise _out_of_step(conn, exc, attempt) from exc
        time.sleep(min(CONFLICT_WAIT_MAX, random.uniform(0.001, 0.01) * 2 ** attempt))
        if _reply_left(conn):  # the conflict's reply left something unread: not this connection again
            raise _out_of_step(conn, "a conflict's reply left packets unread", attempt + 1)
    raise AssertionError("unreachable")


def _roll_back_left_open(conn: Connection) -> None:
    """After an interrupt of a call made in autocommit mode with nothing open: a transaction open now is the
    interrupted routine's own, half done, and nothing of the caller's. It is rolled back (a no-op when none is open),
    never left for the next statement to commit. A session with autocommit off keeps what it has: its caller ends
    it. A second interrupt can land on the rollback itself (a kill sent while the first was answered): it is tried
    again, and a connection that cannot roll back is closed, which the server rolls back."""
    for _ in range(3):
        try:
            conn.rollback()
            return
        except pymysql.err.MySQLError:
            continue
    with contextlib.suppress(Exception):
        conn.close()


def _call_once(conn: Connection, routine: str, args: tuple) -> list[list[dict]]:
    placeholders = ", ".join(["%s"] * len(args))
    with conn.cursor() as cur:
        cur.execute(f"CALL {routine}({placeholders})", args)
        sets: list[list[dict]] = []
        while True:
            if cur.description is not None:
                sets.append(list(cur.fetchall()))
            if not cur.nextset():
                break
        return sets


def call_one(conn: Connection, routine: str, *args: Any) -> dict | None:
    """CALL a routine that answers with (at most) one row in its first result set."""
    sets = call(conn, routine, *args)
    return sets[0][0] if sets and sets[0] else None


def call_row(conn: Connection, routine: str, *args: Any) -> dict:
    """CALL a routine that always answers one row (it raises otherwise): that row."""
    row = call_one(conn, routine, *args)
    if row is None:
        raise errors.WeaveError(f"INTERNAL: {routine} answered no row")
    return row
