"""HTTP plumbing shared by every resource: bodies read with a hard cap, bearer tokens, idempotency
headers, and one error handler that turns the engine's error vocabulary into problem+json."""

from __future__ import annotations

import contextlib
import io
import json
import logging
import math
import threading
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import falcon
import pymysql

from procedures import db, errors, settings
from procedures.connections import Connections
from procedures.jsontext import DocumentError, InvalidJson, parse_members

log = logging.getLogger("weave.api")

__all__ = ["ApiConnections", "ApiError", "Connections", "NoStore", "PathWidths", "QueryNames", "bearer", "failing_over",
           "idempotency_key", "invalid", "json_body", "json_members", "json_object", "make_error_handler",
           "optional_idempotency_key", "parse_strict", "problem", "problem_text", "raw_body", "respond"]

MAX_BODY = 300 * 1024
PROBLEM = "application/problem+json"
REPLAYED = "Idempotent-Replayed"


class ApiError(errors.WeaveError):
    """An HTTP-level refusal that never reached the database (413, 415, 401 without a token, ...)."""

    def __init__(self, status: int, code: str, detail: str, errors_: list[dict] | None = None):
        super().__init__(f"{code}: {detail}", detail=detail)
        self.http_status, self.code, self.errors = status, code, errors_ or []


def _waits_bounded(conn: db.Connection) -> db.Connection:
    """A request's connection whose statements wait for a lock about as long as the request waits for their answer
    (its read timeout, at least the server's one second): a request that gave up on its answer left its statement
    waiting on the server for the server's own lock wait (50 s by default, a year for a table's metadata lock), and
    the retries of a held row's requests piled up sessions until the server refused connections (1040) to every
    node and daemon."""
    seconds = max(1, math.ceil(conn._read_timeout or 1))  # type: ignore[attr-defined]  # PyMySQL's, as db set it
    try:
        with conn.cursor() as cur:
            cur.execute(f"SET SESSION innodb_lock_wait_timeout = {seconds}, lock_wait_timeout = {seconds}")
    except pymysql.err.MySQLError as exc:
        conn.close()
        raise errors.translate(exc) from exc
    return conn


