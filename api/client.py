"""The Weave Python SDK: a small client over the HTTP API (07-api).

Standard library only (plus tenacity for retries, through ``procedures.retrying``), so it imports without
the server's dependencies::

    from api.client import WeaveClient, IdempotencyConflict
    client = WeaveClient("http://127.0.0.1:8080", token, "acme")
    wf = client.start_workflow("order-flow", app="billing", input={"order_id": "o-1"}, deadline_ms=3_600_000)
    for event in client.events(wf["workflow_id"]):
        print(event["seq"], event["type"])

Every logical call that changes something gets one idempotency key, generated once and reused by all
of its retries (connection errors and 503 are retried with jittered exponential backoff), so a retry
can never start a second instance or send a second signal.

Each thread keeps one HTTP/1.1 connection per client and reuses it from call to call: a new TCP connection
per call cost the client and the API about 0.8 ms of CPU each on top of the request itself, and doubled the
API's cost of a cheap request. A kept connection the server has closed while it sat idle is seen before it is
used (it reads as closed) and replaced, so a request is never sent twice by the transport itself. Through a
proxy (``HTTP_PROXY``/``HTTPS_PROXY``, as urllib reads them) every call goes through urllib instead.
"""

from __future__ import annotations

import http.client
import json
import os
import select
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterable, Iterator
from decimal import Decimal
from typing import Any

from tenacity import RetryCallState, wait_random_exponential
from tenacity.wait import wait_base

from procedures import jsontext
from procedures.retrying import read_until, retry_after_first

# The statuses of an instance (01-model).
STATUSES = frozenset({"RUNNING", "SUCCEEDED", "NEEDS_REVIEW", "CANCELLING", "CANCELLED"})
# What a caller waits for by default: an instance settled for good, or one that waits for a person.
WAIT_UNTIL = ("SUCCEEDED", "CANCELLED", "NEEDS_REVIEW")


class WaitTimedOut(TimeoutError):
    """``wait_for`` ran out of time; ``instance`` is the instance as last read."""

    def __init__(self, workflow_id: str, instance: dict, timeout: float):
        super().__init__(f"{workflow_id} is still {instance['status']} after {timeout:g} s")
        self.workflow_id, self.instance = workflow_id, instance


class WeaveApiError(Exception):
    """An answer with a problem+json body; ``code`` is the stable machine code: the answer's own, also for a code
    this SDK has no class for (``ERROR`` only when the answer has none, as a proxy's error page has not)."""

    code = "ERROR"

    def __init__(self, status: int, body: dict, headers: dict[str, str] | None = None):
        self.status = status
        self.body = body
        self.headers = headers or {}  # the answer's headers, names in lower case (e.g. retry-after)
        if isinstance(body.get("code"), str) and body["code"]:
            self.code = body["code"]
        self.detail = body.get("detail", "")
        self.errors = body.get("errors", [])
        # What is wrong, field by field, in the message too: a validation failure's detail alone says only that.
        problems = "; ".join(f"{e['field']}: {e['message']}" if e.get("field") else str(e.get("message"))
                             for e in self.errors if isinstance(e, dict) and e.get("message"))
        super().__init__(f"{status} {self.code}: {self.detail}" + (f" ({problems})" if problems else ""))


class Unauthenticated(WeaveApiError):
    code = "UNAUTHENTICATED"


class Forbidden(WeaveApiError):
    code = "FORBIDDEN"


class NotFound(WeaveApiError):
    code = "NOT_FOUND"


class ValidationFailed(WeaveApiError):
    code = "VALIDATION_FAILED"


class IdempotencyConflict(WeaveApiError):
    code = "IDEMPOTENCY_CONFLICT"


class SignalLimitReached(WeaveApiError):
    code = "SIGNAL_LIMIT_REACHED"


class InvalidState(WeaveApiError):
    code = "INVALID_STATE"


class TaskInFlight(WeaveApiError):
    code = "TASK_IN_FLIGHT"


class PayloadTooLarge(WeaveApiError):
    code = "PAYLOAD_TOO_LARGE"


class UnsupportedMediaType(WeaveApiError):
    code = "UNSUPPORTED_MEDIA_TYPE"


class BadRequest(WeaveApiError):
    code = "BAD_REQUEST"


class UriTooLong(WeaveApiError):
    code = "URI_TOO_LONG"


class HeadersTooLarge(WeaveApiError):
    code = "HEADERS_TOO_LARGE"


