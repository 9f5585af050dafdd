"""Clients that stop sending in the middle of a request, or send it a byte at a time, against a real `weave api`
process (gunicorn): each wait on a client is bounded by WEAVE_API_CLIENT_TIMEOUT_S, and the whole of a request's
arrival by WEAVE_API_REQUEST_READ_TIMEOUT_S, so a few half-sent or dripping requests, no token needed, cannot hold
every serving thread of the API and leave /healthz unanswered."""

from __future__ import annotations

import json
import socket
import threading
import urllib.request

import pytest
from gunicorn.config import Config

from api.http import RequestTimeout
from api.server import ClientTimedConnection, ProgressSocket, RequestReads
from tests.support.processes import start_api
from tests.support.waiting import wait_for

HALF_SENT = [
    b"GET /healthz HTTP/1.1\r\nHost: weave\r\n",  # headers that never end
    b"POST /v1/namespaces/acme/workflows/wf_1/pause HTTP/1.1\r\nHost: weave\r\nAuthorization: Bearer anything\r\n"
    b"Content-Type: application/json\r\nIdempotency-Key: k\r\nContent-Length: 1000\r\n\r\n{",  # a body that stops
]


@pytest.fixture
def api(database, tmp_path):
    proc, url = start_api(database, tmp_path / "api.log", workers=1, args=("--threads", "2"),
                          env={"WEAVE_API_CLIENT_TIMEOUT_S": "1"})
    yield url
    proc.terminate()
    proc.close()


def test_Z3_clients_that_stop_sending_mid_request_cannot_hold_every_serving_thread(api, world, tmp_path):
    port = int(api.rsplit(":", 1)[1])
    stalled = []
    for head in HALF_SENT * 2:  # more of them than the API has serving threads
        conn = socket.create_connection(("127.0.0.1", port))
        conn.sendall(head)
        stalled.append(conn)
    try:
        # Answered at all: with every serving thread held by a stalled client, /healthz would not be.
        with urllib.request.urlopen(f"{api}/healthz", timeout=10) as answer:
            assert json.loads(answer.read()) == {"status": "ok"}
        answers = []
        for conn in stalled:
            conn.settimeout(10)
            answers.append(conn.recv(65536))  # b"" once dropped, or the answer to a body that stopped
    finally:
        for conn in stalled:
            conn.close()
    for answer in answers[1::2]:  # the stopped bodies: a problem, never a 500
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 400"), answer
        assert json.loads(body)["code"] == "BAD_REQUEST"
    assert all(a == b"" for a in answers[0::2])  # the unfinished headers: the connection is closed
    log = (tmp_path / "api.log").read_text()
    assert "dropped a client that sent or read nothing for 1.0 s" in log and "Traceback" not in log  # a line each


class _CountedParts(ProgressSocket):
    """A worker's client socket that notes the size of each part of an answer it sends."""

    __slots__ = ()
    parts: list[int] = []

    def send(self, data, flags: int = 0) -> int:
        sent = super().send(data, flags)
        _CountedParts.parts.append(sent)
        return sent


def _answer_to(reader_reads: bool, answer: bytes) -> tuple[bool, int]:
    """Sends ``answer`` on a client connection of the API's worker to a client that reads all of it (or reads
    nothing): (sent whole, bytes the client received)."""
    ours, theirs = socket.socketpair()
    conn = ClientTimedConnection(Config(), ours, ("127.0.0.1", 1), ("127.0.0.1", 2))
    conn.init()
    assert type(conn.sock) is ProgressSocket  # the worker's client sockets send an answer part by part
    conn.sock.__class__ = _CountedParts
    _CountedParts.parts = []
    received = bytearray()

    def read() -> None:
        while reader_reads and (part := theirs.recv(65536)):
            received.extend(part)

    reader = threading.Thread(target=read)
    reader.start()
    try:
        conn.sock.sendall(answer)
        sent = True
    except TimeoutError:
        sent = False
    finally:
        ours.close()
        reader.join()
        theirs.close()
    return sent, len(received)


def test_Z3_a_client_that_reads_a_large_answer_slowly_but_steadily_gets_all_of_it(monkeypatch):
    """The limit is on a client that reads nothing for that long, not on the time a whole answer takes: a page of
    signals of 8 MiB read at a few hundred KiB a second was cut off after its first MiB or so, the client dropped
    with a log line saying it read nothing, and the access log showing the answer as sent whole (socket.sendall
    bounds the whole call by the timeout). The answer now leaves in parts, each one send that waits at most the
    timeout, so a client that keeps reading gets all of it however long the whole takes."""
    monkeypatch.setattr(ClientTimedConnection, "client_timeout", 0.5)
    answer = b"x" * 6_000_000
    sent, received = _answer_to(True, answer)
    assert (sent, received) == (True, len(answer))
    assert len(_CountedParts.parts) > 1 and sum(_CountedParts.parts) == len(answer)  # part by part
    sent, received = _answer_to(False, answer)
    assert (sent, received) == (False, 0)  # a client that reads nothing is still dropped