class ApiConnections(Connections):
    """The API's connections: connect, read and write time out after ``timeout`` seconds, and once the
    database is seen away, every request answers 503 at once for ``cooldown`` seconds instead of each
    waiting out its own timeout. A hung server accepts connections and answers nothing: without both, every
    serving thread would hang on it and the API with them.

    A request that lost its connection or timed out is not enough to call the database away: a busy server
    answers one statement late and is still there. So the pause starts only when a probe, a new connection
    with ``probe_timeout`` seconds to greet and answer, fails too. The probe runs on a thread of its own (one at a
    time), so the failed request answers 503 without waiting for it; requests that reach for a connection
    meanwhile wait for its verdict instead of sending a statement to a server that may be hung. With several
    hosts there is no pause: the node that failed is skipped by every thread (``db.connect``) and the others
    serve.

    A request that gave up on its statement's answer (``abandon``) leaves that statement running in its session on
    the server, beside the connection that replaces it: under load the server's sessions grew past the API's
    threads, up to max_connections, and then every connection was refused. The thread's next connection ends that
    session first (``KILL``, allowed on a session of one's own user): its statement is rolled back, or had
    committed, as the 503 said it might."""

    def __init__(self, dsn: db.Dsn | None, timeout: float | None = None, cooldown: float = 1.0,
                 probe_timeout: float = 0.3):
        seconds = settings.api_db_timeout() if timeout is None else timeout
        short = None if dsn is None else dsn.with_options(**{
            name: seconds for name in ("connect_timeout", "read_timeout", "write_timeout") if name not in dsn.options})
        super().__init__(short, open=lambda: _waits_bounded(db.connect(self._dsn())))
        self.cooldown = cooldown
        self._probe_dsn = None if dsn is None else dsn.with_options(
            connect_timeout=probe_timeout, read_timeout=probe_timeout, write_timeout=probe_timeout)
        self._down_until = 0.0
        self._probing = threading.Lock()
        self._verdict = threading.Event()  # set while no probe runs
        self._verdict.set()
        self._verdict_wait = probe_timeout * 2

    def get(self) -> db.Connection:
        self._verdict.wait(self._verdict_wait)
        if time.monotonic() < self._down_until:
            raise errors.TransientDatabaseError("UNAVAILABLE: the database did not answer a moment ago")
        conn = super().get()
        left = getattr(self._local, "abandoned", None)
        if left is not None:
            self._local.abandoned = None
            self._end(conn, *left)
        return conn

    def abandon(self) -> None:
        """This thread's request gave up on its statement's answer: its connection is dropped, and its session on the
        server, still running that statement, is ended by the thread's next connection (``get``)."""
        conn = getattr(self._local, "conn", None)
        if conn is not None and conn.thread_id():
            self._local.abandoned = (conn.host, conn.port, conn.thread_id(), time.monotonic())
        self.discard()

    @staticmethod
    def _end(conn: db.Connection, host: str, port: int, session: int, since: float) -> None:
        """End ``session`` through ``conn``, when both are of one server and the session still runs a statement at
        least as old as the request that gave up on it: a session id names another session on another node, or
        after the server restarted."""
        if (conn.host, conn.port) != (host, port):
            return
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT ID FROM information_schema.PROCESSLIST WHERE ID = %s AND COMMAND = 'Query' "
                            "AND TIME_MS >= %s", (session, (time.monotonic() - since) * 1000))
                if cur.fetchall():
                    cur.execute(f"KILL CONNECTION {int(session)}")
        except pymysql.err.MySQLError as exc:  # 1094: it ended by itself meanwhile
            if errors.errno_of(exc) != 1094:
                log.warning("an abandoned session could not be ended", extra={"fields": {
                    "session": session, "error": str(exc)}})

    def trip(self) -> None:
        """A request lost its connection or its answer: probe the server, and pause if the probe fails too."""
        if self._probe_dsn is None or self._probe_dsn.clustered:
            return  # one node failed, not the database: procedures.db skips that node for every thread
        if self._probing.acquire(blocking=False):
            self._verdict.clear()
            threading.Thread(target=self._probe, name="weave-api-probe", daemon=True).start()

    def probe(self) -> bool:
        """Whether the server greets a new connection and answers it within the probe timeout."""
        assert self._probe_dsn is not None
        try:
            conn = db.connect(self._probe_dsn)
        except Exception:  # noqa: BLE001 - any failure to connect and answer means away
            return False
        try:
            conn.ping(reconnect=False)
            return True
        except Exception:  # noqa: BLE001
            return False
        finally:
            with contextlib.suppress(Exception):
                conn.close()

    def _probe(self) -> None:
        try:
            if not self.probe():
                self._down_until = time.monotonic() + self.cooldown
        finally:
            self._verdict.set()
            self._probing.release()


# The longest token a credential can have (the routines authenticate no longer one). A longer one is answered here:
# the database would refuse it as it binds the call, a 422 naming the routine's parameter instead of a 401.
TOKEN_MAX = 256


def bearer(req: falcon.Request) -> str:
    header = req.get_header("Authorization") or ""
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise ApiError(401, "UNAUTHENTICATED", "an Authorization: Bearer <token> header is required")
    if len(token.strip()) > TOKEN_MAX:
        raise ApiError(401, "UNAUTHENTICATED", "unknown or disabled credential")
    return token.strip()


# The widest value the routines take for each path parameter (their parameters' widths). A longer one names nothing,
# yet the database would refuse it as it binds the call, before the routine authenticates: the answer would be a 422
# naming the routine's parameter, where a bad token is a 401 and a missing object (or another namespace) a 404.
PATH_WIDTHS = {"ns": 200, "workflow_id": 64, "signal_id": 64, "credential_id": 64, "step_key": 64, "name": 200}