class MethodNotAllowed(WeaveApiError):
    code = "METHOD_NOT_ALLOWED"


class Unavailable(WeaveApiError):
    code = "UNAVAILABLE"


class InternalError(WeaveApiError):
    code = "INTERNAL"


# One class per code the API answers; a test keeps this in step with the error table (procedures/errors.py),
# which the SDK does not import so that it needs no server dependencies.
BY_CODE: dict[str, type[WeaveApiError]] = {cls.code: cls for cls in WeaveApiError.__subclasses__()}


class _Retry(Exception):
    """A connection error or 503: worth another try with the same idempotency key; ``retry_after``: the seconds a
    503 asked for (its Retry-After header), the least wait before the next try."""

    def __init__(self, retry_after: float | None = None):
        super().__init__()
        self.retry_after = retry_after


def _retry_after(headers: dict[str, str]) -> float | None:
    """A Retry-After of seconds (the API's form), at most RETRY_AFTER_CAP; None for none or another form."""
    value = headers.get("retry-after", "")
    return min(float(value), RETRY_AFTER_CAP) if value.isascii() and value.isdigit() else None


def _retryable(exc: BaseException) -> bool:
    return isinstance(exc, _Retry)


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """Through a proxy too, a redirect is an answer like any other: urllib's opener would follow it, the bearer
    token with it, to whatever host its Location names."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


RETRY_WAIT = wait_random_exponential(multiplier=0.1, max=5)  # between tries of a call (stateless, shared)
RETRY_AFTER_CAP = 30.0  # the longest a 503's Retry-After makes a call wait between two tries


class _RetryWait(wait_base):
    """The jittered backoff, but never less than the Retry-After the last 503 asked for."""

    def __call__(self, retry_state: RetryCallState) -> float:
        wait = RETRY_WAIT(retry_state)
        failed = retry_state.outcome.exception() if retry_state.outcome is not None else None
        asked = getattr(failed, "retry_after", None)
        return wait if asked is None else max(wait, asked)


_RETRY_WAIT_HONOURING = _RetryWait()


class WeaveClient:
    def __init__(self, base_url: str, token: str, namespace: str, *, timeout: float = 30.0, retries: int = 5,
                 decimals: bool = False):
        self.base_url = base_url.rstrip("/")
        self.decimals = decimals  # answers' fractional numbers as Decimal, every digit kept
        self.token = token
        self.namespace = namespace
        self.timeout = timeout
        self.retries = retries
        parts = urllib.parse.urlsplit(self.base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"base_url must be an http:// or https:// URL, not {base_url!r}")
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 1:
            raise ValueError(f"retries counts the tries of a call, the first included: at least 1, not {retries!r}")
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
            raise ValueError(f"timeout is seconds per request, more than 0, not {timeout!r}")
        self._https = parts.scheme == "https"
        self._host, self._port, self._root = parts.hostname, parts.port, parts.path
        proxy = urllib.request.getproxies().get(parts.scheme)
        # An opener of this client's own: urlopen's shared one keeps the proxies of the moment it was first used.
        self._proxy = (urllib.request.build_opener(urllib.request.ProxyHandler({parts.scheme: proxy}), _NoRedirects)
                       if proxy and not urllib.request.proxy_bypass(parts.hostname) else None)
        self._tls: ssl.SSLContext | None = None  # made once, on the first https connection: loading the CA store costs
        self._local = threading.local()
        self._lock = threading.Lock()
        # Every thread's kept connection, with its thread; close() empties it. A connection whose thread has ended is
        # closed when another is opened: kept, one socket stayed open for each thread that ever used the client
        # (2,000 short-lived threads: 2,000 open files, past a process's default limit of 1,024).
        self._open: dict[http.client.HTTPConnection, threading.Thread] = {}

    def close(self) -> None:
        """Close the kept connections of every thread (a later call opens a new one)."""
        with self._lock:
            conns, self._open = list(self._open), {}
        for conn in conns:
            conn.close()

    def __enter__(self) -> WeaveClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # --- transport -------------------------------------------------------------------------------------
    def _url(self, path: str, params: dict | None = None) -> str:
        prefix = "" if path.startswith("/") else f"/v1/namespaces/{_segment(self.namespace)}/"
        query = {k: v for k, v in (params or {}).items() if v is not None}
        return self.base_url + prefix + path + ("?" + urllib.parse.urlencode(query) if query else "")

    def _connection(self) -> http.client.HTTPConnection:
        """This thread's kept connection, replaced when the server has closed it, when close() has (it is no longer
        among the open ones), or when it belongs to the process this one was forked from."""
        conn = getattr(self._local, "conn", None)
        if conn is not None and (self._local.pid != os.getpid() or conn not in self._open or _closed(conn)):
            self._drop()
            conn = None
        if conn is None:
            if self._https:
                if self._tls is None:
                    self._tls = ssl.create_default_context()
                conn = http.client.HTTPSConnection(self._host, self._port, timeout=self.timeout, context=self._tls)
            else:
                conn = http.client.HTTPConnection(self._host, self._port, timeout=self.timeout)
            with self._lock:
                ended = [c for c, thread in self._open.items() if not thread.is_alive()]
                for c in ended:
                    del self._open[c]
                self._open[conn] = threading.current_thread()
            for c in ended:
                c.close()
            self._local.conn, self._local.pid = conn, os.getpid()
        return conn

    def _drop(self) -> None:
        conn = getattr(self._local, "conn", None)
        self._local.conn = None
        if conn is not None:
            with self._lock:
                self._open.pop(conn, None)
            conn.close()

    def _exchange(self, method: str, url: str, data: bytes | None, headers: dict[str, str]) -> tuple[int, dict, bytes]:
        """One HTTP request and its whole answer: (status, headers with lower-case names, body bytes). Raises
        OSError or http.client.HTTPException when the connection fails."""
        if self._proxy is not None:
            req = urllib.request.Request(url, data=data, method=method, headers=headers)
            try:
                with self._proxy.open(req, timeout=self.timeout) as resp:
                    return resp.status, {k.lower(): v for k, v in resp.headers.items()}, resp.read()
            except urllib.error.HTTPError as err:
                return err.code, {k.lower(): v for k, v in err.headers.items()}, err.read()
            except urllib.error.URLError as err:
                raise ConnectionError(str(err.reason)) from err
        conn = self._connection()
        try:
            conn.request(method, self._root + url[len(self.base_url):], body=data, headers=headers)
            resp = conn.getresponse()
            body = resp.read()
        except BaseException:
            self._drop()
            raise
        if resp.will_close:
            self._drop()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, body

    def request(self, method: str, path: str, body: Any = None, *, params: dict | None = None,
                idempotency_key: str | None = None, raw_body: bytes | None = None) -> tuple[int, dict, Any]:
        """One logical call: (status, headers, decoded body). Retries reuse the same idempotency key."""
        # UTF-8 as it is: json's default escapes every character beyond ASCII, which doubles or triples such text on
        # the wire (an input under the size limit as UTF-8 was refused as too large) and stores it as other clients
        # never send it.
        data = raw_body if raw_body is not None else (None if body is None else _encode(body))
        headers = {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        if idempotency_key is not None:
            headers["Idempotency-Key"] = idempotency_key
        url = self._url(path, params)

        def once() -> tuple[int, dict, Any]:
            try:
                status, answer_headers, raw = self._exchange(method, url, data, headers)
            except (OSError, http.client.HTTPException) as err:
                raise _Retry() from err
            payload = _decode(raw, self.decimals)
            if status == 503:
                raise _Retry(_retry_after(answer_headers)) from Unavailable(
                    status, payload if isinstance(payload, dict) else {}, answer_headers)
            if status >= 400:
                body_ = payload if isinstance(payload, dict) else {"detail": str(payload)}
                raise BY_CODE.get(body_.get("code", ""), WeaveApiError)(status, body_, answer_headers)
            return status, answer_headers, payload

        try:
            return retry_after_first(once, _retryable, self.retries, _RETRY_WAIT_HONOURING)
        except _Retry as exc:
            # The last answer's problem document and headers (its Retry-After above all), when there was one: the
            # server's word on why, not only the SDK's count of tries.
            last = exc.__cause__ if isinstance(exc.__cause__, Unavailable) else None
            problem = {**(last.body if last else {}), "code": "UNAVAILABLE",
                       "detail": f"gave up after {self.retries} tries: {exc.__cause__}"}
            raise Unavailable(503, problem, last.headers if last else None) from exc

    def _call(self, method: str, path: str, body: Any = None, *, params: dict | None = None,
              idempotent: bool = False, idempotency_key: str | None = None) -> Any:
        key = idempotency_key or (str(uuid.uuid4()) if idempotent else None)
        return self.request(method, path, body, params=params, idempotency_key=key)[2]

    # --- definitions ---------------------------------------------------------------------------------------
    def publish_definition(self, document: dict, *, idempotency_key: str | None = None) -> dict:
        """The version published (or the latest, when it has the same content). The call's tries share one
        idempotency key, so a retry after a lost answer answers that publish, even after later ones."""
        return self._call("POST", "definitions", document, idempotent=True, idempotency_key=idempotency_key)

    def get_definition(self, name: str, version: int | None = None) -> dict:
        """A version of a definition; without ``version``, its latest."""
        if version is None:
            return self._call("GET", f"definitions/{_segment(name)}")
        return self._call("GET", f"definitions/{_segment(name)}/versions/{_segment(version)}")

    def list_definitions(self) -> list[dict]:
        """Every definition with its latest version, by name (read page by page)."""
        return self._every("definitions")

    # --- workflows -------------------------------------------------------------------------------------------
    def start_workflow(self, definition: str, *, app: str, input: Any = None, deadline_ms: int | None = None,
                       deadline_at: str | None = None, version: int | None = None, business_key: str | None = None,
                       idempotency_key: str | None = None) -> dict:
        body = _given({"definition": definition, "app": app, "input": {} if input is None else input},
                      deadline_ms=deadline_ms, deadline_at=deadline_at, version=version, business_key=business_key)
        return self._call("POST", "workflows", body, idempotent=True, idempotency_key=idempotency_key)

    def get_workflow(self, workflow_id: str) -> dict:
        return self._call("GET", _path(workflow_id))

    def wait_for(self, workflow_id: str, *, until: Iterable[str] = WAIT_UNTIL, timeout: float = 60.0,
                 interval: float = 2.0) -> dict:
        """The instance once its status is one of ``until`` (by default: settled for good, or waiting for a person),
        read again and again for at most ``timeout`` seconds: the first reads 50 ms apart, then slower, up to
        ``interval`` apart. ``WaitTimedOut`` (holding the instance as last read) when the time is up."""
        wanted = frozenset(until)
        if not wanted or not wanted <= STATUSES:
            raise ValueError(f"until must name statuses among {', '.join(sorted(STATUSES))}")
        instance, done = read_until(lambda: self.get_workflow(workflow_id), lambda i: i["status"] in wanted,
                                    timeout, interval, time.sleep, time.monotonic)
        if not done:
            raise WaitTimedOut(workflow_id, instance, timeout)
        return instance

    def list_workflows(self, *, status: str | None = None, definition: str | None = None, control: str | None = None,
                       business_key: str | None = None, review_code: str | None = None, deferred: bool = False,
                       limit: int = 50, cursor: str | None = None) -> dict:
        """A page of instances, newest first, with every filter of ``GET /workflows``: ``deferred=True`` keeps those
        whose next check is deferred, ``review_code`` those with an open review reason of that code."""
        return self._call("GET", "workflows", params={
            "status": status, "definition": definition, "control": control, "business_key": business_key,
            "review_code": review_code, "deferred": "true" if deferred else None, "limit": limit, "cursor": cursor})

    def events(self, workflow_id: str, *, after: int = 0, page: int = 100) -> Iterator[dict]:
        """Every event after ``after``, in order, fetched page by page."""
        while True:
            batch = self._call("GET", _path(workflow_id, "events"), params={"after": after, "limit": page})
            yield from batch["events"]
            if len(batch["events"]) < page:
                return
            after = batch["next_after"]

    def rounds(self, workflow_id: str, step_key: str, *, activation: int | None = None, after: int = 0,
               page: int = 100) -> Iterator[dict]:
        """Every round of a POLL step's activation after ``after`` (the step's latest activation unless
        ``activation`` names one), in order, fetched page by page; ``get_workflow`` gives the latest 50 only. The
        activation the first page answered for is the one every later page reads, even if the step is reactivated
        meanwhile."""
        while True:
            batch = self._call("GET", _path(workflow_id, "steps", step_key, "rounds"),
                               params={"activation": activation, "after": after, "limit": page})
            yield from batch["rounds"]
            if not batch["more"]:
                return
            after, activation = batch["next_after"], batch["activation_sequence"]

    # --- signals -------------------------------------------------------------------------------------------
    def send_signal(self, workflow_id: str, *, name: str, payload_version: str, target_step_key: str,
                    target_activation_sequence: int, correlation_key: str, payload: Any, reason: str,
                    evidence_ref: str | None = None, idempotency_key: str | None = None) -> dict:
        body = _given({"name": name, "payload_version": payload_version, "target_step_key": target_step_key,
                       "target_activation_sequence": target_activation_sequence, "correlation_key": correlation_key,
                       "payload": payload, "reason": reason}, evidence_ref=evidence_ref)
        return self._call("POST", _path(workflow_id, "signals"), body, idempotent=True,
                          idempotency_key=idempotency_key)

    def get_signal(self, workflow_id: str, signal_id: str) -> dict:
        return self._call("GET", _path(workflow_id, "signals", signal_id))

    def list_signals(self, workflow_id: str, *, status: str | None = None, limit: int | None = None,
                     cursor: str | None = None) -> dict:
        return self._call("GET", _path(workflow_id, "signals"), params={"status": status, "limit": limit,
                                                                         "cursor": cursor})

    def explain(self, workflow_id: str, step_key: str) -> dict:
        return self._call("GET", _path(workflow_id, "steps", step_key, "explain"))

    # --- control and recovery -----------------------------------------------------------------------------------
    def pause(self, workflow_id: str, reason: str, *, idempotency_key: str | None = None) -> dict:
        return self._control(_path(workflow_id, "pause"), {"reason": reason}, idempotency_key)

    def resume(self, workflow_id: str, reason: str, *, idempotency_key: str | None = None) -> dict:
        return self._control(_path(workflow_id, "resume"), {"reason": reason}, idempotency_key)

    def cancel(self, workflow_id: str, reason: str, *, idempotency_key: str | None = None) -> dict:
        return self._control(_path(workflow_id, "cancel"), {"reason": reason}, idempotency_key)

    # ``activation_sequence``: the step's activation the action is meant for, as read; once the step has moved to
    # another, the action is refused (409 INVALID_STATE) and nothing changes.
    def reactivate(self, workflow_id: str, step_key: str, reason: str, *, timeout_ms: int | None = None,
                   activation_sequence: int | None = None, idempotency_key: str | None = None) -> dict:
        body = _given({"reason": reason}, timeout_ms=timeout_ms, activation_sequence=activation_sequence)
        return self._control(_path(workflow_id, "steps", step_key, "reactivate"), body, idempotency_key)

    def continue_poll(self, workflow_id: str, step_key: str, reason: str, *, extra_rounds: int | None = None,
                      poll_deadline_ms: int | None = None, activation_sequence: int | None = None,
                      idempotency_key: str | None = None) -> dict:
        body = _given({"reason": reason}, extra_rounds=extra_rounds, poll_deadline_ms=poll_deadline_ms,
                      activation_sequence=activation_sequence)
        return self._control(_path(workflow_id, "steps", step_key, "continue"), body, idempotency_key)

    def resolve(self, workflow_id: str, step_key: str, reason: str, output: Any, *, evidence_ref: str | None = None,
                activation_sequence: int | None = None, idempotency_key: str | None = None) -> dict:
        body = _given({"reason": reason, "output": output}, evidence_ref=evidence_ref,
                      activation_sequence=activation_sequence)
        return self._control(_path(workflow_id, "steps", step_key, "resolve"), body, idempotency_key)

    def set_deadline(self, workflow_id: str, reason: str, *, deadline_at: str | None = None,
                     extend_ms: int | None = None, idempotency_key: str | None = None) -> dict:
        body = _given({"reason": reason}, deadline_at=deadline_at, extend_ms=extend_ms)
        return self._control(_path(workflow_id, "deadline"), body, idempotency_key)

    def retry(self, workflow_id: str, reason: str, *, idempotency_key: str | None = None) -> dict:
        """Once the cause is fixed, retry what ``CANDIDATE_FAILING`` and ``OWNERSHIP_MISMATCH`` hold back: the failing
        decisions, the outcomes set aside (verified again), and each step in review for a failing decision alone,
        which goes on where it stopped, in the same activation."""
        return self._control(_path(workflow_id, "retry"), {"reason": reason}, idempotency_key)

    def _control(self, path: str, body: dict, key: str | None) -> dict:
        return self._call("POST", path, body, idempotent=True, idempotency_key=key)

    # --- admin and operations -------------------------------------------------------------------------------
    def create_app(self, name: str, max_in_flight: int, status: str | None = None, *,
                   idempotency_key: str | None = None) -> dict:
        """Create or change an app. The call's tries share one idempotency key, so a retry after a lost answer
        answers that put and does not undo a change made between them."""
        return self._call("POST", "apps", _given({"name": name, "max_in_flight": max_in_flight}, status=status),
                          idempotent=True, idempotency_key=idempotency_key)

    def create_queue(self, name: str, capacity: int, *, idempotency_key: str | None = None) -> dict:
        """Create a queue or change its capacity; its tries share one key, as ``create_app``'s."""
        return self._call("POST", "queues", {"name": name, "capacity": capacity}, idempotent=True,
                          idempotency_key=idempotency_key)

    def create_credential(self, actor: str, scopes: list[str], queues: list[str] | str = "*", *,
                          expires_at: str | None = None, idempotency_key: str | None = None) -> dict:
        """A new credential with its token, shown once. Tried once: a retry could only answer which credential a
        lost answer made, without its token. Pass ``idempotency_key`` to ask that yourself after an error: the same
        call with the same key answers the credential the first made, ``token`` None (disable it and create
        another), or makes it if the first never arrived."""
        with WeaveClient(self.base_url, self.token, self.namespace, timeout=self.timeout, retries=1) as once:
            return once._call("POST", "credentials", _given({"actor": actor, "scopes": scopes, "queues": queues},
                                                            expires_at=expires_at), idempotency_key=idempotency_key)

    def list_apps(self) -> list[dict]:
        """Every app, by name (read page by page)."""
        return self._every("apps")

    def list_queues(self) -> list[dict]:
        """Every queue, by name (read page by page)."""
        return self._every("queues")

    def list_credentials(self) -> list[dict]:
        """Every credential of the namespace, oldest first (read page by page), never a token."""
        return self._every("credentials")

    def _every(self, listing: str, page: int = 1000) -> list[dict]:
        """Every item of a configuration list, following its ``next_cursor`` from page to page."""
        items: list[dict] = []
        cursor = None
        while True:
            batch = self._call("GET", listing, params={"limit": page, "cursor": cursor})
            items += batch["items"]
            cursor = batch["next_cursor"]
            if cursor is None:
                return items

    def disable_credential(self, credential_id: str) -> dict:
        """Its token stops working at once. Safe to retry: disabling a disabled credential changes nothing."""
        return self._call("POST", f"credentials/{_segment(credential_id)}/disable")

    def enable_credential(self, credential_id: str) -> dict:
        """A disabled credential works again (until its expiry), and the instances it started go on. Safe to retry:
        enabling an active credential changes nothing."""
        return self._call("POST", f"credentials/{_segment(credential_id)}/enable")

    def list_audit(self, *, workflow_id: str | None = None, action: str | None = None, limit: int = 50,
                   cursor: str | None = None) -> dict:
        """The audit trail, newest first: the namespace's own actions, or with ``workflow_id`` that instance's."""
        return self._call("GET", "audit", params={"workflow_id": workflow_id, "action": action, "limit": limit,
                                                  "cursor": cursor})

    def ready(self) -> dict:
        return self._call("GET", "/readyz")


