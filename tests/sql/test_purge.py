"""History retention (weave_instances_purge): settled instances go with every row that is theirs, a window at a
time, each window one audited transaction (R-1, R-4); nothing that is open, running or another namespace's goes,
and the M-4 invariants hold after every scenario."""

from __future__ import annotations

import datetime as dt
import json
import re
import threading

import pytest

from procedures import db, errors, history, pulse, routines
from procedures.installer import PROCEDURES_DIR
from tests.benchmarks.bench_backlog import handler_reads
from tests.support.signals import send, signal_flow
from tests.support.threads import run_threads

HOUR = 3_600_000
RETRY = {"max_attempts": 3, "initial_backoff_ms": 1_000, "backoff_coefficient": 2.0, "max_backoff_ms": 60_000}
RICH = {"name": "rich", "steps": [
    {"key": "cool", "type": "TIMER", "delay_ms": 1_000},
    {"key": "approval", "type": "SIGNAL", "after": ["cool"], "correlation": "$.input.order_id", "timeout_ms": HOUR,
     "signal": {"name": "approval.decided", "payload_version": "1", "payload_type": "object"}},
    {"key": "charge", "type": "TASK", "after": ["approval"], "queue": "payments", "handler": "example.echo",
     "handler_version": "1", "input": {"order": "$.input.order_id"}, "retry": RETRY},
    {"key": "check", "type": "POLL", "after": ["charge"], "queue": "payments", "handler": "example.poll",
     "handler_version": "1", "input": {"order": "$.input.order_id"}, "interval_ms": 1_000, "max_rounds": 3,
     "timeout_ms": HOUR, "task_timeout_ms": 60_000, "retry": RETRY,
     "result": {"pending": ["PENDING"], "success": ["DONE"], "review": ["MANUAL_CHECK"]}}]}
TIMER = {"name": "wait", "steps": [{"key": "t", "type": "TIMER", "delay_ms": 60_000}]}
LONG = {"name": "long", "steps": [{"key": "t", "type": "TIMER", "delay_ms": 30 * 24 * HOUR}]}
# Every table that holds rows of an instance, and how to find them: by instance, or through the instance's tasks.
BY_INSTANCE = ("weave_steps", "weave_activations", "weave_waits", "weave_poll_states", "weave_poll_rounds",
               "pulse_tasks", "pulse_inbox", "weave_signals", "weave_pending_advances", "weave_review_reasons",
               "weave_events", "weave_audit")
BY_TASK = {"pulse_attempts": "task_id", "pulse_late_reports": "task_id",
           "pulse_permits": "task_id"}


def counted(world) -> None:
    """What a running install's /metrics scrapes do: the sums brought up to date, past rows two minutes old."""
    world.db.advance(121_000)
    assert routines.metrics_catch_up(world.db.conn)


def purge(world, before=None, *, token=None, namespace="acme", after=None, limit=100, reason="retention: 90 days",
          only=None, dry_run=False, fold=True) -> dict:
    if fold:
        counted(world)
    return routines.instances_purge(world.db.conn, token or world.admin, namespace,
                                    before if before is not None else world.db.now(), after=after, limit=limit,
                                    reason=reason, only=only, dry_run=dry_run)


def purge_all(world, before=None, **kw) -> tuple[int, list[dict]]:
    """A whole run: windows until the cursor says done. Answers the instances removed and every window's answer."""
    answers, after = [], None
    while True:
        answers.append(purge(world, before, after=after, **kw))
        after = answers[-1]["next_after"]
        if after is None:
            return sum(a["purged"] for a in answers), answers


def rows_of(world, workflow_id: str) -> dict[str, int]:
    """How many rows of each table belong to the instance (the instance's own row under weave_instances)."""
    iid = world.internal_id(workflow_id)
    counts = {t: world.db.scalar(f"SELECT COUNT(*) FROM {t} WHERE instance_id = %s", iid) for t in BY_INSTANCE}
    for table, column in BY_TASK.items():
        counts[table] = world.db.scalar(
            f"SELECT COUNT(*) FROM {table} x JOIN pulse_tasks t ON t.id = x.{column} WHERE t.instance_id = %s", iid)
    counts["weave_instances"] = world.db.scalar("SELECT COUNT(*) FROM weave_instances WHERE id = %s", iid)
    return counts


def claim(world, worker="w1", lease_ms=60_000) -> dict:
    got = pulse.task_claim(world.db.conn, worker, "payments", limit=1, lease_ms=lease_ms)
    assert len(got) == 1, "expected exactly one claimable task"
    return got[0]


