"""The SDK's transport: one kept HTTP/1.1 connection per thread, replaced when the server has closed it, never a
request sent twice by the transport itself, and urllib's proxy settings still obeyed. A small real HTTP server
stands on the other side, so that what reaches a server is what is counted."""

from __future__ import annotations

import json
import threading
import urllib.request
from collections.abc import Iterator
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from tenacity import RetryCallState

from api import client as sdk
from tests.support.waiting import wait_for


class Recorder(ThreadingHTTPServer):
    """Answers every request with ``{"path": ..., "port": <the client's port>}`` and records it; ``closing``
    makes it close each connection after its answer without saying so (as a server's idle timeout does), and
    ``say_close`` makes it answer ``Connection: close``; ``answer`` (status, content type, body) replaces the
    answer."""

    daemon_threads = True
    closing = False
    say_close = False
    answer: tuple[int, str, bytes] | None = None
    location: str | None = None  # a Location header to answer with
    retry_after: str | None = None  # a Retry-After header to answer with

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.seen: list[tuple[str, str, int]] = []
        self.bodies: list[bytes] = []  # each request's body, as it came
        self.closed = threading.Semaphore(0)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def ports(self) -> set[int]:
        return {port for _, _, port in self.seen}

    def shutdown_request(self, request) -> None:  # type: ignore[no-untyped-def]
        super().shutdown_request(request)
        self.closed.release()  # the socket is closed: the client can see it


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Recorder

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.server.bodies.append(self.rfile.read(length))
        self.server.seen.append((self.command, self.path, self.client_address[1]))
        status, kind, body = self.server.answer or (
            200, "application/json", json.dumps({"path": self.path, "port": self.client_address[1]}).encode())
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        if self.server.say_close:
            self.send_header("Connection", "close")
        if self.server.location:
            self.send_header("Location", self.server.location)
        if self.server.retry_after:
            self.send_header("Retry-After", self.server.retry_after)
        self.end_headers()
        self.wfile.write(body)
        if self.server.closing:
            self.close_connection = True

    do_GET = do_POST = _answer

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[Recorder]:
    srv = Recorder()
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def test_sdk_keeps_one_connection_per_thread(server):
    client = sdk.WeaveClient(server.url, "wv_x", "acme")
    for n in range(5):
        assert client.get_workflow(f"wf_{n}")["path"] == f"/v1/namespaces/acme/workflows/wf_{n}"
    assert len(server.seen) == 5 and len(server.ports()) == 1
    others = [threading.Thread(target=lambda: [client.request("GET", "/healthz") for _ in range(3)]) for _ in range(2)]
    for t in others:
        t.start()
    for t in others:
        t.join()
    assert len(server.seen) == 11 and len(server.ports()) == 3
    client.close()  # closes every thread's connection; the next call opens one, which the next close closes too
    client.request("GET", "/healthz")
    assert len(server.ports()) == 4
    client.close()
    client.request("GET", "/healthz")
    assert len(server.ports()) == 5 and len(client._open) == 1


def test_sdk_closes_the_connection_of_a_thread_that_has_ended(server):
    """A client shared by short-lived threads (a thread per request or per job) kept each thread's connection open
    after the thread had ended: 2,000 threads, 2,000 open sockets, past a process's default limit of open files.
    The next connection opened closes those of the threads that have ended."""
    client = sdk.WeaveClient(server.url, "wv_x", "acme")
    for _ in range(20):
        one = threading.Thread(target=lambda: client.request("GET", "/healthz"))
        one.start()
        one.join()
    assert len(server.ports()) == 20  # each thread had its own connection
    assert len(client._open) == 1  # only the last thread's is still kept
    client.close()


@pytest.mark.parametrize("how", ["closed while idle", "Connection: close"])
def test_sdk_replaces_a_closed_connection_and_sends_each_request_once(server, how):
    server.closing, server.say_close = True, how == "Connection: close"
    client = sdk.WeaveClient(server.url, "wv_x", "acme", retries=1)  # a transport re-send would show as a failure
    for n in range(4):
        client.request("POST", "workflows", {"n": n}, idempotency_key=f"k{n}")
        assert wait_for(lambda: server.closed.acquire(blocking=False), timeout=10)  # the server has let go
    assert [(m, p) for m, p, _ in server.seen] == [("POST", "/v1/namespaces/acme/workflows")] * 4
    assert len(server.ports()) == 4


def test_sdk_keeps_the_base_url_path_prefix(server):
    client = sdk.WeaveClient(server.url + "/weave/", "wv_x", "acme")
    assert client.get_workflow("wf_1")["path"] == "/weave/v1/namespaces/acme/workflows/wf_1"
    assert client.request("GET", "/healthz", params={"a": "b c"})[2]["path"] == "/weave/healthz?a=b+c"


