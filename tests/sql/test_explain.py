"""S-17 for every step type: "why is it waiting?" answers a timer's due time, a poll's rounds and task, a task's
attempts and lease, and what holds the instance back (R-18), from SQL and over HTTP with the same values."""

from __future__ import annotations

import pytest

from procedures import db as dbmod
from procedures import errors, pulse, routines, signals
from tests.benchmarks.bench_reads import reads_of
from tests.sql.test_polls import poll_flow
from tests.sql.test_pulse import claim, task_flow
from tests.sql.test_room_lines import line_up
from tests.sql.test_stalls import paused_between_timers
from tests.support import signals as signal_support

HOUR = 3_600_000


def explain(world, wf: str, step: str) -> dict:
    return signals.explain(world.db.conn, world.token, world.namespace, wf, step)


def test_S17_a_waiting_timer_explains_its_due_time_cap_and_lateness(world, orch):
    world.publish({"name": "cool", "steps": [{"key": "cool", "type": "TIMER", "delay_ms": 60_000}]})
    wf = world.start("cool", deadline_ms=30_000)  # the instance deadline caps the timer
    orch.drain()
    report = explain(world, wf, "cool")
    timer = report["timer"]
    assert timer["delay_ms"] == 60_000 and timer["truncated"] is True
    assert timer["due_at"] < timer["planned_due_at"] and timer["lateness_ms"] == 0
    assert report["poll"] is None and report["task"] is None and report["open_review_codes"] == []
    assert report["blockers"] == []
    world.db.execute("UPDATE weave_pending_advances SET available_at = available_at + INTERVAL 1 HOUR")
    world.db.advance(31_000)
    late = explain(world, wf, "cool")["timer"]
    assert late["lateness_ms"] >= 1_000  # due and not yet settled: late so far


def test_S17_a_poll_explains_rounds_next_poll_current_task_and_last_outcome(world, orch):
    world.publish(poll_flow())
    wf = world.start("pay", {"order_id": "a"})
    orch.drain()
    first = explain(world, wf, "check")
    assert first["poll"]["state"] == "IN_FLIGHT" and first["poll"]["rounds_used"] == 1
    assert first["poll"]["max_rounds"] == 3 and first["poll"]["poll_deadline"] is not None
    task = first["task"]
    assert task["status"] == "QUEUED" and task["attempts_used"] == 0 and task["lease_holder"] is None
    got, = claim(world, worker="w-7")
    running = explain(world, wf, "check")["task"]
    assert running["status"] == "RUNNING" and running["lease_holder"] == "w-7" and running["attempts_used"] == 1
    pulse.attempt_complete(world.db.conn, got["attempt_id"], "w-7", {"status": "PENDING"})
    orch.drain()
    waiting = explain(world, wf, "check")["poll"]
    assert waiting["state"] == "WAITING" and waiting["last_outcome"] == "POLL_PENDING" and waiting["next_poll_at"]


def test_S17_a_task_explains_attempts_and_the_next_retry(world, orch):
    world.publish(task_flow(retry={"max_attempts": 3, "initial_backoff_ms": 5_000, "backoff_coefficient": 2,
                                   "max_backoff_ms": 60_000}))
    wf = world.start("pay", {"order_id": "a"})
    orch.drain()
    got, = claim(world)
    pulse.attempt_fail(world.db.conn, got["attempt_id"], "w1", "card network down", retryable=True)
    task = explain(world, wf, "work")["task"]
    assert task["status"] == "QUEUED" and task["attempts_used"] == 1 and task["max_attempts"] == 3
    assert task["next_retry_at"] is not None and task["lease_holder"] is None


def test_S17_R18_explain_names_what_holds_the_instance_back(world, orch):
    wf = paused_between_timers(world, orch)
    blockers = {b["blocker"]: b for b in explain(world, wf, "second")["blockers"]}
    assert set(blockers) == {"PAUSED", "DEFERRED"}
    assert blockers["DEFERRED"]["reason"] == "PAUSED" and blockers["DEFERRED"]["next_check_at"]