def run_rich(world, orch, order: str) -> str:
    """An instance through every kind of row: a timer, a signal (and a late one, rejected), a task whose first
    attempt failed and then reported again (late), a poll of two rounds whose second
    went to review and was resolved; it ends SUCCEEDED."""
    wf = world.start("rich", {"order_id": order})
    world.db.advance(1_001)
    orch.drain()
    send(world, wf, correlation_key=order)
    orch.drain()
    first = claim(world, "w-first")
    pulse.attempt_fail(world.db.conn, first["attempt_id"], "w-first", "gateway timeout", retryable=True)
    world.db.advance(1_001)
    second = claim(world, "w1")
    pulse.attempt_complete(world.db.conn, second["attempt_id"], "w1", {"charged": True})
    # The first worker reports again, after its failure: stored as a late report, without effect.
    assert pulse.attempt_complete(world.db.conn, first["attempt_id"], "w-first", {})["outcome"] == "LATE"
    orch.drain()
    pulse.attempt_complete(world.db.conn, claim(world)["attempt_id"], "w1", {"status": "PENDING"})
    world.db.advance(1_001)
    orch.drain()
    pulse.attempt_complete(world.db.conn, claim(world)["attempt_id"], "w1", {"status": "MANUAL_CHECK"})
    orch.drain()
    assert world.instance(wf)["status"] == "NEEDS_REVIEW"
    routines.step_resolve(world.db.conn, world.token, "acme", wf, "check", "confirmed by phone", f"resolve-{order}",
                          output={"status": "DONE"})
    orch.drain()
    send(world, wf, correlation_key=order, key=f"late-{order}")  # settled instance: stored REJECTED
    assert world.instance(wf)["status"] == "SUCCEEDED"
    return wf


def test_R4_a_purge_removes_settled_instances_with_every_row_of_theirs_and_audits_the_window(world, orch):
    world.publish(RICH)
    world.publish(TIMER)
    done = run_rich(world, orch, "o-1")
    rows = rows_of(world, done)
    assert all(rows[t] > 0 for t in rows if t != "weave_pending_advances"), rows  # the scenario reached every table
    cancelled = world.start("wait")
    routines.instance_cancel(world.db.conn, world.token, "acme", cancelled, "customer withdrew", "c1")
    assert world.instance(cancelled)["status"] == "CANCELLED"
    rows_cancelled = rows_of(world, cancelled)
    running = world.start("wait")
    kept_rows = rows_of(world, running)
    world.db.advance(1_000)

    answer = purge(world, reason="retention: 90 days")
    assert answer == {"purged": 2, "workflow_ids": sorted([done, cancelled], key=world.internal_id),
                      "rows_deleted": sum(rows.values()) + sum(rows_cancelled.values()), "held": 0, "held_ids": [],
                      "uncounted": 0, "next_after": None}
    assert rows_of(world, done) == dict.fromkeys(rows, 0)
    assert set(rows_of(world, cancelled).values()) == {0}
    assert rows_of(world, running) == kept_rows  # a running instance is untouched
    with pytest.raises(errors.NotFound):
        world.instance(done)
    audit = world.db.row("SELECT instance_id, actor, reason, details FROM weave_audit WHERE action = 'instances.purge'")
    assert (audit["instance_id"], audit["actor"], audit["reason"]) == (0, "bootstrap", "retention: 90 days")
    ids = sorted([done, cancelled], key=world.internal_id)
    assert f'"workflow_ids": ["{ids[0]}", "{ids[1]}"]' in audit["details"]
    details = json.loads(audit["details"])  # counts as numbers, as the run's answer gives them
    assert (details["instances"], details["rows_deleted"]) == (2, answer["rows_deleted"])


def settled_timers(world, orch, n: int) -> list[str]:
    """``n`` instances of the one-timer flow, SUCCEEDED."""
    wfs = [world.start("wait") for _ in range(n)]
    world.db.advance(60_001)
    orch.drain()
    assert {world.instance(wf)["status"] for wf in wfs} == {"SUCCEEDED"}
    return wfs


def test_R1_a_run_goes_window_by_window_each_its_own_audited_transaction(world, orch):
    world.publish(TIMER)
    world.publish(LONG)
    first = settled_timers(world, orch, 3)
    running = world.start("long")  # inside the windows, not settled: read and kept
    second = settled_timers(world, orch, 2)
    world.db.advance(1_000)
    purged, answers = purge_all(world, limit=2)
    assert purged == 5
    assert [a["purged"] for a in answers] == [2, 1, 2, 0]  # the last window is empty: the run is done
    assert [a["next_after"] for a in answers] == [first[1], running, second[1], None]
    assert world.db.scalar("SELECT COUNT(*) FROM weave_audit WHERE action = 'instances.purge'") == 3
    assert world.db.rows("SELECT CONCAT('wf_', id) AS wf FROM weave_instances") == [{"wf": running}]