class PathWidths:
    """Middleware: a path parameter longer than its routines take is passed on as '' (which names nothing either),
    so that the routine authenticates first and then answers as it does for any object it does not find."""

    def process_resource(self, req: falcon.Request, resp: falcon.Response, resource: object, params: dict) -> None:
        for name, width in PATH_WIDTHS.items():
            if isinstance(params.get(name), str) and len(params[name]) > width:
                params[name] = ""


class QueryNames:
    """Middleware: a query parameter that an API request does not take is refused (422 UNKNOWN_FIELD), as an unknown
    body field is: ``GET /workflows/wf_1?limit=10`` would answer the whole instance, as if the limit had been taken.
    A resource whose reads take some names the methods in ``queried``, and its responder checks them
    (``schemas.query``)."""

    def process_resource(self, req: falcon.Request, resp: falcon.Response, resource: object, params: dict) -> None:
        if not req.params or resource is None or not req.path.startswith("/v1/"):
            return
        if req.method in getattr(resource, "queried", ()):
            return
        raise invalid([(name, "UNKNOWN_FIELD", f"{name} is not a query parameter of this request; it takes none")
                       for name in sorted(req.params)])


IDEMPOTENCY_KEY_MAX = 128


def idempotency_key(req: falcon.Request) -> str:
    """The Idempotency-Key header of an endpoint that requires one (its rules are the routine's)."""
    key = optional_idempotency_key(req)
    if key is None:
        raise ApiError(422, "VALIDATION_FAILED", "this request needs an Idempotency-Key header",
                       [{"field": "Idempotency-Key", "code": "IDEMPOTENCY_KEY_INVALID",
                         "message": "missing Idempotency-Key header"}])
    return key


def optional_idempotency_key(req: falcon.Request) -> str | None:
    """The Idempotency-Key header when the request has one (its rules are the routine's)."""
    key = req.get_header("Idempotency-Key")
    if key is None:
        return None
    if len(key) > IDEMPOTENCY_KEY_MAX:  # the routine's own rule, answered here: the database would refuse a longer
        # one as it binds the call, naming the routine's parameter, before the token is checked
        raise ApiError(422, "VALIDATION_FAILED", "the Idempotency-Key header is not valid",
                       [{"field": "Idempotency-Key", "code": "IDEMPOTENCY_KEY_INVALID",
                         "message": f"1-{IDEMPOTENCY_KEY_MAX} printable ASCII characters, no space"}])
    req.context.keyed = True  # the routine replays a repeat of this key: see failing_over
    return key


def failing_over(resource: object, connections: Connections) -> object:
    """With several database hosts, each responder of ``resource`` runs once more, on a ready node, when the
    node under it was lost and the request is safe to repeat: a GET or HEAD, or a request whose routine took
    its Idempotency-Key (a repeat replays a first run whose answer was lost). The body is kept for the repeat."""
    if connections.dsn is None or not connections.dsn.clustered:
        return resource
    for name in [n for n in dir(resource) if n.startswith("on_")]:
        setattr(resource, name, _failing_over(getattr(resource, name), connections))
    return resource


def _failing_over(responder: Callable[..., None], connections: Connections) -> Callable[..., None]:
    def respond_(req: falcon.Request, resp: falcon.Response, **params: Any) -> None:
        reads = req.method in ("GET", "HEAD")
        if req.content_length is None:
            kept = b"" if reads else None  # a chunked body cannot be read twice
        else:
            kept = req.stream.read(req.content_length) if req.content_length <= MAX_BODY else None

        def once() -> None:
            if kept is not None:
                req.stream = io.BytesIO(kept)
            responder(req, resp, **params)

        connections.elsewhere_once(once, lambda: kept is not None and (reads or getattr(req.context, "keyed", False)))

    return respond_


class RequestTimeout(TimeoutError):
    """A request's line, headers and body had not all arrived when the time the API gives a whole request ran out
    (WEAVE_API_REQUEST_READ_TIMEOUT_S, see api.server.ClientTimedConnection)."""


