"""The built-in ``http`` handler, version ``1`` (K-8): the common "ask a REST endpoint" case.

Frozen input::

    {"method": "GET", "url": "https://psp.example/v1/payments/42",
     "headers": {"Authorization": "..."}, "body": <any JSON, optional>, "timeout_ms": 10000}

Only hosts on the allowlist in ``WEAVE_HTTP_ALLOWLIST`` (comma list of ``host`` or ``host:port``;
required) are called, redirects included: anything else is a non-retryable failure, so a definition
cannot turn workers into a proxy to arbitrary hosts. The input's headers go to the origin its URL names
(and to redirects on that origin), never to another scheme, host or port a redirect points to. The
JSON response body is the result. 5xx, 429, timeouts, connection errors and broken responses are
retryable, with one exception: a POST or PATCH without an ``Idempotency-Key`` header is never sent twice
once it may have taken effect. A failure after its request was sent (no answer in time, the connection
lost, a response cut short, a 5xx other than 503) is final, ``HTTP_EFFECT_UNKNOWN``, and its step goes to
review: a charge that timed out may have been made, and only a person (or the provider's deduplication,
which the key asks for) can say. A connection never made, a 429 and a 503 say the request was not
processed, and are retried. Other 4xx, a non-JSON body, refused hosts and input that is not a request (a method outside
GET HEAD POST PUT PATCH DELETE OPTIONS, a header that HTTP cannot carry, a Host, Content-Length or
Transfer-Encoding header, which the URL and the body say, a timeout_ms outside 1..3600000) are not.
``timeout_ms`` bounds the whole exchange, redirects included: the connection, the request, the status line, the
headers and the body. A server that answers a byte at a time is cut off once the time is up, headers or body.
Connections go direct (proxy variables are ignored), so the allowlist names the hosts actually reached.
"""

from __future__ import annotations

import json
import math
import re
import socket
import threading
import time
import urllib.error
import urllib.request
from http import client as http_client
from typing import Any
from urllib.parse import urlsplit

from procedures import settings

from .handlers import Retryable, handler

ALLOWLIST_ENV = settings.ALLOWLIST_ENV
MAX_RESPONSE_BYTES = 1024 * 1024
DEFAULT_TIMEOUT_MS = 10_000
MAX_TIMEOUT_MS = 3_600_000
METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
IDEMPOTENT = ("GET", "HEAD", "PUT", "DELETE", "OPTIONS")  # RFC 9110 9.2.2: a repeat changes nothing more
NOT_PROCESSED = (429, 503)  # answers that say the request was not acted on: try again later
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # a token (RFC 9110)
_HEADER_VALUE = re.compile(r"[\t\x20-\x7e\x80-\xff]*")  # what HTTP/1.1 carries: no CR, LF or NUL


class HttpRefused(Exception):
    """A request the handler will not make (bad input, host not allowed): non-retryable."""


class _TooSlow(Exception):
    """The response did not come whole within timeout_ms."""