def test_R1_a_run_stops_at_the_first_window_created_after_the_cutoff(world, orch):
    world.publish(TIMER)
    old = settled_timers(world, orch, 2)
    cutoff = world.db.advance(1_000)
    world.db.advance(1_000)
    young = settled_timers(world, orch, 4)  # settled, but after the cutoff
    purged, answers = purge_all(world, cutoff, limit=2)
    assert purged == 2 and len(answers) == 2  # the window of young instances ends the run: no third call
    assert answers[-1]["purged"] == 0
    assert {world.instance(wf)["status"] for wf in young} == {"SUCCEEDED"}
    with pytest.raises(errors.NotFound):
        world.instance(old[0])


def test_M4_only_what_is_settled_before_the_cutoff_in_this_namespace_goes(world, orch):
    world.publish(TIMER)
    world.publish(LONG)
    world.publish({"name": "pay", "steps": [{"key": "charge", "type": "TASK", "queue": "payments",
                                              "handler": "example.echo", "handler_version": "1", "input": {}}]})
    old = settled_timers(world, orch, 1)[0]
    paused = world.start("long")
    routines.instance_pause(world.db.conn, world.token, "acme", paused, "hold", "p1")
    cancelling = world.start("pay")
    claim(world, lease_ms=HOUR)  # its task runs: cancel asks, the instance stays CANCELLING until the worker answers
    routines.instance_cancel(world.db.conn, world.token, "acme", cancelling, "withdrawn", "c1")
    assert world.instance(cancelling)["status"] == "CANCELLING"
    cutoff = world.db.advance(1_000)
    young = settled_timers(world, orch, 1)[0]
    other = type(world).create(world.db, "other")
    other.publish(TIMER)
    foreign = settled_timers(other, orch, 1)[0]
    world.db.advance(1_000)

    assert purge(world, cutoff)["purged"] == 1
    with pytest.raises(errors.NotFound):
        world.instance(old)
    assert world.instance(paused)["status"] == "RUNNING"
    assert world.instance(cancelling)["status"] == "CANCELLING"
    assert world.instance(young)["status"] == "SUCCEEDED"
    assert other.instance(foreign)["status"] == "SUCCEEDED"


def test_a_dry_run_names_what_would_go_and_changes_nothing(world, orch):
    world.publish(TIMER)
    settled_timers(world, orch, 3)
    counted(world)
    before = world.db.table_counts()
    dry = purge(world, dry_run=True, reason=None, fold=False)
    assert (dry["purged"], dry["rows_deleted"], dry["next_after"]) == (3, 0, None)
    assert world.db.table_counts() == before  # no row removed, no audit row
    assert purge(world)["purged"] == 3


@pytest.mark.parametrize("true", ["2", "-1", "TRUE"])
def test_a_dry_run_asked_with_any_true_value_of_sql_removes_nothing(world, orch, true):
    """A BOOLEAN parameter is a TINYINT: a SQL caller's true may be any non-zero value (-1 is TRUE to some drivers),
    and each of them is a dry run, never a purge."""
    world.publish(TIMER)
    settled_timers(world, orch, 2)
    counted(world)
    before = world.db.table_counts()
    with world.db.conn.cursor() as cur:
        cur.execute(f"CALL weave_instances_purge(%s, %s, %s, NULL, 100, 'looking only', NULL, {true})",
                    (world.admin, world.namespace, world.db.now()))
        dry = cur.fetchone()
        while cur.nextset():
            pass
    assert (dry["purged"], dry["rows_deleted"]) == (2, 0)
    assert world.db.table_counts() == before  # no row removed, no audit row


def test_a_purge_limited_to_named_instances_removes_only_those_the_window_holds(world, orch):
    """What an archive needs: a dry run names a window's instances, their rows are written away, and the purge
    removes exactly those (one that settled in between, or that the dry run found locked, waits for the next run)."""
    world.publish(TIMER)
    a, b, c = settled_timers(world, orch, 3)
    world.db.advance(1_000)
    assert purge(world, dry_run=True, reason=None)["workflow_ids"] == [a, b, c]
    answer = purge(world, only=[a, c, "wf_999999"])
    assert (answer["purged"], answer["workflow_ids"]) == (2, [a, c])
    assert world.instance(b)["status"] == "SUCCEEDED"
    with pytest.raises(errors.ValidationFailed, match="only must be a JSON array"):
        routines.instances_purge(world.db.conn, world.admin, "acme", world.db.now(), reason="r", only="wf_1")  # type: ignore[arg-type]