def raw_body(req: falcon.Request) -> bytes:
    """The request body, refused with 413 past the cap before any parsing (also for chunked bodies)."""
    if req.content_length is not None and req.content_length > MAX_BODY:
        raise ApiError(413, "PAYLOAD_TOO_LARGE", f"request bodies are limited to {MAX_BODY} bytes")
    try:
        body = req.stream.read(MAX_BODY + 1) if req.content_length is None else req.stream.read(req.content_length)
    except RequestTimeout:  # the client kept sending, too slowly (see api.server.ClientTimedConnection)
        raise ApiError(400, "BAD_REQUEST", "the request body had not arrived whole when the time for a request "
                                           "ran out") from None
    except TimeoutError:  # the client stopped sending its body (see api.server.ClientTimedConnection)
        raise ApiError(400, "BAD_REQUEST", "the request body stopped arriving before its end") from None
    if len(body) > MAX_BODY:
        raise ApiError(413, "PAYLOAD_TOO_LARGE", f"request bodies are limited to {MAX_BODY} bytes")
    return body


def invalid(errors_: list[tuple[str, str, str]], detail: str = "the request is not valid") -> ApiError:
    """A 422 listing every (field, code, message) found, not only the first."""
    return ApiError(422, "VALIDATION_FAILED", detail,
                    [{"field": field or "body", "code": code, "message": message} for field, code, message in errors_])


def _require_json(req: falcon.Request) -> bytes:
    media, params = falcon.parse_header(req.content_type or "")
    if media.lower() != "application/json":
        raise ApiError(415, "UNSUPPORTED_MEDIA_TYPE", "send the body as application/json")
    # JSON is UTF-8 (RFC 8259): a body declared in another charset would be read as other characters than meant.
    if params.get("charset", "utf-8").lower() not in ("utf-8", "utf8"):
        raise ApiError(415, "UNSUPPORTED_MEDIA_TYPE",
                       f"send the body as UTF-8 JSON, not {params['charset'][:40]!r}: application/json is UTF-8")
    return raw_body(req)


def json_members(req: falcon.Request) -> tuple[Any, dict[str, bytes] | None]:
    """The body parsed once by the strict parser: its value and, for an object, the exact bytes of each
    top-level member's value. Invalid JSON, duplicate keys and text that is not text are a 422."""
    try:
        return parse_members(_require_json(req))
    except InvalidJson as exc:
        raise invalid(list(exc.errors), listed_detail("the body is not valid JSON", exc)) from exc


def parse_strict(body: bytes) -> Any:
    """A body's value by the strict parser; invalid JSON, duplicate keys and text that is not text are a 422."""
    try:
        return parse_members(body)[0]
    except InvalidJson as exc:
        raise invalid(list(exc.errors), listed_detail("the body is not valid JSON", exc)) from exc


def listed_detail(detail: str, exc: DocumentError) -> str:
    """The detail of a document refused for the problems it lists, saying so when not every problem is listed."""
    if not exc.unlisted:
        return detail
    listed = len(exc.errors)
    return (f"{detail}: {listed + exc.unlisted:,} problems, of which only the first "
            f"{'one is' if listed == 1 else f'{listed} are'} listed")


def json_body(req: falcon.Request) -> Any:
    return json_members(req)[0]


def json_object(req: falcon.Request) -> dict:
    return json_object_members(req)[0]


def json_object_members(req: falcon.Request) -> tuple[dict, dict[str, bytes]]:
    """The body as an object, and the exact bytes of each of its members' values (JSON a request carries is passed
    on as it was sent, never parsed and written again: numbers keep every digit)."""
    body, spans = json_members(req)
    if not isinstance(body, dict) or spans is None:
        raise invalid([("body", "INVALID_TYPE", "expected an object")], "the body must be a JSON object")
    return body, spans


def path(ns: str, *parts: str) -> str:
    """The API path of a resource of namespace ``ns`` (each part escaped), as a Location header names it."""
    return "/v1/namespaces/" + "/".join(quote(p, safe="") for p in (ns, *parts))


