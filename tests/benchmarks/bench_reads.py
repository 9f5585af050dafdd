"""Rows read by every read path against a long history: each listing, page, get, status figure, metric and
console page, with the same live work beside a small and a large settled history (R-11). A read that answers
a page or a figure of live work must read as much beside 300,000 settled instances as beside none.

    python -m tests.benchmarks.bench_reads [--history 300000]

Rows read are the session's Handler_read_* deltas of the connection that serves the read (every index entry or
row the storage engine handed up), for the routine behind the path, its HTTP request, its console page and its
CLI command alike; one JSON line per path with both figures.
"""

from __future__ import annotations

import argparse
import contextlib
import io
from collections.abc import Callable, Iterator
from typing import Any

import pymysql
from falcon import testing

import orchestrator.example_handlers  # noqa: F401 - registers example.poll
from api.app import create_app
from api.http import Connections
from orchestrator import cli
from orchestrator.loop import Orchestrator
from procedures import db as dbmod
from procedures import routines, signals
from tests.benchmarks.bench_backlog import handler_reads
from tests.benchmarks.common import figure, fresh_database
from tests.support import history
from tests.support import signals as signal_support
from tests.support.db import Db, reset
from tests.support.world import World

TIMER = {"name": "order-timer", "steps": [{"key": "wait", "type": "TIMER", "delay_ms": 3_600_000}]}
SHORT = {"name": "order-short", "steps": [{"key": "wait", "type": "TIMER", "delay_ms": 30_000},
                                         {"key": "then", "type": "TIMER", "delay_ms": 30_000, "after": ["wait"]}]}
SIGNAL = signal_support.signal_flow("order-signal", timeout_ms=60_000)
POLL = {"name": "order-poll", "steps": [{
    "key": "check", "type": "POLL", "queue": "payments", "handler": "example.poll", "handler_version": "1",
    "input": {"n": "$.input.n", "done_at": 3}, "interval_ms": 1000, "max_rounds": 3, "timeout_ms": 3_600_000,
    "task_timeout_ms": 600_000, "result": {"pending": ["PENDING"], "success": ["DONE"]}}]}


class Live:
    """The live work both histories sit beside: running timers (some paused, some with a deferred check), signal
    waits (some accepted signals, some timed out into review), polls with their first round queued."""

    def __init__(self, db: Db, world: World, orch: Orchestrator):
        self.world = world
        for flow in (TIMER, SHORT, SIGNAL, POLL):
            world.publish(flow)
        self.timers = [world.start("order-timer", business_key=f"live-{i}") for i in range(30)]
        for wf in self.timers[:5]:
            routines.instance_pause(db.conn, world.token, world.namespace, wf, "hold", f"pause-{wf}")
        self.deferred = [world.start("order-short") for _ in range(2)]
        for wf in self.deferred:
            routines.instance_pause(db.conn, world.token, world.namespace, wf, "hold", f"pause-{wf}")
        self.signalled = [world.start("order-signal", {"order_id": f"o-{i}"}) for i in range(10)]
        for i, wf in enumerate(self.signalled[5:]):
            signal_support.send(world, wf, correlation_key=f"o-{i + 5}", payload='{"approved": false}')
        self.polls = [world.start("order-poll", {"n": i}) for i in range(3)]
        orch.drain()
        db.advance(61_000)  # the first five signal waits time out (review); the short timers fall due (deferred)
        orch.drain()
        self.review = self.signalled[:5]
        self.long = self.timers[29]  # an instance with a long history of its own: 600 more events
        for i in range(300):
            routines.instance_pause(db.conn, world.token, world.namespace, self.long, "hold", f"long-p-{i}")
            routines.instance_resume(db.conn, world.token, world.namespace, self.long, "go on", f"long-r-{i}")
        self.one_signal = db.scalar("SELECT CONCAT('sig_', MIN(id)) FROM weave_signals WHERE instance_id = %s",
                                    int(self.signalled[5].removeprefix("wf_")))
        assert world.instance(self.review[0])["status"] == "NEEDS_REVIEW"