CHARGE = {"name": "charge", "steps": [RICH["steps"][2] | {"after": []}]}


def settled_after_a_retry(world, orch) -> tuple[str, dict]:
    """A one-task instance whose first attempt failed and whose second succeeded, SUCCEEDED and counted by /metrics;
    answers it with its failed attempt, whose worker may still report (late)."""
    wf = world.start("charge", {"order_id": "o-1"})
    first = claim(world, "w-first")
    pulse.attempt_fail(world.db.conn, first["attempt_id"], "w-first", "gateway timeout", retryable=True)
    world.db.advance(1_001)
    pulse.attempt_complete(world.db.conn, claim(world)["attempt_id"], "w1", {"charged": True})
    orch.drain()
    assert world.instance(wf)["status"] == "SUCCEEDED"
    counted(world)
    return wf, first


def archived_counts(world, workflow_ids: list[str]) -> dict[str, int]:
    """What an archive holds of each instance: the number of its rows, read in one snapshot."""
    return {wf: sum(map(len, tables.values())) for wf, tables in history.rows_of(world.db.conn, workflow_ids).items()}


def test_R1_an_archived_window_that_gained_a_row_since_is_refused_whole_then_goes_once_archived_again(world, orch):
    """An archive names each instance with the number of its rows it holds. A row added in between (here a late
    report, which no /metrics counter waits for) would be removed without being archived: the purge counts what it
    removes under its locks and, when the counts differ, undoes the window and says so."""
    world.publish(CHARGE)
    world.publish(TIMER)
    wf, first = settled_after_a_retry(world, orch)
    other = settled_timers(world, orch, 1)[0]
    counted(world)
    counts = archived_counts(world, [wf, other])
    assert pulse.attempt_complete(world.db.conn, first["attempt_id"], "w-first", {})["outcome"] == "LATE"
    before = world.db.table_counts()
    with pytest.raises(errors.HistoryChanged, match=r"hold \d+ rows, not the \d+ archived"):
        purge(world, only=counts, fold=False)
    assert world.db.table_counts() == before  # nothing removed, no audit row: the whole window undone
    again = archived_counts(world, [wf, other])
    assert again[wf] == counts[wf] + 1 and again[other] == counts[other]
    answer = purge(world, only=again, fold=False)
    assert (answer["purged"], answer["rows_deleted"]) == (2, sum(again.values()))  # every row removed was archived
    with pytest.raises(errors.ValidationFailed, match="whole numbers"):
        purge(world, only={wf: "37"}, fold=False)  # type: ignore[dict-item]


def test_a_row_that_metrics_has_not_counted_yet_keeps_its_instance_for_a_later_run(world, orch):
    """The counters of /metrics keep what a purge removes, so none ever goes down: a settled instance whose late
    signal was rejected a moment ago waits until the fold has counted that signal."""
    world.publish(signal_flow())
    wf = world.start("approval-flow", {"order_id": "o-1"})
    send(world, wf)
    assert world.instance(wf)["status"] == "SUCCEEDED"
    counted(world)
    send(world, wf, "late")  # rejected now: INSTANCE_SETTLED, final after the fold's horizon
    before = routines.engine_metrics(world.db.conn)
    answer = purge(world, fold=False)
    assert (answer["purged"], answer["uncounted"]) == (0, 1)
    assert world.instance(wf)["status"] == "SUCCEEDED"
    answer = purge(world)  # two minutes on, the fold has counted it
    assert (answer["purged"], answer["uncounted"]) == (1, 0)
    assert routines.engine_metrics(world.db.conn) == before  # every counter as it was: kept in the sums


def test_a_settled_instance_still_holding_something_open_is_kept_and_named(world, orch):
    world.publish(TIMER)
    held, gone = settled_timers(world, orch, 2)
    # A checkpoint left behind for a settled instance: the engine never leaves one, so the purge must not guess.
    world.db.execute("INSERT INTO weave_pending_advances (namespace_id, instance_id, step_key, kind, due_at, "
                     "available_at, created_at) SELECT namespace_id, id, '', 'ROOT', %s, %s, %s FROM weave_instances "
                     "WHERE id = %s", *(world.db.now() + dt.timedelta(days=1),) * 3, world.internal_id(held))
    world.db.advance(1_000)
    answer = purge(world)
    assert (answer["purged"], answer["held"], answer["held_ids"]) == (1, 1, [held])
    assert world.instance(held)["status"] == "SUCCEEDED"
    with pytest.raises(errors.NotFound):
        world.instance(gone)
    world.db.execute("DELETE FROM weave_pending_advances")
    assert purge(world)["purged"] == 1


