"""Read paths against a long history (R-11, C-3): the rows a read makes the server read do not depend on how many
settled instances sit beside the live work it answers. Each read is measured beside a history of 1,000 settled
instances and again beside 20,000 (tests/support/history.py: instances with their steps, waits, events, audit rows,
signals, tasks and rounds); a read that walked the history reads thousands more the second time. Rows read are the
session's Handler_read_* deltas, the least of three runs (a table the server reopens reads its statistics once,
into the session's counters). `python -m tests.benchmarks.bench_reads` measures every read path the same way
beside 300,000."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from procedures import routines
from tests.benchmarks.bench_reads import reads_of as reads
from tests.support import history
from tests.support import signals as signal_support

TIMER = {"name": "order-timer", "steps": [{"key": "wait", "type": "TIMER", "delay_ms": 3_600_000}]}
SHORT = {"name": "order-short", "steps": [{"key": "wait", "type": "TIMER", "delay_ms": 30_000},
                                         {"key": "then", "type": "TIMER", "delay_ms": 30_000, "after": ["wait"]}]}
SIGNAL = signal_support.signal_flow("order-signal", timeout_ms=60_000)
QUIET = {**TIMER, "name": "order-quiet"}  # no history
DEFINITIONS = ("order-timer", "order-signal", "order-short")
SLACK = 4  # reads a reopened table's statistics may add; a read that walks the history adds thousands


@pytest.fixture
def live(world, orch):
    """Live work beside the history: running timers (two paused), two paused instances whose check is deferred,
    signal waits timed out into review."""
    history.reserve(world.db)
    for flow in (TIMER, SHORT, SIGNAL, QUIET):
        world.publish(flow)
    world.start("order-quiet")
    timers = [world.start("order-timer", business_key=f"live-{i}") for i in range(6)]
    paused = timers[:2] + [world.start("order-short") for _ in range(2)]
    for wf in paused:
        routines.instance_pause(world.db.conn, world.token, world.namespace, wf, "hold", f"pause-{wf}")
    review = [world.start("order-signal", {"order_id": f"o-{i}"}) for i in range(3)]
    orch.drain()
    world.db.advance(61_000)  # the signal waits time out into review; the short timers fall due, deferred (paused)
    orch.drain()
    owner = history.Owner.of(world.db, world.namespace, world.app, world.queue, DEFINITIONS)
    yield {"timers": timers, "paused": paused, "deferred": paused[2:], "review": review, "owner": owner}
    history.remove_history(world.db)


def test_R11_C3_every_instance_list_filter_and_page_reads_as_much_beside_a_long_history(world, live):
    conn, token, ns = world.db.conn, world.token, world.namespace
    deep = str(history.RESERVED // 2)  # a cursor deep into the settled history
    lists: dict[str, dict] = {
        "newest first": {}, "deep page": {"cursor": deep}, "status RUNNING": {"status": "RUNNING"},
        "status NEEDS_REVIEW": {"status": "NEEDS_REVIEW"}, "status SUCCEEDED deep": {"status": "SUCCEEDED",
                                                                                  "cursor": deep},
        "business key": {"business_key": "live-3"},
        # A definition alone merges the newest page of each of its statuses: pages of 10, which each status of the
        # smaller history fills already (13 CANCELLED instances of each definition), so that both read full pages.
        "definition": {"definition": "order-signal", "limit": 10},
        "definition page": {"definition": "order-timer", "limit": 10},
        "definition and status": {"definition": "order-timer", "status": "CANCELLED", "limit": 10},
        "definition and status, none": {"definition": "order-quiet", "status": "CANCELLED"},
        "definition and ACTIVE deep": {"definition": "order-timer", "control": "ACTIVE", "cursor": deep,
                                       "limit": 10},
        "control PAUSED": {"control": "PAUSED"}, "control ACTIVE deep": {"control": "ACTIVE", "cursor": deep},
        "review code": {"review_code": "SIGNAL_TIMEOUT"}, "deferred": {"deferred": True},
        "review code and status": {"review_code": "SIGNAL_TIMEOUT", "status": "NEEDS_REVIEW"},
        "paused and running": {"control": "PAUSED", "status": "RUNNING"},
    }

    def listed(filters: dict) -> list[str]:
        return [i["workflow_id"] for i in routines.instance_list(conn, token, ns, **filters)["items"]]

    def measured() -> dict[str, int]:
        return {name: reads(conn, lambda f=filters: routines.instance_list(conn, token, ns, **f))
                for name, filters in lists.items()}

    history.add_history(world.db, live["owner"], 1, 1_000)
    small = measured()
    answers = {name: listed(filters) for name, filters in lists.items()}
    history.add_history(world.db, live["owner"], 1_001, 19_000)
    large = measured()
    grew = {name: (small[name], large[name]) for name in lists if large[name] > small[name] + SLACK}
    assert not grew, grew
    # The same answers: every filter still finds exactly the live instances it found.
    assert answers["control PAUSED"] == sorted(live["paused"], reverse=True) == listed(lists["control PAUSED"])
    assert answers["review code"] == sorted(live["review"], reverse=True) == listed(lists["review code"])
    assert answers["deferred"] == sorted(live["deferred"], reverse=True) == listed(lists["deferred"])
    assert answers["paused and running"] == sorted(live["paused"], reverse=True)
    assert answers["business key"] == [live["timers"][3]]
    assert len(listed(lists["control ACTIVE deep"])) == 50 and len(listed(lists["status SUCCEEDED deep"])) == 50
    timers = answers["definition page"]
    assert timers[:6] == sorted(live["timers"], reverse=True) and len(timers) == 10
    assert answers["definition"][:3] == sorted(live["review"], reverse=True) and len(answers["definition"]) == 10
    assert answers["definition and status, none"] == []
    cancelled = listed(lists["definition and status"])  # the newest CANCELLED ones of the history: every 75th
    assert cancelled == [f"wf_{n}" for n in range(19_950, 19_200, -75)]


def test_C3_pages_neither_skip_nor_repeat_while_instances_start_and_pause_between_them(world, orch):
    """Keyset pages newest first: an instance started between two pages is newer than every page after the first
    one, so it never shows in them, and every instance there when the first page was read shows exactly once, in
    id order, whichever range the filter reads (the namespace, the PAUSED range, the open reasons of a code)."""
    for flow in (TIMER, SIGNAL):
        world.publish(flow)
    timers = [world.start("order-timer") for _ in range(7)]
    review = [world.start("order-signal", {"order_id": f"o-{i}"}) for i in range(5)]
    orch.drain()
    world.db.advance(61_000)
    orch.drain()
    waiting = [world.start("order-signal", {"order_id": f"w-{i}"}) for i in range(3)]
    signal_support.send(world, waiting[1], correlation_key="w-1")  # SUCCEEDED: the definition in three statuses
    for wf in timers[::2]:
        routines.instance_pause(world.db.conn, world.token, world.namespace, wf, "hold", f"pause-{wf}")
    conn, token, ns = world.db.conn, world.token, world.namespace

    def at_once(filters: dict) -> list[str]:
        return [i["workflow_id"] for i in routines.instance_list(conn, token, ns, limit=500, **filters)["items"]]

    def walk(filters: dict) -> list[str]:
        seen, cursor = [], None
        while True:
            page = routines.instance_list(conn, token, ns, limit=2, cursor=cursor, **filters)
            seen += [i["workflow_id"] for i in page["items"]]
            wf = world.start("order-timer")  # a newer instance between every two pages
            routines.instance_pause(conn, token, ns, wf, "hold", f"pause-{wf}")
            cursor = page["next_cursor"]
            if cursor is None:
                return seen

    newest_first = sorted(timers + review + waiting, key=lambda w: int(w.removeprefix("wf_")), reverse=True)
    assert at_once({}) == newest_first
    assert walk({}) == newest_first
    paused = at_once({"control": "PAUSED"})  # those of the first walk's pages too
    assert set(timers[::2]) < set(paused) and walk({"control": "PAUSED"}) == paused
    assert walk({"review_code": "SIGNAL_TIMEOUT"}) == [w for w in newest_first if w in review]
    assert walk({"definition": "order-signal"}) == [w for w in newest_first if w in review + waiting]


def test_R11_status_and_the_reads_of_one_instance_read_as_much_beside_a_long_history(world, live):
    """weave_status (the console's dashboard, /metrics' live figures, `weave status`), /metrics' counters (once the
    history is folded into their sums), one instance with its events, signals and explanation, the namespace's
    listings, and the review queue. The history here keeps a review reason open on every cancelled instance, as one
    opened while the instance was CANCELLING stays open: the review counts and the queue of live work must not read
    them."""
    from procedures import signals

    conn, token, ns, admin = world.db.conn, world.token, world.namespace, world.admin
    wf = live["review"][0]
    signal_support.send(world, wf, correlation_key="o-0")  # stored REJECTED: the step is in review
    signal = world.db.scalar("SELECT CONCAT('sig_', MAX(id)) FROM weave_signals WHERE instance_id = %s",
                             world.internal_id(wf))
    paths: dict[str, Callable[[], Any]] = {
        "status": lambda: routines.status(conn),
        "instance": lambda: routines.instance_get(conn, token, ns, wf),
        "events": lambda: routines.instance_events(conn, token, ns, wf, 0, 100),
        "later events": lambda: routines.instance_events(conn, token, ns, wf, 2, 100),
        "signals": lambda: signals.list_signals(conn, token, ns, wf),
        "signal": lambda: signals.get(conn, token, ns, wf, signal),
        "explain": lambda: signals.explain(conn, token, ns, wf, "approval"),
        "apps": lambda: routines.app_list(conn, admin, ns),
        "queues": lambda: routines.queue_list(conn, admin, ns),
        "credentials": lambda: routines.credential_list(conn, admin, ns),
        "definitions": lambda: routines.definition_list(conn, token, ns),
        "definition": lambda: routines.definition_get(conn, token, ns, "order-signal", None),
        "metrics": lambda: routines.engine_metrics(conn),  # its fold, then its read
        "review queue": lambda: routines.review_queue(conn, token, ns),
    }

    def measured() -> dict[str, int]:
        return {name: reads(conn, read) for name, read in paths.items()}

    def kept_open() -> None:  # every reason of the history's cancelled instances left open
        world.db.execute("UPDATE weave_review_reasons SET closed_at = NULL, closed_by = NULL WHERE instance_id < %s",
                         history.RESERVED)

    history.add_history(world.db, live["owner"], 1, 1_000)
    kept_open()
    history.refold(world.db)
    small = measured()
    history.add_history(world.db, live["owner"], 1_001, 19_000)
    kept_open()
    history.refold(world.db)
    large = measured()
    grew = {name: (small[name], large[name]) for name in paths if large[name] > small[name] + SLACK}
    assert not grew, grew
    from tests.sql.test_metrics_fold import counted

    assert routines.engine_metrics(conn) == counted(world.db)  # the history counted, and not read
    figures = routines.status(conn)
    assert (figures["instances_in_review"], figures["open_review_reasons"]) == (3, 3)
    assert [i["workflow_id"] for i in routines.review_queue(conn, token, ns)["items"]] == live["review"]
    assert world.db.scalar("SELECT COUNT(*) FROM weave_review_reasons WHERE closed_at IS NULL") == 3 + 800