def routine_paths(live: Live) -> dict[str, Callable[[pymysql.Connection], Any]]:
    w = live.world
    t, ns = w.token, w.namespace

    def listing(**kw: Any) -> Callable[[pymysql.Connection], Any]:
        return lambda c: routines.instance_list(c, t, ns, **kw)

    deep = {"cursor": str(history.RESERVED // 2)}  # a page token deep into the settled history
    return {
        "list (newest first)": listing(),
        "list deep page": listing(**deep),
        "list status=RUNNING": listing(status="RUNNING"),
        "list status=NEEDS_REVIEW": listing(status="NEEDS_REVIEW"),
        "list status=SUCCEEDED deep page": listing(status="SUCCEEDED", **deep),
        "list definition=order-timer": listing(definition="order-timer"),
        "list definition=order-timer deep page": listing(definition="order-timer", **deep),
        "list business_key (live)": listing(business_key="live-3"),
        "list business_key (settled)": listing(business_key="order-7"),
        "list control=PAUSED": listing(control="PAUSED"),
        "list review_code=SIGNAL_TIMEOUT": listing(review_code="SIGNAL_TIMEOUT"),
        "list deferred": listing(deferred=True),
        "review queue": lambda c: routines.review_queue(c, t, ns, limit=200),
        "list status=RUNNING definition=order-poll": listing(status="RUNNING", definition="order-poll"),
        "list status=CANCELLED definition=order-poll": listing(status="CANCELLED", definition="order-poll"),
        "list definition=order-poll, page of 10": listing(definition="order-poll", limit=10),
        "instance get": lambda c: routines.instance_get(c, t, ns, live.timers[7]),
        "instance get (settled)": lambda c: routines.instance_get(c, t, ns, "wf_7"),
        "events (settled)": lambda c: routines.instance_events(c, t, ns, "wf_7", 0, 100),
        "events first page": lambda c: routines.instance_events(c, t, ns, live.polls[0], 0, 100),
        "events later page": lambda c: routines.instance_events(c, t, ns, live.polls[0], 2, 100),
        "events of 600, first page": lambda c: routines.instance_events(c, t, ns, live.long, 0, 100),
        "events of 600, page after 500": lambda c: routines.instance_events(c, t, ns, live.long, 500, 100),
        "signals list": lambda c: signals.list_signals(c, t, ns, live.signalled[5]),
        "signals list status=CONSUMED": lambda c: signals.list_signals(c, t, ns, live.signalled[5], status="CONSUMED"),
        "signal get": lambda c: signals.get(c, t, ns, live.signalled[5], live.one_signal),
        "explain": lambda c: signals.explain(c, t, ns, live.signalled[0], "approval"),
        "apps list": lambda c: routines.app_list(c, w.admin, ns),
        "queues list": lambda c: routines.queue_list(c, w.admin, ns),
        "credentials list": lambda c: routines.credential_list(c, w.admin, ns),
        "definitions list": lambda c: routines.definition_list(c, t, ns),
        "definition get": lambda c: routines.definition_get(c, t, ns, "order-poll", None),
        "status (weave_status)": lambda c: routines.status(c),
        "metrics (weave_metrics)": lambda c: routines.engine_metrics(c),
    }


def http_paths(live: Live, cookies: dict) -> dict[str, tuple[str, dict]]:
    w = live.world
    auth = {"headers": {"Authorization": f"Bearer {w.token}"}}
    v1 = f"/v1/namespaces/{w.namespace}"
    page = {"cookies": cookies}
    return {
        "GET /workflows": (f"{v1}/workflows", auth),
        "GET /workflows?status=NEEDS_REVIEW": (f"{v1}/workflows?status=NEEDS_REVIEW", auth),
        "GET /workflows?control=PAUSED": (f"{v1}/workflows?control=PAUSED", auth),
        "GET /workflows?cursor=deep": (f"{v1}/workflows?cursor={history.RESERVED // 2}", auth),
        "GET /workflows?definition=": (f"{v1}/workflows?definition=order-poll", auth),
        "GET /workflows?status=CANCELLED&definition=": (f"{v1}/workflows?status=CANCELLED&definition=order-short",
                                                         auth),
        "GET /workflows?review_code=": (f"{v1}/workflows?review_code=SIGNAL_TIMEOUT", auth),
        "GET /workflows?deferred=true": (f"{v1}/workflows?deferred=true", auth),
        "GET /workflows/{id}": (f"{v1}/workflows/{live.timers[7]}", auth),
        "GET /workflows/{id}/events": (f"{v1}/workflows/{live.polls[0]}/events", auth),
        "GET /workflows/{id}/signals": (f"{v1}/workflows/{live.signalled[5]}/signals", auth),
        "GET /workflows/{id}/signals/{sid}": (f"{v1}/workflows/{live.signalled[5]}/signals/{live.one_signal}", auth),
        "GET /readyz": ("/readyz", {}),
        "GET /metrics": ("/metrics", {}),
        "console dashboard": ("/console", page),
        "console instances": ("/console/instances", page),
        "console instances in review": ("/console/instances?in_review=1", page),
        "console instances control=PAUSED": ("/console/instances?control=PAUSED", page),
        "console instances review_code": ("/console/instances?review_code=SIGNAL_TIMEOUT", page),
        "console instances deferred": ("/console/instances?deferred=1", page),
        "console instances status+definition": ("/console/instances?status=CANCELLED&definition=order-short", page),
        "console review queue": ("/console/review", page),
        "console instance page": (f"/console/instances/{live.signalled[0]}", page),
    }


def cli_commands(live: Live) -> dict[str, list[str]]:
    w = live.world
    read = ["--namespace", w.namespace, "--token", w.token]
    admin = ["--namespace", w.namespace, "--token", w.admin]
    return {
        "weave workflows list": ["workflows", "list", *read],
        "weave workflows list --status NEEDS_REVIEW": ["workflows", "list", "--status", "NEEDS_REVIEW", *read],
        "weave workflows list --cursor deep": ["workflows", "list", "--cursor", str(history.RESERVED // 2), *read],
        "weave workflows review": ["workflows", "review", *read],
        "weave workflows show": ["workflows", "show", live.timers[7], *read],
        "weave workflows events": ["workflows", "events", live.polls[0], *read],
        "weave workflows explain": ["workflows", "explain", live.signalled[0], "approval", *read],
        "weave signals get": ["signals", "get", live.signalled[5], live.one_signal, *read],
        "weave apps list": ["apps", "list", *admin],
        "weave queues list": ["queues", "list", *admin],
        "weave credentials list": ["credentials", "list", *admin],
        "weave definitions list": ["definitions", "list", *read],
        "weave definitions show": ["definitions", "show", "order-poll", *read],
        "weave workflows list --status --definition": ["workflows", "list", "--status", "CANCELLED", "--definition",
                                                       "order-short", *read],
        "weave status": ["status"],
        "weave status --check (every invariant)": ["status", "--check"],
    }


def reads_of(conn: pymysql.Connection, run: Callable[[], Any]) -> int:
    """The least of three runs after a warm one (the routine parsed and its tables open, as in a running server; a
    table the server reopens reads its statistics once, into the session's counters)."""
    run()
    runs = []
    for _ in range(3):
        before = handler_reads(conn)
        run()
        runs.append(handler_reads(conn) - before)
    return min(runs)


@contextlib.contextmanager
def cli_reads() -> Iterator[list[int]]:
    """Rows read by the connections a CLI command opens, read from each just before it closes."""
    found: list[int] = []
    original = pymysql.connect

    class Counted(pymysql.connections.Connection):
        def close(self) -> None:  # noqa: D401
            with contextlib.suppress(Exception):
                found.append(handler_reads(self) - self._weave_reads_at_open)  # type: ignore[attr-defined]
            super().close()

        def connect(self, sock: Any = None) -> None:
            super().connect(sock)
            self._weave_reads_at_open = handler_reads(self)

    pymysql.connect = lambda *a, **k: Counted(*a, **k)  # type: ignore[assignment]
    try:
        yield found
    finally:
        pymysql.connect = original  # type: ignore[assignment]


def run_cli(dsn: dbmod.Dsn, argv: list[str]) -> int:
    url = f"mysql://{dsn.user}:{dsn.password}@{dsn.host}:{dsn.port}/{dsn.database}"
    with cli_reads() as found, contextlib.redirect_stdout(io.StringIO()):
        code = cli.main([*argv, "--dsn", url])
    assert code == 0 or "--check" in argv, (argv, code)  # --check exits 1 on a broken invariant (the copies')
    return sum(found)


def measure(dsn: dbmod.Dsn, db: Db, live: Live, client: testing.TestClient, connections: Connections,
            cookies: dict) -> dict[str, int]:
    out = {}
    conn = db.conn
    for name, read in routine_paths(live).items():
        out[name] = reads_of(conn, lambda read=read: read(conn))
    for name, (url, kw) in http_paths(live, cookies).items():
        def get(url: str = url, kw: dict = kw) -> None:
            result = client.simulate_get(url, **kw)
            assert result.status_code == 200, (url, result.status_code, result.text[:300])
        get()
        api_conn = connections.get()
        out[name] = reads_of(api_conn, get)
    for name, argv in cli_commands(live).items():
        run_cli(dsn, argv)
        out[name] = min(run_cli(dsn, argv) for _ in range(3))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--history", type=int, default=300_000, help="settled instances of the large history")
    parser.add_argument("--small", type=int, default=300, help="settled instances of the small history")
    args = parser.parse_args()
    dsn = fresh_database("weave_bench_reads")
    db = Db(dsn)
    reset(db.conn)
    history.reserve(db)
    world = World.create(db, quota=1_000_000, capacity=1_000_000)
    orch = Orchestrator(dsn, concurrency=1, spread=False)
    live = Live(db, world, orch)
    owner = history.Owner.of(db, world.namespace, world.app, world.queue, ("order-timer", "order-signal", "order-poll"))
    history.add_history(db, owner, 1, args.small)
    history.refold(db)  # the history's rows in the sums of /metrics, as a running install's would be
    connections = Connections(dsn)
    client = testing.TestClient(create_app(connections))
    from tests.console.conftest import sign_in
    cookies = sign_in(client, world.token, world.namespace)
    small = measure(dsn, db, live, client, connections, cookies)
    history.add_history(db, owner, args.small + 1, args.history - args.small)
    history.refold(db)
    large = measure(dsn, db, live, client, connections, cookies)
    for name in small:
        figure("rows read vs history", path=name, small_history=args.small, small=small[name],
               large_history=args.history, large=large[name])
    orch.close()
    connections.discard()
    db.close()


if __name__ == "__main__":
    main()