def test_a_review_reason_left_open_on_a_cancelled_instance_is_history_and_goes_with_it(world, orch):
    """A reason recorded while an instance was cancelling stays open once it is CANCELLED (the fact is kept): it is
    no work anyone can do, so it does not hold the instance back."""
    world.publish(TIMER)
    wf = world.start("wait")
    routines.instance_cancel(world.db.conn, world.token, "acme", wf, "withdrawn", "c1")
    world.db.execute("INSERT INTO weave_review_reasons (namespace_id, instance_id, code, detail, opened_at) "
                     "SELECT namespace_id, id, 'INSTANCE_DEADLINE', '{}', updated_at FROM weave_instances")
    world.db.advance(1_000)
    answer = purge(world)
    assert (answer["purged"], answer["held"]) == (1, 0)
    assert world.db.scalar("SELECT COUNT(*) FROM weave_review_reasons") == 0


def test_R3_an_instance_another_transaction_holds_is_left_for_the_next_run_without_waiting(world, orch):
    world.publish(TIMER)
    busy, free = settled_timers(world, orch, 2)
    world.db.advance(1_000)
    other = world.db.connect()
    try:
        other.begin()
        with other.cursor() as cur:
            cur.execute("SELECT id FROM weave_instances WHERE id = %s FOR UPDATE", (world.internal_id(busy),))
        with world.db.conn.cursor() as cur:
            cur.execute("SET SESSION innodb_lock_wait_timeout = 1")
        answer = purge(world)  # a wait would fail with a lock wait timeout
        assert (answer["purged"], answer["held"]) == (1, 0)
    finally:
        other.rollback()
        other.close()
        with world.db.conn.cursor() as cur:
            cur.execute("SET SESSION innodb_lock_wait_timeout = DEFAULT")
    assert world.instance(busy)["status"] == "SUCCEEDED"
    with pytest.raises(errors.NotFound):
        world.instance(free)
    assert purge(world)["purged"] == 1


PAY = {"name": "pay", "steps": [{"key": "charge", "type": "TASK", "queue": "payments", "handler": "example.echo",
                                 "handler_version": "1", "input": {}, "task_timeout_ms": 24 * HOUR},
                                {"key": "cool", "type": "TIMER", "delay_ms": 1, "after": ["charge"]}]}


def test_R3_a_purge_reads_and_locks_no_row_of_a_live_instance_window_after_window(world, orch):
    """Every row of a live instance held by another transaction (as an engine decision holds them, for an instant):
    window after window on one session, the purge removes the settled instances without waiting on any of them.
    A statement that passed over the live rows would wait, and fail with the lock wait timeout; and a claim passing
    while the purge held such a row would skip a live task. (MariaDB plans a multi-table DELETE driven by
    JSON_TABLE as a full scan of the other table when the statement runs again in a session.)"""
    world.publish(PAY)
    settled = []
    for n in range(3):
        settled.append(world.start("pay", key=f"old-{n}"))
        got = pulse.task_claim(world.db.conn, "w1", "payments", limit=1, lease_ms=HOUR)
        pulse.attempt_complete(world.db.conn, got[0]["attempt_id"], "w1", {"n": n})
        orch.drain()
        world.db.advance(1)
        orch.drain()
    live = world.start("pay", key="live")
    assert len(pulse.task_claim(world.db.conn, "w1", "payments", limit=1, lease_ms=HOUR)) == 1  # attempt, permit
    counted(world)
    kept = rows_of(world, live)
    iid = world.internal_id(live)
    task = world.db.scalar("SELECT id FROM pulse_tasks WHERE instance_id = %s", iid)
    holder, purger = world.db.connect(), world.db.connect()
    try:
        with holder.cursor() as cur:  # as the engine's decisions read: READ COMMITTED, each row by an index
            cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
            cur.execute("START TRANSACTION")
            cur.execute("SELECT id FROM weave_instances WHERE id = %s FOR UPDATE", (iid,))
            for table in BY_INSTANCE:
                cur.execute(f"SELECT * FROM {table} WHERE instance_id = %s FOR UPDATE", (iid,))
            cur.execute("SELECT * FROM pulse_attempts WHERE task_id = %s FOR UPDATE", (task,))
            cur.execute("SELECT * FROM pulse_late_reports WHERE task_id = %s FOR UPDATE", (task,))
            cur.execute("SELECT p.* FROM pulse_attempts a JOIN pulse_permits p ON p.attempt_id = a.id "
                        "WHERE a.task_id = %s FOR UPDATE", (task,))
            assert cur.rowcount == 1
        with purger.cursor() as cur:
            cur.execute("SET SESSION innodb_lock_wait_timeout = 1")
        purged, after = [], None
        while True:  # windows of one, on one session: each statement runs again after its first time
            answer = routines.instances_purge(purger, world.admin, "acme", world.db.now(), after=after, limit=1,
                                              reason="retention")
            purged += answer["workflow_ids"]
            if (after := answer["next_after"]) is None:
                break
    finally:
        holder.rollback()
        holder.close()
        purger.close()
    assert purged == settled
    assert world.instance(live)["status"] == "RUNNING" and rows_of(world, live) == kept