class _Deadline:
    """timeout_ms over the whole exchange. A socket's timeout bounds one wait on it only, and ``_read`` could check a
    clock only once urllib had returned the status line and headers: a server sending its headers a byte at a time
    held the handler as long as it liked. Each connection (a redirect opens another) is given what is left of the
    time to connect and, for https, to shake hands in; once it is up, a timer shuts every socket of the exchange
    down at the deadline, which ends whatever read or write waits on it. ``stop`` says whether it fired."""

    def __init__(self, seconds: float):
        self._at = time.monotonic() + seconds
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._done = False
        self._fired = False
        self._timer = threading.Timer(seconds, self._fire)
        self._timer.daemon = True
        self._timer.start()

    def left(self) -> float:
        """The time left, for a connect or a TLS handshake (which a shutdown cannot reach); none left is a timeout."""
        left = self._at - time.monotonic()
        if left <= 0:
            raise TimeoutError("timeout_ms passed before the connection was made")
        return left

    def watch(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.append(sock)
            if self._fired:
                _shut(sock)

    def _fire(self) -> None:
        with self._lock:
            if self._done:
                return
            self._fired = True
            for sock in self._sockets:
                _shut(sock)

    def stop(self) -> bool:
        """Ends the watch (no socket is shut after it); whether the timer fired, cutting the exchange."""
        self._timer.cancel()
        with self._lock:
            self._done = True
            return self._fired

    def passed(self) -> bool:
        """Whether the deadline has passed. A socket's own timeout (timeout_ms for each read) can end a read that began
        late at the deadline a moment before the timer's thread gets to run, on a busy machine."""
        return self._fired or time.monotonic() >= self._at


def _shut(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)  # wakes a read or a write waiting on it, in any thread (a close does not)
    except OSError:  # closed already, or handed to the TLS socket over it (which is watched itself)
        pass


class _Timed(http_client.HTTPConnection):
    """A connection made within what is left of the exchange's time, its sockets watched by the deadline."""

    deadline: _Deadline

    def connect(self) -> None:
        self.timeout = self.deadline.left()
        self._create_connection = self._open
        super().connect()
        self.deadline.watch(self.sock)  # for https, the TLS socket over the one ``_open`` made

    def _open(self, address: tuple[str, int], timeout: float, source: Any = None) -> socket.socket:
        sock = socket.create_connection(address, timeout, source)
        try:
            self.deadline.watch(sock)
            sock.settimeout(self.deadline.left())  # what the TLS handshake, if any, may take
        except BaseException:
            sock.close()
            raise
        return sock


class _TimedHttps(_Timed, http_client.HTTPSConnection):
    pass


class _TimedHttp(urllib.request.HTTPHandler):
    def __init__(self, deadline: _Deadline):
        super().__init__()
        self.deadline = deadline

    def http_open(self, req: urllib.request.Request) -> Any:
        return self.do_open(_connection(_Timed, self.deadline), req)


class _TimedHttpsHandler(urllib.request.HTTPSHandler):
    def __init__(self, deadline: _Deadline):
        super().__init__()
        self.deadline = deadline

    def https_open(self, req: urllib.request.Request) -> Any:
        return self.do_open(_connection(_TimedHttps, self.deadline), req)


def _connection(cls: type[_Timed], deadline: _Deadline) -> Any:
    def make(host: str, **kw: Any) -> _Timed:
        conn = cls(host, **kw)
        conn.deadline = deadline
        return conn
    return make


def allowlist() -> set[str]:
    return settings.http_allowlist()


def _shown(url: str) -> str:
    """``url`` as an error may carry it, where it is stored, shown and logged: scheme, host, port and path, without
    the user part (a password) and with the query and fragment (API keys, tokens) left out as "?…"."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
    except ValueError:  # a port that is not a number: nothing of it is worth showing
        return "(an unreadable URL)"
    hidden = "?…" if parts.query or parts.fragment else ""
    return f"{parts.scheme}://{host}{port}{parts.path}{hidden}" if parts.scheme else f"{parts.path}{hidden}"


def _check_allowed(url: str, allowed: set[str]) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise HttpRefused(f"HTTP_URL_INVALID: only absolute http(s) URLs are allowed, got {_shown(url)!r}")
    if not allowed:
        raise HttpRefused(f"HTTP_HOST_NOT_ALLOWED: {ALLOWLIST_ENV} is empty; no host may be called")
    _, host, port = _origin(url)
    if host not in allowed and f"{host}:{port}" not in allowed:
        raise HttpRefused(f"HTTP_HOST_NOT_ALLOWED: {host} is not on {ALLOWLIST_ENV}")


def _origin(url: str) -> tuple[str, str, int]:
    """Scheme, host (as the allowlist holds it) and port of an absolute http(s) URL: what the allowlist checks, and
    what a redirect must keep for the input's headers to follow it."""
    parts = urlsplit(url)
    host = settings.allowlist_host(parts.hostname) if parts.hostname else ""
    return parts.scheme, host, parts.port or (443 if parts.scheme == "https" else 80)


class _AllowlistRedirects(urllib.request.HTTPRedirectHandler):
    """Redirects to allowed hosts only. The input's headers (an API key, a bearer token) are for the origin its URL
    names: urllib carries every header to wherever a redirect points, so they are left off a redirect to another
    scheme, host or port, as browsers leave credentials off a redirect to another origin."""

    def __init__(self, allowed: set[str], given: set[str]):
        self.allowed = allowed
        self.given = {name.lower() for name in given}
        self.followed = False  # a redirect was followed: the request it answered has reached its server

    def redirect_request(self, req: urllib.request.Request, fp: Any, code: int, msg: str, headers: Any,
                         newurl: str) -> urllib.request.Request | None:
        _check_allowed(newurl, self.allowed)
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        self.followed = self.followed or new is not None
        if new is not None and _origin(newurl) != _origin(req.full_url):
            for name in [n for n in new.headers if n.lower() in self.given]:
                new.remove_header(name)
        return new


# Said by the URL (the host the allowlist checked: a Host of the input would reach another virtual host of that
# address) and by the body the handler writes (its length and framing), never by the input's headers.
_NOT_GIVEN = frozenset({"host", "content-length", "transfer-encoding"})


def _headers(given: dict) -> dict[str, str]:
    """The input's headers as HTTP carries them: token names, scalar values without CR, LF or NUL, and none of the
    headers that the URL and the body say (``_NOT_GIVEN``)."""
    headers = {}
    for name, value in given.items():
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise HttpRefused(f"HTTP_INPUT_INVALID: header {name!r} must be a string or a number")
        text = str(value)
        if not _HEADER_NAME.fullmatch(name) or not _HEADER_VALUE.fullmatch(text):
            raise HttpRefused(f"HTTP_INPUT_INVALID: header {name!r} is not one HTTP can carry")
        if name.lower() in _NOT_GIVEN:
            raise HttpRefused(f"HTTP_INPUT_INVALID: header {name!r} is the URL's or the body's to say, not the input's")
        headers[name] = text
    return headers


def _timeout(spec: dict) -> float:
    value = spec.get("timeout_ms", DEFAULT_TIMEOUT_MS)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not 1 <= value <= MAX_TIMEOUT_MS:
        raise HttpRefused(f"HTTP_INPUT_INVALID: timeout_ms must be a number of 1..{MAX_TIMEOUT_MS}")
    return value / 1000.0


def _read(resp: Any) -> bytes:
    """The body, at most one byte past the limit (the deadline's timer cuts it off at timeout_ms)."""
    chunks: list[bytes] = []
    size = 0
    while size <= MAX_RESPONSE_BYTES:
        chunk = resp.read1(MAX_RESPONSE_BYTES + 1 - size)
        if not chunk:
            if resp.length:  # the connection ended short of the Content-Length: never a result, however it parses
                raise http_client.IncompleteRead(b"".join(chunks), resp.length)
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def request(spec: Any) -> Any:
    if not isinstance(spec, dict):
        raise HttpRefused("HTTP_INPUT_INVALID: the input must be an object with method and url")
    method = spec.get("method", "GET")
    url = spec.get("url")
    given = spec.get("headers") or {}
    if not isinstance(method, str) or method.upper() not in METHODS:
        raise HttpRefused(f"HTTP_INPUT_INVALID: method must be one of {' '.join(METHODS)}")
    method = method.upper()
    if not isinstance(url, str) or not isinstance(given, dict):
        raise HttpRefused("HTTP_INPUT_INVALID: url must be a string and headers an object")
    allowed = allowlist()
    _check_allowed(url, allowed)
    headers = _headers(given)
    timeout = _timeout(spec)
    data = None
    if "body" in spec and spec["body"] is not None:
        data = json.dumps(spec["body"], separators=(",", ":")).encode()
        headers = {"Content-Type": "application/json", **headers}
    headers = {"Accept": "application/json", **headers}
    redirects = _AllowlistRedirects(allowed, set(given))
    req = urllib.request.Request(url, data=data, headers=headers, method=method)
    what = f"{method} {_shown(url)}"
    # Whether this request may be sent again once it may have taken effect: a method that a repeat changes nothing
    # more by, or a request the server can recognise as one it has seen (the key its deduplication reads).
    repeatable = method in IDEMPOTENT or any(name.lower() == "idempotency-key" for name in given)

    def sent(error: str) -> Exception:
        """The failure of a request that reached the server, or may have."""
        if repeatable:
            return Retryable(error)
        return HttpRefused(f"HTTP_EFFECT_UNKNOWN: {error}; it may have taken effect, and a {method} without an "
                           f"Idempotency-Key header is never sent twice: check with the server before you recover")

    too_slow = f"HTTP_TIMEOUT: {what}: the response took longer than timeout_ms"
    deadline = _Deadline(timeout)
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), _TimedHttp(deadline),
                                         _TimedHttpsHandler(deadline), redirects)
    try:
        try:
            with opener.open(req, timeout=timeout) as resp:
                # A cut ends the headers, or a body with no length of its own, as the server's end would: an answer is
                # whole past a cut only when its length said where it ended.
                delimited = resp.getheader("Content-Length") is not None or bool(getattr(resp, "chunked", False))
                body = _read(resp)
                cut = deadline.stop()  # before the answer's socket is closed: the timer never shuts a closed one
        except Exception as exc:
            # A response cut at the deadline fails as too slow, whatever the cut made of it (a connection lost, a
            # status line or a body cut short); a request cut before it was sent whole stays one urllib could not
            # send (URLError), as a connect that timed out is.
            deadline.stop()
            if deadline.passed() and (isinstance(exc, urllib.error.HTTPError)
                                      or not isinstance(exc, urllib.error.URLError)):
                raise _TooSlow(too_slow) from exc
            raise
        if cut and not delimited:
            raise _TooSlow(too_slow)
    # Once a redirect was followed, the request that answered it reached its server (a POST answered "303 See
    # Other" has taken effect): whatever fails after that fails as a request that was sent.
    except urllib.error.HTTPError as exc:
        if exc.code in NOT_PROCESSED and not redirects.followed:
            raise Retryable(f"HTTP_{exc.code}: {what}") from exc
        if exc.code >= 500 or exc.code in NOT_PROCESSED:
            raise sent(f"HTTP_{exc.code}: {what}") from exc
        raise HttpRefused(f"HTTP_{exc.code}: {what}") from exc
    except urllib.error.URLError as exc:  # urllib's word for a request it could not send: never processed
        if redirects.followed:
            raise sent(f"HTTP_UNREACHABLE: {what}: {exc.reason}") from exc
        raise Retryable(f"HTTP_UNREACHABLE: {what}: {exc.reason}") from exc
    except (TimeoutError, ConnectionError) as exc:  # sent, then no answer: urllib wraps only errors of the sending
        raise sent(f"HTTP_NO_ANSWER: {what}: {exc}") from exc
    except _TooSlow as exc:
        raise sent(str(exc)) from exc
    except http_client.InvalidURL as exc:  # a URL http.client will not send (control characters, a bad port)
        raise HttpRefused(f"HTTP_URL_INVALID: http.client will not send {_shown(url)!r}") from exc
    except http_client.HTTPException as exc:  # a status line or a body cut short or not HTTP: as a lost connection
        raise sent(f"HTTP_RESPONSE_BROKEN: {what}: {type(exc).__name__}") from exc
    if len(body) > MAX_RESPONSE_BYTES:
        raise HttpRefused(f"HTTP_RESPONSE_TOO_LARGE: more than {MAX_RESPONSE_BYTES} bytes")
    try:
        return json.loads(body.decode("utf-8")) if body else None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise HttpRefused("HTTP_RESPONSE_NOT_JSON: the response body is not JSON") from exc


@handler("http", version="1")
def http(input: Any) -> Any:
    return request(input)