def test_sdk_puts_each_id_in_one_path_segment(server):
    """An id went into the path as it was: 'wf_1?x' read wf_1 with a query, 'wf_2/../wf_1' another path."""
    client = sdk.WeaveClient(server.url, "wv_x", "acme")
    assert client.get_workflow("wf_1?x=1#y")["path"] == "/v1/namespaces/acme/workflows/wf_1%3Fx%3D1%23y"
    assert client.explain("wf_2/../wf_1", "a b")["path"] == \
        "/v1/namespaces/acme/workflows/wf_2%2F..%2Fwf_1/steps/a%20b/explain"
    assert client.get_signal("wf_1", "sig_1/x")["path"] == "/v1/namespaces/acme/workflows/wf_1/signals/sig_1%2Fx"


def test_sdk_pages_through_signals_with_a_limit_and_a_cursor(server):
    """The list answers 100 signals a page by default with a next_cursor: without limit and cursor the SDK could
    read only the first page."""
    client = sdk.WeaveClient(server.url, "wv_x", "acme")
    assert client.list_signals("wf_1", status="PENDING", limit=10, cursor="sig_42")["path"] == \
        "/v1/namespaces/acme/workflows/wf_1/signals?status=PENDING&limit=10&cursor=sig_42"
    assert client.list_signals("wf_1")["path"] == "/v1/namespaces/acme/workflows/wf_1/signals"

def test_sdk_goes_through_the_proxy_the_environment_names(server, monkeypatch):
    monkeypatch.setenv("HTTP_PROXY", server.url)
    monkeypatch.setenv("http_proxy", server.url)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    client = sdk.WeaveClient("http://weave.example:8080", "wv_x", "acme")
    assert client.get_workflow("wf_7")["path"] == "http://weave.example:8080/v1/namespaces/acme/workflows/wf_7"
    # The proxy is the client's own: urllib's shared opener, which keeps the proxies of its first use, is untouched.
    assert urllib.request._opener is None or all(  # type: ignore[attr-defined]
        not isinstance(h, urllib.request.ProxyHandler) or server.url not in h.proxies.values()
        for h in urllib.request._opener.handlers)  # type: ignore[attr-defined]