def test_after_a_purge_reports_and_signals_for_its_instances_find_nothing_and_its_key_starts_anew(world, orch):
    world.publish({"name": "pay", "steps": [{"key": "charge", "type": "TASK", "queue": "payments",
                                              "handler": "example.echo", "handler_version": "1", "input": {},
                                              "retry": RETRY}]})
    wf = world.start("pay", key="order-7")
    got = claim(world)
    pulse.attempt_fail(world.db.conn, got["attempt_id"], "w1", "timeout", retryable=True)
    world.db.advance(1_001)
    pulse.attempt_complete(world.db.conn, claim(world)["attempt_id"], "w1", {"ok": True})
    orch.drain()
    assert world.instance(wf)["status"] == "SUCCEEDED"
    world.db.advance(1_000)
    assert purge(world)["purged"] == 1
    with pytest.raises(errors.NotFound):  # the first attempt's worker reports again: its attempt is gone
        pulse.attempt_complete(world.db.conn, got["attempt_id"], "w1", {"ok": True})
    with pytest.raises(errors.NotFound):
        send(world, wf)
    again = world.start("pay", key="order-7")
    assert again != wf and world.instance(again)["status"] == "RUNNING"


def test_R1_purge_refuses_bad_requests_and_a_caller_s_transaction(world, orch):
    world.publish(TIMER)
    settled_timers(world, orch, 1)
    with pytest.raises(errors.Forbidden):
        purge(world, token=world.token, fold=False)  # workflow scopes, not admin
    with pytest.raises(errors.ValidationFailed, match="LIMIT_INVALID"):
        purge(world, limit=0, fold=False)
    with pytest.raises(errors.ValidationFailed, match="LIMIT_INVALID"):
        purge(world, limit=1001, fold=False)
    with pytest.raises(errors.ValidationFailed, match="finished_before"):
        purge(world, world.db.now() + dt.timedelta(seconds=1), fold=False)
    for nothing in ("  ", " \t\n"):
        with pytest.raises(errors.ValidationFailed, match="REASON_INVALID"):
            purge(world, reason=nothing, fold=False)
    with pytest.raises(errors.ValidationFailed, match="after must be a workflow id"):
        purge(world, after="7", fold=False)
    conn = world.db.connect()
    try:
        conn.begin()
        with conn.cursor() as cur:
            cur.execute("INSERT INTO weave_namespaces (name, created_at) VALUES ('mine', NOW(6))")
        with pytest.raises(errors.WeaveError, match="IN_TRANSACTION"):
            routines.instances_purge(conn, world.admin, "acme", world.db.now(), reason="r")
        with conn.cursor() as cur:
            cur.execute("SELECT COUNT(*) AS n FROM weave_namespaces WHERE name = 'mine'")
            assert cur.fetchone()["n"] == 1  # the caller's work is still there, uncommitted
        conn.rollback()
    finally:
        conn.close()
    assert world.db.scalar("SELECT COUNT(*) FROM weave_audit WHERE action = 'instances.purge'") == 0
    assert world.db.scalar("SELECT COUNT(*) FROM weave_instances") == 1


def test_a_window_reads_the_rows_it_removes_and_never_the_rest_of_the_history(world, orch):
    """Each removal is a join from the window's instances, so a window costs the same beside a long history (a
    plan that scanned a table, as `DELETE ... WHERE instance_id IN (subquery)` does here, read all of it)."""
    world.publish(TIMER)
    first, second = settled_timers(world, orch, 2)
    cutoff = world.db.advance(1_000)

    def reads_of_one_window(after: str | None) -> tuple[int, dict]:
        before = handler_reads(world.db.conn)  # one call: a window that removes rows cannot be run three times
        answer = purge(world, cutoff, after=after, limit=1, fold=False)
        return handler_reads(world.db.conn) - before, answer

    counted(world)
    quiet, answer = reads_of_one_window(None)
    assert (answer["purged"], answer["next_after"]) == (1, first)
    settled_timers(world, orch, 150)  # a history the window must not read: settled after the cutoff
    world.db.execute("ANALYZE TABLE weave_instances, weave_steps, weave_activations, weave_waits, weave_events, "
                     "weave_audit, pulse_tasks, pulse_inbox, weave_signals")
    counted(world)
    busy, answer = reads_of_one_window(first)
    assert (answer["purged"], answer["next_after"]) == (1, second)
    assert busy <= quiet + 4, (quiet, busy)