def _path(*parts: Any) -> str:
    """``workflows/{id}/...``, each part one path segment."""
    return "/".join(["workflows", *(_segment(part) for part in parts)])


def _segment(value: Any) -> str:
    """A value as one path segment: an id holding '/', '?' or '#' names that id, never another path or a query."""
    return urllib.parse.quote(str(value), safe="")


def _given(body: dict[str, Any], **optional: Any) -> dict[str, Any]:
    """``body`` with each optional field that was given (not None)."""
    return {**body, **{name: value for name, value in optional.items() if value is not None}}


def _closed(conn: http.client.HTTPConnection) -> bool:
    """Whether a kept connection can no longer carry a request: between answers nothing is due from the server,
    so a socket with something to read has been closed by it (or holds bytes no request asked for)."""
    if conn.sock is None:
        return False  # not connected yet: http.client connects on the first request
    try:
        return bool(select.select([conn.sock], [], [], 0)[0])
    except (OSError, ValueError):
        return True


def _encode(body: Any) -> bytes:
    """``body`` as JSON in UTF-8, each ``Decimal`` in it with every one of its digits."""
    return jsontext.dumps_exact(body, ensure_ascii=False).encode()


def _decode(raw: bytes, decimals: bool = False) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw, parse_float=Decimal) if decimals else json.loads(raw)
    except ValueError:
        return raw.decode("utf-8", "replace")