@pytest.mark.parametrize("proxied", [False, True])
def test_sdk_follows_no_redirect_with_its_token_through_a_proxy_either(server, monkeypatch, proxied):
    """An answer is taken as it comes, a redirect too. Through a proxy, urllib's opener followed a redirect and
    sent the bearer token with it, to whatever host the Location named."""
    for name in ("HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    if proxied:
        monkeypatch.setenv("http_proxy", server.url)
    server.answer, server.location = (302, "application/json", b"{}"), "http://elsewhere.example/steal"
    client = sdk.WeaveClient("http://weave.example:8080" if proxied else server.url, "wv_x", "acme")
    assert client.request("GET", "/healthz")[0] == 302
    assert [path for _, path, _ in server.seen] == \
        ["http://weave.example:8080/healthz" if proxied else "/healthz"]


def test_sdk_refuses_a_base_url_that_is_not_http():
    with pytest.raises(ValueError, match="http:// or https://"):
        sdk.WeaveClient("127.0.0.1:8080", "wv_x", "acme")


def test_sdk_error_of_a_code_it_has_no_class_for_carries_that_code(server):
    """An answer with a code the SDK has no class for raises WeaveApiError itself, and its ``code`` is the answer's,
    as the SDK's documentation says to match on: it was "ERROR" whatever the server said."""
    server.answer = (429, "application/problem+json", json.dumps({
        "type": "https://weave.dev/problems/too-many", "title": "Too Many Requests", "status": 429,
        "code": "RATE_LIMITED", "detail": "slow down", "errors": []}).encode())
    client = sdk.WeaveClient(server.url, "wv_x", "acme")
    with pytest.raises(sdk.WeaveApiError) as raised:
        client.get_workflow("wf_1")
    assert type(raised.value) is sdk.WeaveApiError
    assert (raised.value.status, raised.value.code, raised.value.detail) == (429, "RATE_LIMITED", "slow down")
    server.answer = (502, "text/html", b"<html>bad gateway</html>")  # not the API's answer: no code at all
    with pytest.raises(sdk.WeaveApiError) as raised:
        client.get_workflow("wf_1")
    assert (raised.value.status, raised.value.code) == (502, "ERROR")
    server.answer = (409, "application/problem+json", json.dumps({"code": "INVALID_STATE", "detail": "final"}).encode())
    with pytest.raises(sdk.InvalidState) as raised:
        client.get_workflow("wf_1")
    assert raised.value.code == "INVALID_STATE"


def test_sdk_error_says_what_is_wrong_and_keeps_the_answer_s_headers(server):
    """A validation failure's message names each field and what is wrong with it (its detail alone says only that
    the request is not valid), and every error keeps the answer's headers, as ``request`` gives them."""
    server.answer = (422, "application/problem+json", json.dumps({
        "code": "VALIDATION_FAILED", "detail": "the request is not valid", "errors": [
            {"field": "deadline_ms", "code": "DEADLINE_INVALID", "message": "deadline_ms must be from 1 to 9"}]}
    ).encode())
    client = sdk.WeaveClient(server.url, "wv_x", "acme")
    with pytest.raises(sdk.ValidationFailed) as raised:
        client.start_workflow("d", app="a", deadline_ms=0)
    assert str(raised.value) == ("422 VALIDATION_FAILED: the request is not valid "
                                 "(deadline_ms: deadline_ms must be from 1 to 9)")
    assert raised.value.headers["content-type"] == "application/problem+json"


def test_sdk_waits_at_least_what_a_503_s_retry_after_asks(server):
    """A 503 says in Retry-After when to try again (the API: 1 s while its database is away); the SDK's jittered
    backoff starts at up to 0.1 s, so every try of a call could be spent before a failover ends. The wait between
    two tries is now never less than what the answer asked for, up to 30 s."""
    server.answer = (503, "application/problem+json", json.dumps({"code": "UNAVAILABLE", "detail": "away"}).encode())
    server.retry_after = "7"
    client = sdk.WeaveClient(server.url, "wv_x", "acme", retries=1)
    with pytest.raises(sdk.Unavailable) as raised:
        client.get_workflow("wf_1")
    failed = raised.value.__cause__
    assert failed.retry_after == 7.0 and failed.__cause__.headers["retry-after"] == "7"
    # What the caller holds keeps the last answer: its headers and its problem document, not the count alone.
    assert raised.value.headers["retry-after"] == "7" and raised.value.body["code"] == "UNAVAILABLE"
    assert raised.value.detail.startswith("gave up after 1 tries: 503 UNAVAILABLE: away")
    state = RetryCallState(None, None, (), {})
    state.attempt_number = 1
    state.set_exception((type(failed), failed, None))
    assert sdk._RETRY_WAIT_HONOURING(state) == 7.0  # the backoff alone would wait at most 0.1 s
    state.set_exception((sdk._Retry, sdk._Retry(), None))
    assert sdk._RETRY_WAIT_HONOURING(state) <= 0.1  # without a Retry-After: the backoff alone
    server.retry_after = "3600"
    with pytest.raises(sdk.Unavailable) as raised:
        client.get_workflow("wf_1")
    assert raised.value.__cause__.retry_after == 30.0


def test_sdk_sends_text_beyond_ascii_as_utf_8(server):
    """The SDK wrote bodies with json's default, every character beyond ASCII as a \\u escape: a memo of Chinese
    text under the 300 KiB limit as UTF-8 went out at twice that and was refused as too large, and was stored as no
    other client sends it."""
    sdk.WeaveClient(server.url, "wv_x", "acme").start_workflow("d", app="a", input={"memo": "付款 Zoë 🙂"},
                                                              deadline_ms=1000)
    (sent,) = server.bodies
    assert "付款 Zoë 🙂".encode() in sent and b"\\u" not in sent


def test_sdk_sends_a_decimal_with_every_digit(server):
    """The json module writes no Decimal: an application holding its amounts as Decimal, as payment code does, got
    a TypeError, and one that converted to float sent 17 significant digits of them."""
    client = sdk.WeaveClient(server.url, "wv_x", "acme")
    amount = Decimal("12345678901234567890.10")
    client.start_workflow("d", app="a", input={"amount": amount, "lines": [Decimal("-0.000"), Decimal("1E+2"), 0.5],
                                               "note": "12345678901234567890.10", "as_key": {"1.10": True}},
                          deadline_ms=1000)
    (sent,) = server.bodies
    assert json.loads(sent, parse_float=Decimal)["input"] == {
        "amount": amount, "lines": [Decimal("-0.000"), Decimal("100"), Decimal("0.5")],
        "note": "12345678901234567890.10", "as_key": {"1.10": True}}
    assert b'"amount": 12345678901234567890.10,' in sent
    for nothing in ("NaN", "Infinity", "-Infinity"):  # no JSON number: refused before anything is sent
        with pytest.raises(ValueError, match="JSON has no number"):
            client.start_workflow("d", app="a", input={"amount": Decimal(nothing)}, deadline_ms=1000)
    with pytest.raises(ValueError, match="past the range of a double"):  # which the engine refuses to keep
        client.start_workflow("d", app="a", input={"amount": Decimal("-1E+400")}, deadline_ms=1000)
    assert len(server.bodies) == 1


@pytest.mark.parametrize(("option", "value"), [("retries", 0), ("retries", -1), ("timeout", 0), ("timeout", -5.0)])
def test_sdk_refuses_a_retry_count_or_timeout_that_cannot_serve(option, value):
    """retries is the number of tries of a call, the first included: 0 quietly made one try all the same; a timeout of
    0 made every call fail with "Operation now in progress" after five tries, as if the server were down."""
    with pytest.raises(ValueError, match=option):
        sdk.WeaveClient("http://127.0.0.1:8080", "wv_x", "acme", **{option: value})