def test_R3_purges_running_beside_the_engine_never_block_it_nor_fail(world, orch):
    """Windows removed while instances start, run their tasks, report and settle on other connections: no
    decision fails or waits behind a purge (a deadlock or a lock wait would surface as an error on one side), and
    every instance that settled is removed by the end."""
    world.publish({"name": "pay", "steps": [{"key": "charge", "type": "TASK", "queue": "payments",
                                              "handler": "example.echo", "handler_version": "1", "input": {},
                                              "task_timeout_ms": 24 * HOUR},
                                             {"key": "cool", "type": "TIMER", "delay_ms": 1, "after": ["charge"]}]})
    engine, purger = world.db.connect(), world.db.connect()
    done, settled = threading.Event(), threading.Event()
    removed: list[int] = []

    def run(part: int) -> None:
        if part == 0:
            try:
                for n in range(40):
                    routines.instance_start(engine, world.token, "acme", definition="pay", app="billing",
                                            idempotency_key=f"busy-{n}", deadline_ms=30 * 24 * HOUR)
                    # The purge locks no row of a live instance, not even for an instant: the claim finds the task.
                    got = pulse.task_claim(engine, "w1", "payments", limit=1, lease_ms=24 * HOUR)
                    assert len(got) == 1, f"instance {n}: its task was skipped"
                    pulse.attempt_complete(engine, got[0]["attempt_id"], "w1", {"n": n})
                    orch.drain()
                    settled.set()
            finally:
                done.set()
                settled.set()
        else:
            while not done.is_set():
                # Once per instance settled (the clock moves at most 40 times, well inside every task's deadline), as
                # a running install's scrapes do: what settled two minutes ago is counted by /metrics.
                settled.wait(timeout=10)
                settled.clear()
                db.call(purger, "weave_test_clock_advance", 121_000)
                routines.metrics_catch_up(purger)
                after = None
                while True:
                    now = db.call_row(purger, "weave_clock_now")["now_at"]
                    answer = routines.instances_purge(purger, world.admin, "acme", now, after=after, limit=3,
                                                      reason="retention")
                    removed.append(answer["purged"])
                    after = answer["next_after"]
                    if after is None:
                        break

    try:
        run_threads(run, 2)
    finally:
        engine.close()
        purger.close()
    world.db.advance(1_000)
    orch.drain()
    purged, _ = purge_all(world)
    assert sum(removed) > 0 and sum(removed) + purged == 40
    assert world.db.scalar("SELECT COUNT(*) FROM weave_instances") == 0


def test_the_purge_and_the_archive_cover_every_table_that_holds_rows_of_an_instance(world):
    """A table added later with an instance's rows (an instance_id, or a task_id of its tasks) must be removed by the
    purge and written by the archive, or a purge would leave rows behind that name an instance no longer there."""
    holding = {r["t"] for r in world.db.rows(
        "SELECT DISTINCT TABLE_NAME AS t FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() "
        "AND COLUMN_NAME IN ('instance_id', 'task_id')")} | {"weave_instances"}
    assert set(history.BY_INSTANCE) | set(history.BY_TASK) == holding
    text = (PROCEDURES_DIR / "admin" / "weave_instances_purge.sql").read_text()
    removed = set(re.findall(r"STRAIGHT_JOIN (\w+) x\b", text)) | set(re.findall(r"JOIN (pulse_\w+) [talp]\b", text))
    assert removed == holding, holding ^ removed
    assert history._value(b"\xff\x00") == {"base64": "/wA="} and history._value(b"{}") == "{}"


def _purged_while_it_waits(world, identity: int, call) -> object:
    """What ``call(conn)`` answers when, while it waits for the instance's identity (R-3, after its unlocked read of
    the instance), a purge removes that instance: the identity is held on another connection until the call waits
    for it, then the purge runs, then the identity is let go. The answer, or the exception raised."""
    holder, calling = world.db.connect(), world.db.connect()
    answer: list = []

    def run() -> None:
        try:
            answer.append(call(calling))
        except Exception as exc:  # judged by the caller
            answer.append(exc)

    try:
        holder.begin()
        with holder.cursor() as cur:
            cur.execute("SELECT id FROM weave_credentials WHERE id = %s FOR UPDATE", (identity,))
        thread = threading.Thread(target=run)
        thread.start()
        assert world.db.comes_to_wait_for_a_lock(calling)
        assert purge(world, fold=False)["purged"] == 1
        holder.rollback()
        thread.join(30)
    finally:
        holder.rollback()
        holder.close()
        calling.close()
    assert len(answer) == 1, answer
    return answer[0]