def test_S17_R8_a_deferral_for_room_explains_its_place_in_line(world):
    """Work waiting for room is told how many wait before it, and for which app or queue (R-8's line)."""
    routines.app_put(world.db.conn, world.admin, world.namespace, "billing", 1)
    world.publish(task_flow())
    world.start("pay", {"order_id": "holder"})
    waiting = line_up(world, "w", 3)
    details = [next(b for b in explain(world, wf, "work")["blockers"] if b["blocker"] == "DEFERRED")["detail"]
               for wf in waiting]
    assert [d.split("; ", 1)[1] for d in details] == [
        f"{n} waiting before it for the room of app billing" for n in range(3)]
    assert all(d.startswith("QUOTA_FULL: ") for d in details)


@pytest.mark.parametrize("sql_mode", ["", "STRICT_TRANS_TABLES"], ids=["lax", "strict"])
def test_S17_a_step_key_longer_than_any_is_not_found_whatever_the_callers_sql_mode(world, sql_mode):
    """A key one character longer than a step's 64-character key names no step: a lax session must not cut it down
    to that step's key, and a strict one gets the same answer (not a server error about the parameter)."""
    world.publish({"name": "long-keys", "steps": [{"key": "s" * 64, "type": "TIMER", "delay_ms": 60_000}]})
    wf = world.start("long-keys")
    conn = world.db.client(sql_mode)
    try:
        assert dbmod.call(conn, "weave_step_explain", world.token, "acme", wf, "s" * 64)[0][0]["step_key"]
        with pytest.raises(errors.NotFound):
            dbmod.call(conn, "weave_step_explain", world.token, "acme", wf, "s" * 65)
    finally:
        conn.close()


def test_S17_a_reactivated_signal_step_before_its_wait_opens_explains_its_signals_as_waiting_for_it(world, orch):
    """After reactivation the step is PENDING at k+1 with no wait until the ROOT advance (here, until resume): a
    signal for k+1 is waiting for that activation, and one for k is stale. A PENDING signal for k+1 used to be
    explained as STEP_SETTLED, a reason that was not true of it."""
    from tests.sql.test_signals import started
    from tests.support.signals import reactivate, send, signal_flow

    wf = started(world, orch, signal_flow(timeout_ms=60_000))
    old = send(world, wf, correlation_key="o-2")
    world.past_due(orch, wf, "approval", 60_000)
    routines.instance_pause(world.db.conn, world.token, world.namespace, wf, "hold", "p1")
    reactivate(world, wf)
    new = send(world, wf, target_activation_sequence=2)
    report = explain(world, wf, "approval")
    assert report["status"] == "PENDING" and report["wait"]["activation_sequence"] == 2
    assert report["wait"]["status"] is None
    why = {s["signal_id"]: s["why"] for s in report["signals"]}
    assert why == {old["signal_id"]: "CORRELATION_MISMATCH", new["signal_id"]: "WAITING_FOR_ACTIVATION"}
    assert [b["blocker"] for b in report["blockers"]][:1] == ["PAUSED"]