def respond(resp: falcon.Response, payload: Any, status: int = 200, replayed: bool = False) -> None:
    respond_text(resp, json.dumps(payload, default=str), status, replayed)


def respond_text(resp: falcon.Response, text: str, status: int = 200, replayed: bool = False) -> None:
    """An answer whose JSON text is already written (``jsontext.object_text`` keeps a payload's bytes)."""
    resp.status = status
    resp.content_type = falcon.MEDIA_JSON
    resp.text = text
    if replayed:
        resp.set_header(REPLAYED, "true")


_TITLES = {400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed",
           409: "Conflict", 413: "Content Too Large", 414: "URI Too Long", 415: "Unsupported Media Type",
           422: "Unprocessable Content", 431: "Request Header Fields Too Large", 500: "Internal Server Error",
           503: "Service Unavailable"}


def problem_text(status: int, code: str, detail: str, errors_: list[dict] | None = None) -> str:
    """The RFC 9457 body of every error answer."""
    return json.dumps({"type": f"https://weave.dev/problems/{code.lower().replace('_', '-')}",
                       "title": _TITLES.get(status, "Error"), "status": status, "code": code, "detail": detail,
                       "errors": errors_ or []})


def problem(resp: falcon.Response, status: int, code: str, detail: str, errors_: list[dict] | None = None) -> None:
    resp.status = status
    resp.content_type = PROBLEM
    resp.text = problem_text(status, code, detail, errors_)


Handler = Callable[[falcon.Request, falcon.Response, BaseException, dict], None]


class UnavailableLog:
    """Why requests answered 503: the database error behind each, logged as a warning at most once a second with
    the number answered since the line before, so that an operator can tell a node that died from a conflict the
    retries did not outlast without the log flooding while the database is away."""

    clock = staticmethod(time.monotonic)

    def __init__(self, interval: float = 1.0):
        self.interval = interval
        self._lock = threading.Lock()
        self._last = float("-inf")
        self._unlogged = 0

    def answered(self, path: str, exc: BaseException) -> None:
        now = self.clock()
        with self._lock:
            self._unlogged += 1
            if now - self._last < self.interval:
                return
            self._last, count, self._unlogged = now, self._unlogged, 0
        log.warning(f"answered 503: {unavailable_cause(exc)}", extra={"fields": {
            "path": path, "error": f"{type(exc).__name__}: {exc}"[:500], "answered_503": count}})


# Why a request answered 503, by the kind of the database error behind it: (a few words for the log line, the
# answer's detail). A row held, an answer late or a statement interrupted is the database at work, not away.
_UNAVAILABLE = {
    "held": ("a row it needs was held past the lock wait",
             "a row this request needs (its instance, most likely) is held by another transaction, and the wait "
             "ran out; nothing was done: retry shortly, with the same Idempotency-Key"),
    "late": ("the database did not answer in time (busy, a row held, or away)",
             "the database did not answer in time: it is busy (a row this request needs may be held by another "
             "transaction) or away, and the request may still complete; retry with the same Idempotency-Key, "
             "which never acts twice"),
    "interrupted": ("its statement was interrupted", "the database is unavailable; retry shortly"),
    "privilege": ("the database refused a privilege",
                  "the database refused this node's user a privilege it needs (EXECUTE on the engine's routines, or "
                  "SELECT on its tables): nothing was done; an operator must grant it back (docs/operations.md)"),
    "away": ("the database is unavailable", "the database is unavailable; retry shortly"),
}


def _unavailable_kind(exc: BaseException) -> str:
    number = getattr(exc, "errno", 0) or errors.errno_of(exc)
    if number == 1205:
        return "held"
    if number == 2013 and "timed out" in str(exc):  # the query was sent and its answer did not come in time
        return "late"
    interrupts = errors.INTERRUPTED_ERRNOS | {1927}  # and a killed connection
    if number in interrupts or errors.errno_of(exc.__cause__ or exc) in interrupts:
        return "interrupted"
    if number in errors.PRIVILEGE_REFUSED_ERRNOS:
        return "privilege"
    return "away"