@pytest.mark.parametrize("action", ["cancel", "pause", "deadline", "retry"])
def test_C6_an_action_waiting_on_an_instance_a_purge_removes_answers_not_found(world, action):
    """An operator action authorises with an unlocked read of the instance, then waits in R-3 order for the instance's
    identity and the instance. When a purge removes the instance meanwhile, the action answers NOT_FOUND (404), as
    one that came after the purge does: never a database error, and nothing written."""
    world.publish(TIMER)
    wf = world.start("wait")
    routines.instance_cancel(world.db.conn, world.token, "acme", wf, "no longer needed", "c1")
    operator = world.credential(["workflows:control", "workflows:review"], actor="operator")["token"]
    counted(world)
    identity = world.db.scalar("SELECT credential_id FROM weave_instances WHERE id = %s", world.internal_id(wf))
    calls = {"cancel": lambda conn: routines.instance_cancel(conn, operator, "acme", wf, "r", "k"),
             "pause": lambda conn: routines.instance_pause(conn, operator, "acme", wf, "r", "k"),
             "deadline": lambda conn: routines.instance_deadline(conn, operator, "acme", wf, "r", "k",
                                                                 extend_ms=HOUR),
             "retry": lambda conn: routines.instance_retry(conn, operator, "acme", wf, "r", "k")}
    answer = _purged_while_it_waits(world, identity, calls[action])
    assert isinstance(answer, errors.NotFound), answer
    assert world.db.scalar("SELECT COUNT(*) FROM weave_audit WHERE instance_id = %s", world.internal_id(wf)) == 0


def test_R4_a_start_replay_that_waits_while_a_purge_removes_its_instance_starts_a_new_one(world):
    """A start replay finds the instance of its key with a plain read, then waits for its credential (R-3). When a
    purge removes that instance meanwhile, the request starts a new instance, as a start after the purge does: never
    an answer without an instance (a server error)."""
    world.publish(TIMER)
    start = {"definition": "wait", "app": "billing", "input": {"x": 1}, "idempotency_key": "K",
             "deadline_ms": HOUR}
    first = routines.instance_start(world.db.conn, world.token, "acme", **start)["workflow_id"]
    routines.instance_cancel(world.db.conn, world.token, "acme", first, "no longer needed", "c1")
    counted(world)
    identity = world.db.scalar("SELECT credential_id FROM weave_instances WHERE id = %s", world.internal_id(first))
    answer = _purged_while_it_waits(world, identity,
                                    lambda conn: routines.instance_start(conn, world.token, "acme", **start))
    assert isinstance(answer, dict), answer
    assert answer["workflow_id"] != first and answer["status"] == "RUNNING"
    assert world.db.rows("SELECT idempotency_key FROM weave_instances") == [{"idempotency_key": "K"}]


def test_R4_a_window_names_every_instance_it_removes_under_a_sessions_small_list_cap(world, orch):
    """GROUP_CONCAT and MariaDB's JSON_ARRAYAGG stop at the session's group_concat_max_len, and a caller may keep
    MySQL's 1024: a window of 150 instances was removed whole while its answer and its audit row named 126, the last
    cut to the id of another instance, and a bigger one failed on a list cut mid-value. The purge raises the cap
    for its own statements and gives the session its own back."""
    world.publish(TIMER)
    wfs = settled_timers(world, orch, 150)
    world.db.execute("SET SESSION group_concat_max_len = 1024")
    try:
        answer = purge(world, limit=1000)
        assert answer["purged"] == 150 and sorted(answer["workflow_ids"]) == sorted(wfs)
        audit = json.loads(world.db.scalar("SELECT details FROM weave_audit WHERE action = 'instances.purge'"))
        assert sorted(audit["workflow_ids"]) == sorted(wfs)
        assert world.db.scalar("SELECT @@group_concat_max_len") == 1024
        with pytest.raises(errors.ValidationFailed):  # a refused window leaves the session's own cap as well
            purge(world, limit=1001)
        assert world.db.scalar("SELECT @@group_concat_max_len") == 1024
    finally:
        world.db.execute("SET SESSION group_concat_max_len = DEFAULT")