def test_S17_K6_R18_an_attempt_running_past_its_tasks_deadline_is_named_among_the_blockers(world, orch):
    """The deadline keeps new attempts from starting (K-6) but stops no running handler, and a worker that heartbeats
    keeps its lease: a handler that never returns would hold the step with nothing else to say so. Explain names the
    attempt, its worker and when it started, and the task its deadline, its last error and a cancel asked of it."""
    world.publish(task_flow(task_timeout_ms=4_000, retry={"max_attempts": 3, "initial_backoff_ms": 0,
                                                          "backoff_coefficient": 1, "max_backoff_ms": 0}))
    wf = world.start("pay", {"order_id": "a"})
    orch.drain()
    got, = claim(world, lease_ms=3_000)
    pulse.attempt_fail(world.db.conn, got["attempt_id"], "w1", "card network down", retryable=True)
    got, = claim(world, lease_ms=3_000)
    world.db.advance(2_000)
    pulse.attempt_heartbeat(world.db.conn, got["attempt_id"], "w1", lease_ms=3_000)
    task = explain(world, wf, "work")["task"]
    assert task["last_error"] == "card network down" and task["cancel_requested"] is False
    assert task["attempt_started_at"] == got["started_at"].isoformat(timespec="microseconds") + "Z"
    assert explain(world, wf, "work")["blockers"] == []  # before its deadline: running is not being held back
    world.db.advance(2_500)  # past the deadline, the lease renewed by heartbeats all along
    lease = pulse.attempt_heartbeat(world.db.conn, got["attempt_id"], "w1", lease_ms=3_000)
    routines.instance_cancel(world.db.conn, world.token, world.namespace, wf, "stop it", "c-1")
    x = explain(world, wf, "work")
    assert x["task"]["status"] == "RUNNING" and x["task"]["cancel_requested"] is True
    overdue = [b for b in x["blockers"] if b["blocker"] == "TASK_OVERDUE"]
    assert overdue == [{"blocker": "TASK_OVERDUE", "reason": None, "since": x["task"]["deadline_at"],
                        "next_check_at": x["task"]["lease_expires_at"],
                        "detail": {"task_id": got["task_id"], "worker_id": "w1",
                                   "attempt_started_at": x["task"]["attempt_started_at"], "cancel_requested": True}}]
    assert x["task"]["lease_expires_at"] == lease["lease_expires_at"].isoformat(timespec="microseconds") + "Z"
    pulse.attempt_complete(world.db.conn, got["attempt_id"], "w1", {"n": 1})
    assert not [b for b in explain(world, wf, "work")["blockers"] if b["blocker"] == "TASK_OVERDUE"]


def test_S17_K3_a_report_that_came_after_its_lease_was_lost_is_shown_with_the_task(world, orch):
    """A worker frozen past its lease: the attempt ends UNKNOWN and its step goes to review, and the handler's answer,
    when it comes, changes nothing (K-3). The person deciding that review is shown the answer: the handler may have
    finished after all."""
    world.publish(task_flow())
    wf = world.start("pay", {"order_id": "a"})
    orch.drain()
    got, = claim(world, lease_ms=1_000)
    world.db.advance(1_500)
    orch.drain()  # the lease is recovered: UNKNOWN, review
    assert explain(world, wf, "work")["task"]["late_reports"] == []
    assert pulse.attempt_complete(world.db.conn, got["attempt_id"], "w1", {"paid": "12345678901234567890.10"}
                                  )["outcome"] == "LATE"
    pulse.attempt_fail(world.db.conn, got["attempt_id"], "w1", "and then it failed")
    x = explain(world, wf, "work")
    assert "TASK_UNKNOWN" in x["open_review_codes"]
    late = x["task"]["late_reports"]
    assert [(r["kind"], r["attempt_no"], r["worker_id"]) for r in late] == [("FAILED", 1, "w1"), ("SUCCEEDED", 1, "w1")]
    assert (late[0]["error"], late[0]["retryable"], late[0]["result"]) == ("and then it failed", False, None)
    assert late[1]["result"] == {"paid": "12345678901234567890.10"} and late[1]["error"] is None


def test_S17_K1_R18_a_task_waiting_for_its_mutex_key_names_it_among_the_blockers(world, orch):
    """A QUEUED task whose mutex key a RUNNING attempt holds cannot start however many workers are idle: explain says
    so (the key, held since when), and says nothing once the key is free or for a task with no key."""

    world.publish(task_flow(mutex_key="$.input.account"))
    first = world.start("pay", {"order_id": "a", "account": "acct-1"})
    second = world.start("pay", {"order_id": "b", "account": "acct-1"})
    other = world.start("pay", {"order_id": "c", "account": "acct-2"})
    orch.drain()
    got, = claim(world)  # first's task: acct-1 is held from here
    assert got["workflow_id"] == first
    blockers = explain(world, second, "work")["blockers"]
    assert blockers == [{"blocker": "MUTEX_HELD", "reason": None, "since": got["started_at"].isoformat(
        timespec="microseconds") + "Z", "next_check_at": None, "detail": {"mutex_key": "acct-1"}}]
    assert explain(world, other, "work")["blockers"] == []
    assert explain(world, first, "work")["blockers"] == []  # running: it holds the key itself
    routines.instance_pause(world.db.conn, world.token, world.namespace, second, "hold", "p-1")
    assert [b["blocker"] for b in explain(world, second, "work")["blockers"]] == ["PAUSED", "MUTEX_HELD"]
    pulse.attempt_complete(world.db.conn, got["attempt_id"], "w1", {"n": 1})
    assert explain(world, second, "work")["blockers"] == [{"blocker": "PAUSED", "reason": None, "since": None,
                                                         "next_check_at": None, "detail": None}]