def unavailable_cause(exc: BaseException) -> str:
    """Why a request answered 503, in a few words for the log."""
    return _UNAVAILABLE[_unavailable_kind(exc)][0]


def unavailable_detail(exc: BaseException) -> str:
    """What a 503 says: a lock wait is not an outage, and a request whose answer timed out may still complete."""
    return _UNAVAILABLE[_unavailable_kind(exc)][1]


def make_error_handler(connections: Connections) -> Handler:
    unavailable = UnavailableLog()

    def handle(req: falcon.Request, resp: falcon.Response, exc: BaseException, params: dict) -> None:
        if isinstance(exc, falcon.HTTPError):
            status = int(str(exc.status).split()[0]) if not isinstance(exc.status, int) else exc.status
            codes = {404: "NOT_FOUND", 405: "METHOD_NOT_ALLOWED", 413: "PAYLOAD_TOO_LARGE",
                     415: "UNSUPPORTED_MEDIA_TYPE", 400: "BAD_REQUEST"}
            code = codes.get(status, "VALIDATION_FAILED" if status == 422 else "BAD_REQUEST")
            resp.set_headers(exc.headers or {})  # e.g. Allow on a 405
            problem(resp, status, code, exc.description or exc.title or code)
            return
        if isinstance(exc, pymysql.err.MySQLError):
            exc = errors.translate(exc)
        if errors.is_unavailable(exc):
            if isinstance(connections, ApiConnections) and errors.is_connection_lost(exc):
                connections.trip()
                if _unavailable_kind(exc) == "late":
                    connections.abandon()  # its statement may still run on the server: the next request ends it
            connections.discard()
            unavailable.answered(req.path, exc)
            resp.set_header("Retry-After", "1")
            problem(resp, 503, "UNAVAILABLE", unavailable_detail(exc))
            return
        if isinstance(exc, errors.SchemaMismatch):
            connections.discard()  # one that named a database dropped since is of no use to the next request
            unavailable.answered(req.path, exc)
            resp.set_header("Retry-After", "5")
            problem(resp, 503, "UNAVAILABLE", str(exc.detail))
            return
        if isinstance(exc, errors.ValidationFailed):
            problem(resp, 422, "VALIDATION_FAILED", exc.detail, exc.errors)
            return
        if isinstance(exc, errors.WeaveError) and exc.http_status < 500:
            if exc.http_status == 401:
                resp.set_header("WWW-Authenticate", 'Bearer realm="weave"')
            problem(resp, exc.http_status, exc.code, exc.detail, getattr(exc, "errors", None))
            return
        log.exception("unhandled error", extra={"fields": {"path": req.path}})
        connections.discard()
        problem(resp, 500, "INTERNAL", "an internal error occurred; it has been logged")

    return handle


class NoStore:
    """Middleware: no answer is ever cached. Several carry a token (credentials, bootstrap), and every other
    one is the engine's state at one moment. And a path with an escaped slash names nothing: the server decodes
    the path before routing, so ``workflows/wf_1%2Fsignals`` (an id that holds a '/', which no id does) would be
    routed as ``workflows/wf_1/signals``, another resource than the one a client escaped its id to name."""

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        raw = req.env.get("RAW_URI") or req.env.get("REQUEST_URI") or ""
        if "%2f" in raw.partition("?")[0].lower():
            from api.console.pages import CONSOLE_PATH, secure_headers

            if CONSOLE_PATH.match(req.path):  # refused before the console sees it: a page's headers all the same
                secure_headers(resp)
            raise falcon.HTTPNotFound(description="no resource has an escaped '/' in its path")

    def process_response(self, req: falcon.Request, resp: falcon.Response, resource: object,
                         req_succeeded: bool) -> None:
        resp.set_header("Cache-Control", "no-store")