@pytest.fixture
def drip_api(database, tmp_path):
    proc, url = start_api(database, tmp_path / "api.log", workers=1, args=("--threads", "2"),
                          env={"WEAVE_API_CLIENT_TIMEOUT_S": "1", "WEAVE_API_REQUEST_READ_TIMEOUT_S": "2"})
    yield url
    proc.terminate()
    proc.close()


def _drip(conn: socket.socket, closed: list[socket.socket], stop: threading.Event) -> None:
    """Sends a header byte every 0.25 s (four times as often as the API's 1 s limit on each read) until the API
    closes the connection, or 200 bytes (50 s) have gone; the wait for the API's close paces the bytes."""
    conn.settimeout(0.25)
    for _ in range(200):
        if stop.is_set():
            return
        try:
            if conn.recv(1) == b"":
                closed.append(conn)
                return
        except TimeoutError:
            pass
        except OSError:  # reset by the API
            closed.append(conn)
            return
        try:
            conn.sendall(b"a")
        except OSError:
            closed.append(conn)
            return


def test_Z3_clients_that_drip_a_request_more_often_than_the_read_limit_are_dropped_when_its_time_runs_out(
        drip_api, world, tmp_path):
    """Each read of a request waits at most WEAVE_API_CLIENT_TIMEOUT_S, which ends a client that stops sending but
    not one that sends a byte of a header every few seconds: 20 such connections held every serving thread, and
    /healthz was not answered, for as long as they went on. The whole request must now arrive within
    WEAVE_API_REQUEST_READ_TIMEOUT_S of its first byte."""
    port = int(drip_api.rsplit(":", 1)[1])
    stop, closed, drips = threading.Event(), [], []
    conns = [socket.create_connection(("127.0.0.1", port)) for _ in range(4)]  # twice the API's serving threads
    try:
        for conn in conns:
            conn.sendall(b"GET /healthz HTTP/1.1\r\nHost: weave\r\nX-A: ")
            drips.append(threading.Thread(target=_drip, args=(conn, closed, stop)))
            drips[-1].start()
        # Answered while the drips go on: each held a serving thread only until its request's time ran out.
        with urllib.request.urlopen(f"{drip_api}/healthz", timeout=20) as answer:
            assert json.loads(answer.read()) == {"status": "ok"}
        assert wait_for(lambda: len(closed) == len(conns), timeout=20), f"{len(closed)} of {len(conns)} dropped"
    finally:
        stop.set()
        for drip in drips:
            drip.join()
        for conn in conns:
            conn.close()
    log = (tmp_path / "api.log").read_text()
    assert "dropped a client whose request had not arrived whole 2.0 s after it began" in log
    assert "Traceback" not in log


def test_Z3_the_time_for_a_request_starts_again_with_each_request_of_a_kept_alive_connection(monkeypatch):
    """The deadline is a request's, not the connection's: a kept-alive connection serves request after request,
    however long it stays open, while a request still arriving when its own time has run out is cut off, in its
    headers or in its body. The clock is the test's, so no time passes."""
    now = [0.0]
    monkeypatch.setattr(RequestReads, "clock", staticmethod(lambda: now[0]))
    monkeypatch.setattr(ClientTimedConnection, "request_timeout", 5.0)
    pairs = [socket.socketpair() for _ in range(2)]
    kept, cut = (ClientTimedConnection(Config(), ours, ("127.0.0.1", 1), ("127.0.0.1", 2)) for ours, _ in pairs)
    (_, kept_client), (_, cut_client) = pairs
    try:
        for _ in range(3):
            kept.init()  # as the serving thread does before each request
            kept_client.sendall(b"GET /healthz HTTP/1.1\r\nHost: weave\r\n\r\n")
            assert next(kept.parser).path == "/healthz"
            now[0] += 3_600  # an hour later, long past the time of the request before
        kept.init()
        kept_client.sendall(b"POST /v1/x HTTP/1.1\r\nHost: weave\r\nContent-Length: 10\r\n\r\n{")
        request = next(kept.parser)
        now[0] += 5
        with pytest.raises(RequestTimeout):
            request.body.read(10)  # the rest of the body would still arrive, too late
        cut.init()
        cut_client.sendall(b"GET /healthz HTTP/1.1\r\nHost: weave\r\nX-A: ")
        now[0] += 5
        with pytest.raises(RequestTimeout):
            next(cut.parser)
    finally:
        for pair in pairs:
            for end in pair:
                end.close()