def test_S17_R11_explain_shows_the_latest_100_signals_and_counts_every_one(world, orch):
    """An instance holds up to 1,024 signals, and explain listed every one that targeted the step, each mismatch
    compared byte by byte against a table of 513 positions: 1,017 signals read 530,426 rows. It now shows the latest
    100 and counts them all, and finds a mismatch's first differing byte by halving the common prefix."""
    world.publish(signal_support.signal_flow(timeout_ms=HOUR))
    wf = world.start("approval-flow", {"order_id": "o-1"})
    orch.drain()

    def read() -> dict:
        return explain(world, wf, "approval")

    def sent(numbers: range) -> None:  # each refused at once, its correlation key not the wait's
        for i in numbers:
            signal_support.send(world, wf, f"k-{i}", correlation_key=f"o-1-{i}")

    sent(range(100))
    at_100 = reads_of(world.db.conn, read)
    sent(range(100, 110))
    report = read()
    assert report["signals_total"] == 110 and len(report["signals"]) == 100
    keys = [s["idempotency_key"] for s in report["signals"]]
    assert keys == [f"k-{i}" for i in range(10, 110)]  # the latest, in acceptance order
    assert {s["why"] for s in report["signals"]} == {"CORRELATION_MISMATCH"}
    assert report["signals"][-1]["detail"] == {"expected_hex": "6f2d31", "got_hex": "6f2d312d313039",
                                               "first_difference_offset": 3, "expected_byte_hex": "",
                                               "got_byte_hex": "2d"}
    assert reads_of(world.db.conn, read) - at_100 <= 10 * 6  # was about 518 a signal


@pytest.mark.parametrize(("a", "b"), [
    (b"", b""), (b"", b"x"), (b"abc", b"abc"), (b"abc", b"abd"), (b"abc", b"ab"), (b"xbc", b"abc"),
    (b"a" * 511 + b"b", b"a" * 512), (b"a" * 512, b"a" * 512), (bytes(range(256)) * 2, bytes(range(256)) + b"\0"),
    ("é".encode(), "e\u0301".encode()), (b"a ", b"a"), (b"a\0", b"a")])
def test_S17_the_first_differing_byte_is_where_the_common_prefix_ends(world, a, b):
    expected = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    assert world.db.scalar("SELECT _weave_bytes_differ_at(%s, %s)", a, b) == expected
    assert world.db.scalar("SELECT _weave_bytes_differ_at(%s, %s)", b, a) == expected


def test_S17_open_review_codes_are_whole_under_a_sessions_small_list_cap(world, orch):
    """The step's open review codes are a JSON list, which MariaDB cuts at the session's group_concat_max_len: at 4
    bytes explain answered '["PO"]' for POLL_FAILED."""
    world.publish(poll_flow())
    wf = world.start("pay", {"order_id": "o-1"})
    orch.drain()
    (task,) = claim(world)
    pulse.attempt_fail(world.db.conn, task["attempt_id"], "w1", "no", retryable=False)
    orch.drain()
    world.db.execute("SET SESSION group_concat_max_len = 4")
    try:
        assert explain(world, wf, "check")["open_review_codes"] == ["POLL_FAILED"]
        assert world.db.scalar("SELECT @@group_concat_max_len") == 4
        with pytest.raises(errors.NotFound):  # a refusal leaves the session's own cap as well
            explain(world, wf, "no-such-step")
        assert world.db.scalar("SELECT @@group_concat_max_len") == 4
    finally:
        world.db.execute("SET SESSION group_concat_max_len = DEFAULT")
