"""POLL steps (04-polls, P-1..P-11): bounded rounds, the two budgets of the P-3 table and the deadline races,
at the database level. Workers are driven exactly through the Pulse routines (claim, complete, fail), the
orchestrator in-process, and the clock is the database's test clock. The M-4 invariants (M-4.3, M-4.4 and
M-4.5 concern polls) run after each test."""

from __future__ import annotations

import datetime as dt
import json
import threading

import pytest

from procedures import db as dbmod
from procedures import invariants, pulse, routines
from tests.benchmarks.bench_backlog import handler_reads
from tests.support.waiting import wait_for

HOUR = 3_600_000
INTERVAL = 30_000
RETRY = {"max_attempts": 3, "initial_backoff_ms": 1_000, "backoff_coefficient": 2.0, "max_backoff_ms": 60_000}
RESULT = {"pending": ["PENDING"], "success": ["DONE", "PAID"], "review": ["MANUAL_CHECK"]}


def poll_step(key="check", **fields) -> dict:
    step = {"key": key, "type": "POLL", "queue": "payments", "handler": "example.poll", "handler_version": "1",
            "input": {"order_id": "$.input.order_id"}, "interval_ms": INTERVAL, "max_rounds": 3,
            "timeout_ms": HOUR, "task_timeout_ms": 10 * 60_000, "retry": RETRY, "result": RESULT}
    step.update(fields)
    return step


def poll_flow(name="pay", then: bool = False, **fields) -> dict:
    steps = [poll_step(**fields)]
    if then:
        steps.append({"key": "after", "type": "TASK", "queue": "payments", "handler": "example.echo",
                      "handler_version": "1", "after": ["check"], "input": {"paid": "$.steps.check.output.output"}})
    return {"name": name, "steps": steps}


def parse(ts: str | None) -> dt.datetime | None:
    return None if ts is None else dt.datetime.strptime(ts, "%Y-%m-%dT%H:%M:%S.%fZ")


def tid(public: str) -> int:
    return int(public.removeprefix("tsk_"))


def claim(world, worker="w1", lease_ms=60_000) -> dict:
    got = pulse.task_claim(world.db.conn, worker, "payments", limit=1, lease_ms=lease_ms)
    assert len(got) == 1, "expected exactly one claimable task"
    return got[0]


def answer(world, result, worker="w1") -> dict:
    """One worker attempt that returns ``result`` (a status string is shorthand for {"status": ...}). Its outcome
    is left to the orchestrator, as when the report finds its instance held, so that a test decides when it is
    consumed (P-8's test lets the report consume it: Settle at Report)."""
    got = claim(world, worker)
    body = {"status": result} if isinstance(result, str) else result
    with world.held(attempt_id=got["attempt_id"]):
        pulse.attempt_complete(world.db.conn, got["attempt_id"], worker, body)
    return got


def answer_rounds(world, orch, *results) -> None:
    """Rounds answered one after another: each answer is consumed, and the next round falls due an interval
    later."""
    for i, result in enumerate(results):
        if i:
            world.db.advance(INTERVAL)
            orch.drain()
        answer(world, result)
        orch.drain()


def fail(world, retryable: bool, worker="w1") -> dict:
    """One failed attempt; a final failure's outcome is left to the orchestrator, as ``answer``'s."""
    got = claim(world, worker)
    with world.held(attempt_id=got["attempt_id"]):
        pulse.attempt_fail(world.db.conn, got["attempt_id"], worker, "upstream said 503", retryable=retryable)
    return got


def poll_of(world, wf: str, key="check") -> dict:
    return world.step(wf, key)["poll"]


def review_codes(world, wf: str) -> list[str]:
    return [r["code"] for r in world.instance(wf)["review_reasons"]]


def checkpoint(world, wf: str, key="check") -> dict | None:
    return world.db.row("SELECT * FROM weave_pending_advances WHERE instance_id = %s AND step_key = %s",
                        world.internal_id(wf), key)


def in_flight(world) -> int:
    return world.db.scalar("SELECT COUNT(*) FROM pulse_tasks WHERE status IN ('QUEUED', 'RUNNING')")


def started(world, orch, definition="pay", input=None, **kw) -> str:
    wf = world.start(definition, input if input is not None else {"order_id": "o-1"}, **kw)
    orch.drain()
    return wf


def event_types(world, wf: str) -> list[str]:
    return [e["type"] for e in world.events(wf)]


def advance_checkpoint(world, wf: str, key="check") -> str:
    """Advance the step's checkpoint once, directly (the scan would propose it the same way)."""
    cp = checkpoint(world, wf, key)
    return world.db.one("weave_checkpoint_advance", cp["id"])["outcome"]


# --- P-1 activation -----------------------------------------------------------------------------------------
def test_P1_activation_freezes_inputs_and_creates_round_one_with_checkpoint_at_the_poll_deadline(world, orch):
    world.publish(poll_flow(priority=4, business_key="$.input.order_id", mutex_key="$.input.account"))
    wf = started(world, orch, input={"order_id": "o-7", "account": "acc-1"})
    iid = world.internal_id(wf)
    act = world.db.row("SELECT * FROM weave_activations WHERE instance_id = %s", iid)
    state = world.db.row("SELECT * FROM weave_poll_states WHERE activation_id = %s", act["id"])
    rounds = world.db.rows("SELECT * FROM weave_poll_rounds WHERE activation_id = %s", act["id"])
    task = world.db.row("SELECT * FROM pulse_tasks WHERE instance_id = %s", iid)
    poll_deadline = act["started_at"] + dt.timedelta(milliseconds=HOUR)
    assert (state["state"], state["rounds_used"], state["max_rounds"], state["interval_ms"]) == \
        ("IN_FLIGHT", 1, 3, INTERVAL)
    assert state["poll_deadline"] == poll_deadline and state["current_task_id"] == task["id"]
    assert state["next_poll_at"] is None
    assert [(r["round_no"], r["task_id"], r["outcome"]) for r in rounds] == [(1, task["id"], "IN_FLIGHT")]
    assert (task["round_no"], task["activation_id"], task["status"]) == (1, act["id"], "QUEUED")
    assert json.loads(task["input"]) == {"order_id": "o-7"}
    assert (task["business_key"], task["mutex_key"], task["priority"]) == ("o-7", "acc-1", 4)
    assert (task["max_attempts"], task["initial_backoff_ms"], task["backoff_coefficient"], task["max_backoff_ms"]) == \
        (3, 1_000, 2.0, 60_000)
    assert task["deadline_at"] == act["started_at"] + dt.timedelta(minutes=10)
    cp = checkpoint(world, wf)
    assert (cp["kind"], cp["activation_id"], cp["due_at"]) == ("POLL", act["id"], poll_deadline)
    frozen = json.loads(act["frozen"])
    assert frozen["input"] == {"order_id": "o-7"} and frozen["max_rounds"] == 3
    activated = next(e for e in world.events(wf) if e["type"] == "STEP_ACTIVATED")
    assert activated["data"]["task_id"] == f"tsk_{task['id']}"
    assert parse(activated["data"]["poll_deadline"]) == poll_deadline
    assert world.db.scalar("SELECT COUNT(*) FROM weave_audit WHERE action = 'poll.round'") == 1
    assert world.db.scalar("SELECT COUNT(*) FROM weave_waits") == 0  # no final signal declared
    poll = poll_of(world, wf)
    assert (poll["state"], poll["rounds_used"], poll["current_task_id"]) == ("IN_FLIGHT", 1, f"tsk_{task['id']}")
    assert poll["rounds"] == [{"number": 1, "task_id": f"tsk_{task['id']}", "outcome": "IN_FLIGHT", "result": None,
                               "result_at": None}]


def test_P1_poll_and_task_deadlines_are_capped_by_the_instance_deadline(world, orch):
    world.publish(poll_flow(timeout_ms=2 * HOUR, task_timeout_ms=3 * HOUR))
    wf = started(world, orch, deadline_ms=HOUR)
    deadline = world.db.scalar("SELECT deadline_at FROM weave_instances WHERE id = %s", world.internal_id(wf))
    assert world.db.scalar("SELECT poll_deadline FROM weave_poll_states") == deadline
    assert world.db.scalar("SELECT deadline_at FROM pulse_tasks") == deadline
    assert checkpoint(world, wf)["due_at"] == deadline


def test_P1_task_deadline_is_capped_by_the_poll_deadline(world, orch):
    world.publish(poll_flow(timeout_ms=60_000, task_timeout_ms=HOUR))
    started(world, orch)
    assert world.db.scalar("SELECT deadline_at FROM pulse_tasks") == \
        world.db.scalar("SELECT poll_deadline FROM weave_poll_states")


def test_P1_activation_is_subject_to_R8_and_writes_nothing_while_there_is_no_room(world, orch):
    routines.app_put(world.db.conn, world.admin, world.namespace, "billing", 1)
    world.publish(poll_flow())
    started(world, orch, input={"order_id": "first"})
    wf = started(world, orch, input={"order_id": "second"})
    iid = world.internal_id(wf)
    assert world.step(wf, "check")["status"] == "PENDING"
    assert world.db.scalar("SELECT COUNT(*) FROM weave_activations WHERE instance_id = %s", iid) == 0
    assert world.db.scalar("SELECT COUNT(*) FROM weave_poll_states WHERE instance_id = %s", iid) == 0
    assert world.db.scalar("SELECT COUNT(*) FROM weave_poll_rounds WHERE instance_id = %s", iid) == 0
    assert "quota" in world.db.scalar("SELECT last_error FROM weave_pending_advances WHERE instance_id = %s", iid)


def test_P1_a_final_signal_gets_its_POLL_FINAL_wait_pinned_to_the_activation(world, orch):
    world.publish(poll_flow(final_signal={"name": "payment.final", "payload_version": "2",
                                          "correlation": "$.input.order_id"}))
    wf = started(world, orch, input={"order_id": "o-9 "})
    act = world.db.row("SELECT * FROM weave_activations")
    wait = world.db.row("SELECT * FROM weave_waits")
    assert (wait["kind"], wait["status"], wait["activation_id"], wait["activation_seq"]) == \
        ("POLL_FINAL", "WAITING", act["id"], 1)
    assert (wait["signal_name"], wait["payload_version"], wait["payload_type"]) == ("payment.final", "2", "object")
    assert wait["correlation_key"] == b"o-9 " == act["correlation_key"]
    assert wait["deadline_at"] == world.db.scalar("SELECT poll_deadline FROM weave_poll_states")
    assert wait["started_at"] == act["started_at"]
    step = world.step(wf, "check")
    assert step["final_wait"]["kind"] == "POLL_FINAL" and step["final_wait"]["status"] == "WAITING"
    assert step["poll"]["rounds_used"] == 1


# --- P-2 a PENDING answer -----------------------------------------------------------------------------------
def test_P2_pending_waits_the_interval_from_the_results_own_time(world, orch):
    world.publish(poll_flow())
    wf = started(world, orch)
    task_id = world.db.scalar("SELECT id FROM pulse_tasks")
    world.db.advance(2_000)
    answer(world, {"status": "PENDING", "output": {"progress": 40}})
    occurred = world.db.scalar("SELECT occurred_at FROM pulse_inbox")
    world.db.advance(7_000)  # consumed well after the outcome happened
    assert orch.drain()["INBOX:PENDING"] == 1
    state = world.db.row("SELECT * FROM weave_poll_states")
    rnd = world.db.row("SELECT * FROM weave_poll_rounds WHERE round_no = 1")
    next_at = occurred + dt.timedelta(milliseconds=INTERVAL)
    assert (state["state"], state["current_task_id"], state["next_poll_at"], state["rounds_used"]) == \
        ("WAITING", None, next_at, 1)
    assert (rnd["outcome"], rnd["result_at"], json.loads(rnd["result"])) == \
        ("POLL_PENDING", occurred, {"status": "PENDING", "output": {"progress": 40}})
    cp = checkpoint(world, wf)
    assert (cp["kind"], cp["due_at"], cp["available_at"]) == ("POLL", next_at, next_at)
    assert world.step(wf, "check")["status"] == "ACTIVE" and world.instance(wf)["status"] == "RUNNING"
    assert "POLL_ROUND_PENDING" in event_types(world, wf)
    assert world.db.scalar("SELECT COUNT(*) FROM pulse_tasks") == 1 and task_id
    poll = poll_of(world, wf)
    assert poll["state"] == "WAITING" and parse(poll["next_poll_at"]) == next_at
    assert poll["rounds"][0]["outcome"] == "POLL_PENDING" and parse(poll["rounds"][0]["result_at"]) == occurred


def test_P2_next_poll_at_is_capped_by_the_poll_deadline(world, orch):
    world.publish(poll_flow(timeout_ms=20_000, interval_ms=60_000))
    wf = started(world, orch)
    answer(world, "PENDING")
    orch.drain()
    state = world.db.row("SELECT * FROM weave_poll_states")
    assert state["next_poll_at"] == state["poll_deadline"] == checkpoint(world, wf)["due_at"]


# --- P-3 the budget table, row by row -----------------------------------------------------------------------
def test_P3_row1_retryable_failure_keeps_the_round_and_uses_the_same_tasks_attempts(world, orch):
    world.publish(poll_flow())
    wf = started(world, orch)
    task_id = world.db.scalar("SELECT id FROM pulse_tasks")
    first = fail(world, retryable=True)
    assert orch.drain()["INBOX:PENDING"] == 0  # a retry is Pulse's business: nothing reaches the step
    task = world.db.row("SELECT * FROM pulse_tasks")
    assert (task["status"], task["attempts_used"]) == ("QUEUED", 1)
    assert task["available_at"] == world.db.scalar("SELECT ended_at FROM pulse_attempts") + dt.timedelta(seconds=1)
    world.db.advance(1_000)
    second = answer(world, "PENDING")
    assert tid(first["task_id"]) == tid(second["task_id"]) == task_id
    assert (first["attempt_no"], second["attempt_no"]) == (1, 2)
    orch.drain()
    poll = poll_of(world, wf)
    assert poll["rounds_used"] == 1 and [r["task_id"] for r in poll["rounds"]] == [f"tsk_{task_id}"]
    assert world.db.scalar("SELECT COUNT(*) FROM pulse_tasks") == 1
    assert world.db.scalar("SELECT attempts_used FROM pulse_tasks") == 2


def test_P3_row2_pending_with_budget_left_adds_a_round_whose_task_starts_at_attempt_one(world, orch):
    world.publish(poll_flow())
    wf = started(world, orch)
    fail(world, retryable=True)
    world.db.advance(1_000)
    answer(world, "PENDING")
    orch.drain()
    assert poll_of(world, wf)["rounds_used"] == 1  # not before the interval
    world.db.advance(INTERVAL)
    assert orch.drain()["CHECKPOINT:ROUND"] == 1
    poll = poll_of(world, wf)
    assert poll["rounds_used"] == 2 and poll["state"] == "IN_FLIGHT"
    second = world.db.row("SELECT * FROM pulse_tasks WHERE round_no = 2")
    assert (second["status"], second["attempts_used"]) == ("QUEUED", 0)
    assert poll["current_task_id"] == f"tsk_{second['id']}"
    got = claim(world)
    assert (tid(got["task_id"]), got["attempt_no"], got["round_no"]) == (second["id"], 1, 2)


def test_P3_row3_success_settles_the_poll_and_no_further_round_follows(world, orch):
    world.publish(poll_flow())
    wf = started(world, orch)
    answer_rounds(world, orch, "PENDING", "DONE")
    world.db.advance(10 * INTERVAL)
    orch.drain()
    poll = poll_of(world, wf)
    assert (poll["state"], poll["rounds_used"], poll["current_task_id"]) == ("SETTLED", 2, None)
    assert [r["outcome"] for r in poll["rounds"]] == ["POLL_PENDING", "DONE"]
    assert world.db.scalar("SELECT COUNT(*) FROM pulse_tasks") == 2
    assert world.instance(wf)["status"] == "SUCCEEDED"
    assert world.db.scalar("SELECT COUNT(*) FROM weave_pending_advances") == 0


def test_P3_row4_a_failed_round_never_creates_a_new_round_past_an_exhausted_attempt_budget(world, orch):
    world.publish(poll_flow(retry={**RETRY, "max_attempts": 2}))
    wf = started(world, orch)
    fail(world, retryable=True)
    world.db.advance(1_000)
    fail(world, retryable=True)  # the second and last attempt
    assert orch.drain()["INBOX:REVIEW"] == 1
    world.db.advance(10 * INTERVAL)
    orch.drain()
    poll = poll_of(world, wf)
    assert (poll["state"], poll["rounds_used"], poll["current_task_id"]) == ("STOPPED", 1, None)
    assert poll["rounds"][0]["outcome"] == "FAILED"
    assert world.db.scalar("SELECT COUNT(*) FROM pulse_tasks") == 1
    assert world.db.scalar("SELECT attempts_used FROM pulse_tasks") == 2
    inst = world.instance(wf)
    assert inst["status"] == "NEEDS_REVIEW" and inst["gate"] == "CLOSED"
    assert inst["steps"][0]["status"] == "NEEDS_REVIEW"
    reason, = inst["review_reasons"]
    assert (reason["code"], reason["step_key"], reason["activation_sequence"]) == ("POLL_FAILED", "check", 1)
    assert reason["detail"]["round"] == 1 and reason["detail"]["attempts_used"] == 2
    assert reason["detail"]["max_attempts"] == 2 and reason["detail"]["result"]["reason"] == "ATTEMPTS_EXHAUSTED"
    assert checkpoint(world, wf) is None


def test_P3_row5_rounds_exhausted_leaves_rounds_unchanged_and_the_step_in_review(world, orch):
    world.publish(poll_flow(max_rounds=2))
    wf = started(world, orch)
    answer_rounds(world, orch, "PENDING", "PENDING")
    world.db.advance(10 * INTERVAL)
    orch.drain()
    poll = poll_of(world, wf)
    assert (poll["state"], poll["rounds_used"], poll["max_rounds"]) == ("STOPPED", 2, 2)
    assert world.db.scalar("SELECT COUNT(*) FROM pulse_tasks") == 2
    assert review_codes(world, wf) == ["POLL_ROUNDS_EXHAUSTED"]


def test_P3_row5_at_the_poll_deadline_an_in_flight_task_is_still_collected(world, orch):
    world.publish(poll_flow(timeout_ms=60_000))
    wf = started(world, orch)
    got = claim(world, lease_ms=120_000)
    world.db.advance(60_000)
    orch.drain()
    assert review_codes(world, wf) == ["POLL_DEADLINE_IN_FLIGHT"]
    pulse.attempt_complete(world.db.conn, got["attempt_id"], "w1", {"status": "PENDING"})
    orch.drain()
    poll = poll_of(world, wf)
    assert poll["rounds_used"] == 1 and poll["rounds"][0]["outcome"] == "POLL_PENDING"
    assert world.db.scalar("SELECT COUNT(*) FROM pulse_tasks") == 1


# --- P-4 creating round n+1 ---------------------------------------------------------------------------------
def test_P4_the_next_round_reuses_round_ones_frozen_inputs_and_is_not_created_early(world, orch):
    world.publish({"name": "pay", "steps": [
        {"key": "quote", "type": "TASK", "queue": "payments", "handler": "example.echo", "handler_version": "1",
         "input": {"amount": "$.input.amount"}},
        poll_step(after=["quote"], input={"order_id": "$.input.order_id", "amount": "$.steps.quote.output.amount"},
                  business_key="$.input.order_id", mutex_key="$.steps.quote.output.amount", priority=9,
                  task_timeout_ms=20_000)]})
    wf = started(world, orch, input={"order_id": "o-5", "amount": 12})
    answer(world, {"amount": 12})
    orch.drain()
    # The definition changes after activation: the running poll keeps what it froze.
    world.publish(poll_flow(priority=1, retry={**RETRY, "max_attempts": 9}, task_timeout_ms=1_000))
    answer(world, "PENDING")
    orch.drain()
    world.db.advance(INTERVAL - 5_000)
    assert orch.drain()["CHECKPOINT:ROUND"] == 0 and poll_of(world, wf)["rounds_used"] == 1
    world.db.advance(5_000)
    orch.drain()
    first, second = world.db.rows("SELECT * FROM pulse_tasks WHERE step_key = 'check' ORDER BY round_no")
    same = ("input", "handler", "handler_version", "queue_id", "priority", "business_key", "mutex_key",
            "max_attempts", "initial_backoff_ms", "backoff_coefficient", "max_backoff_ms", "timeout_ms", "app_id")
    assert {k: second[k] for k in same} == {k: first[k] for k in same}
    assert json.loads(second["input"]) == {"order_id": "o-5", "amount": 12} and second["mutex_key"] == "12"
    assert second["deadline_at"] == second["created_at"] + dt.timedelta(seconds=20)
    started_ev = next(e for e in world.events(wf) if e["type"] == "POLL_ROUND_STARTED")
    assert started_ev["data"]["round"] == 2 and started_ev["data"]["task_id"] == f"tsk_{second['id']}"
    assert world.db.scalar("SELECT COUNT(*) FROM weave_audit WHERE action = 'poll.round'") == 2


def test_P4_a_pending_answer_consumed_after_its_interval_starts_the_next_round_in_the_same_transaction(world, orch):
    world.publish(poll_flow())
    wf = started(world, orch)
    answer(world, "PENDING")
    occurred = world.db.scalar("SELECT occurred_at FROM pulse_inbox")
    world.db.advance(INTERVAL + 5_000)  # the orchestrator was slow: the interval is over before consumption
    outcomes = orch.drain()
    assert outcomes["INBOX:NEXT_ROUND"] == 1 and outcomes["CHECKPOINT:ROUND"] == 0
    poll = poll_of(world, wf)
    assert (poll["state"], poll["rounds_used"]) == ("IN_FLIGHT", 2)
    assert [r["outcome"] for r in poll["rounds"]] == ["POLL_PENDING", "IN_FLIGHT"]
    assert poll["rounds"][0]["result_at"] == occurred.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    assert checkpoint(world, wf)["due_at"] == parse(poll["poll_deadline"])
    types = event_types(world, wf)
    assert types[-2:] == ["POLL_ROUND_PENDING", "POLL_ROUND_STARTED"]
    started_ev = world.events(wf)[-1]
    assert parse(started_ev["data"]["due_at"]) == occurred + dt.timedelta(milliseconds=INTERVAL)


def test_P6_a_pending_answer_consumed_after_its_interval_while_paused_defers_the_next_round(world, orch):
    world.publish(poll_flow())
    wf = started(world, orch)
    answer(world, "PENDING")
    routines.instance_pause(world.db.conn, world.token, world.namespace, wf, "hold on", "pause-1")
    world.db.advance(INTERVAL + 5_000)
    assert orch.drain()["INBOX:DEFERRED"] == 1
    poll = poll_of(world, wf)
    assert (poll["state"], poll["rounds_used"]) == ("WAITING", 1)
    cp = checkpoint(world, wf)
    assert cp["due_at"] == parse(poll["next_poll_at"]) and "paused" in cp["last_error"] and in_flight(world) == 0


def test_P4_the_new_tasks_deadline_is_capped_by_the_poll_deadline(world, orch):
    world.publish(poll_flow(timeout_ms=INTERVAL + 10_000, task_timeout_ms=HOUR))
    started(world, orch)
    answer(world, "PENDING")
    orch.drain()
    world.db.advance(INTERVAL)
    orch.drain()
    assert world.db.scalar("SELECT deadline_at FROM pulse_tasks WHERE round_no = 2") == \
        world.db.scalar("SELECT poll_deadline FROM weave_poll_states")


@pytest.mark.breaks_invariants("M-4.4")
def test_P4_rounds_that_do_not_verify_are_left_for_an_operator(world, orch):
    world.publish(poll_flow())
    wf = started(world, orch)
    answer(world, "PENDING")
    orch.drain()
    world.db.execute("UPDATE weave_poll_states SET rounds_used = 2")  # a gap: round 2 was never recorded
    world.db.advance(INTERVAL)
    before = world.db.table_counts()
    assert orch.drain(max_rounds=2)["CHECKPOINT:FAILED"] >= 1
    assert world.db.table_counts() == before
    cp = checkpoint(world, wf)
    assert cp["attempts"] >= 1 and "P-4" in cp["last_error"] and in_flight(world) == 0


def test_P4_a_round_numbered_after_the_rounds_used_stops_the_next_round(world, orch):
    """Round n is read by its key with none after it: a round already numbered n + 1 (as a second creator of the
    same round would leave) is not built on."""
    world.publish(poll_flow())
    wf = started(world, orch)
    answer(world, "PENDING")
    orch.drain()
    world.db.execute("INSERT INTO weave_poll_rounds (namespace_id, instance_id, activation_id, round_no, task_id, "
                     "outcome, created_at) SELECT namespace_id, instance_id, activation_id, 2, task_id, "
                     "'POLL_PENDING', created_at FROM weave_poll_rounds WHERE round_no = 1")
    world.db.advance(INTERVAL)
    assert orch.drain(max_rounds=2)["CHECKPOINT:FAILED"] >= 1
    cp = checkpoint(world, wf)
    assert "P-4" in cp["last_error"] and in_flight(world) == 0
    world.db.execute("DELETE FROM weave_poll_rounds WHERE round_no = 2")


def test_P4_the_latest_rounds_task_still_in_flight_stops_the_next_round(world, orch):
    world.publish(poll_flow())
    wf = started(world, orch)
    answer(world, "PENDING")
    orch.drain()
    task = world.db.scalar("SELECT id FROM pulse_tasks WHERE round_no = 1")
    world.db.execute("UPDATE pulse_tasks SET status = 'QUEUED' WHERE id = %s", task)
    world.db.advance(INTERVAL)
    before = world.db.table_counts()
    assert orch.drain(max_rounds=2)["CHECKPOINT:FAILED"] >= 1
    assert world.db.table_counts() == before and "P-4" in checkpoint(world, wf)["last_error"]
    world.db.execute("UPDATE pulse_tasks SET status = 'SUCCEEDED' WHERE id = %s", task)


def test_P4_M4_4b_a_task_in_flight_of_an_earlier_round_stops_the_next_round_and_is_caught(world, orch):
    """No task of the activation may be in flight, an earlier round's included: the check counts them among the
    instance's tasks in flight (a few rows, however many rounds ran), and the invariant names such a task."""
    world.publish(poll_flow())
    wf = started(world, orch)
    answer_rounds(world, orch, "PENDING", "PENDING")
    assert "M-4.4b" not in invariants.violations(world.db.conn)
    world.db.execute("UPDATE pulse_tasks SET status = 'QUEUED' WHERE round_no = 1")
    assert "M-4.4b" in invariants.violations(world.db.conn)
    world.db.advance(INTERVAL)
    before = world.db.table_counts()
    assert orch.drain(max_rounds=2)["CHECKPOINT:FAILED"] >= 1
    assert world.db.table_counts() == before and "P-4" in checkpoint(world, wf)["last_error"]
    world.db.execute("UPDATE pulse_tasks SET status = 'SUCCEEDED' WHERE round_no = 1")


def test_P4_R11_a_round_start_reads_as_much_at_round_30_as_at_round_3(world, orch):
    """The verification reads round n and round 1 by key: it read every earlier round, locked, and every task of
    the activation, so a poll of 5,000 rounds read 5,000 rows for each new one."""
    world.publish(poll_flow(max_rounds=100, interval_ms=1_000))
    wf = started(world, orch)

    def start_reads() -> int:
        answer(world, "PENDING")
        orch.drain()  # the answer consumed; the next round falls due a second later
        world.db.advance(1_000)
        before = handler_reads(world.db.conn)
        assert advance_checkpoint(world, wf) == "ROUND"
        return handler_reads(world.db.conn) - before

    early = [start_reads() for _ in range(3)]
    for _ in range(26):
        start_reads()
    late = [start_reads() for _ in range(3)]
    assert poll_of(world, wf)["rounds_used"] == 33
    assert min(late) <= min(early) + 2, (early, late)


# --- P-5 one transaction ------------------------------------------------------------------------------------
@pytest.mark.parametrize("table", ["weave_poll_rounds", "weave_audit"])
def test_P5_a_failed_round_or_audit_insert_in_the_consumers_transaction_rolls_back_the_answer_too(world, orch, table):
    world.publish(poll_flow())
    wf = started(world, orch)
    answer(world, "PENDING")
    condition = "NEW.round_no = 2" if table == "weave_poll_rounds" else "NEW.action = 'poll.round'"
    world.db.execute(f"CREATE TRIGGER test_poll_write_fails BEFORE INSERT ON {table} FOR EACH ROW "
                     f"BEGIN IF {condition} THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'store down'; END IF; END")
    world.db.advance(INTERVAL)  # consumed after the interval: the next round would start in the same transaction
    before = world.db.table_counts()
    rounds_before = world.db.rows("SELECT * FROM weave_poll_rounds")
    assert orch.drain(max_rounds=2)["INBOX:FAILED"] >= 1
    assert world.db.table_counts() == before and world.db.rows("SELECT * FROM weave_poll_rounds") == rounds_before
    inbox = world.db.row("SELECT * FROM pulse_inbox")
    assert inbox["state"] == "PENDING" and inbox["attempts"] >= 1 and "store down" in inbox["last_error"]
    assert in_flight(world) == 0 and poll_of(world, wf)["state"] == "IN_FLIGHT"
    world.db.execute("DROP TRIGGER test_poll_write_fails")
    world.db.advance(60_000)
    orch.drain()
    poll = poll_of(world, wf)
    assert poll["rounds_used"] == 2 and [r["outcome"] for r in poll["rounds"]] == ["POLL_PENDING", "IN_FLIGHT"]


@pytest.mark.parametrize("table", ["weave_poll_rounds", "weave_audit"])
def test_P5_a_failed_round_or_audit_insert_rolls_back_the_task_and_its_quota(world, orch, table):
    routines.app_put(world.db.conn, world.admin, world.namespace, "billing", 1)
    world.publish(poll_flow())
    wf = started(world, orch)
    answer(world, "PENDING")
    orch.drain()
    condition = "NEW.round_no = 2" if table == "weave_poll_rounds" else "NEW.action = 'poll.round'"
    world.db.execute(f"CREATE TRIGGER test_poll_write_fails BEFORE INSERT ON {table} FOR EACH ROW "
                     f"BEGIN IF {condition} THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'store down'; END IF; END")
    world.db.advance(INTERVAL)
    before = world.db.table_counts()
    state_before = world.db.row("SELECT * FROM weave_poll_states")
    due = checkpoint(world, wf)["due_at"]
    assert orch.drain(max_rounds=2)["CHECKPOINT:FAILED"] >= 1
    assert world.db.table_counts() == before
    assert world.db.row("SELECT * FROM weave_poll_states") == state_before
    assert in_flight(world) == 0  # the quota slot the task took is free again
    cp = checkpoint(world, wf)
    assert cp["due_at"] == due and cp["attempts"] >= 1 and "store down" in cp["last_error"]
    world.db.execute("DROP TRIGGER test_poll_write_fails")
    world.db.advance(60_000)
    orch.drain()
    poll = poll_of(world, wf)
    assert poll["rounds_used"] == 2 and poll["state"] == "IN_FLIGHT" and in_flight(world) == 1


# --- P-6 deferral -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("limit", ["quota", "capacity"])
def test_P6_a_full_app_or_queue_defers_the_round_without_consuming_it(world, orch, limit):
    world.publish(poll_flow())
    wf = started(world, orch)
    answer(world, "PENDING")
    orch.drain()
    other = started(world, orch, input={"order_id": "other"})  # takes the only slot below
    if limit == "quota":
        routines.app_put(world.db.conn, world.admin, world.namespace, "billing", 1)
    else:
        routines.queue_put(world.db.conn, world.admin, world.namespace, "payments", 1)
    state_before = world.db.row("SELECT * FROM weave_poll_states WHERE instance_id = %s", world.internal_id(wf))
    world.db.advance(INTERVAL)
    assert orch.drain()["CHECKPOINT:DEFERRED"] == 1
    cp = checkpoint(world, wf)
    assert cp["due_at"] == state_before["next_poll_at"] and cp["available_at"] > world.db.now()
    assert "full" in cp["last_error"] and cp["attempts"] == 0
    assert world.db.row("SELECT * FROM weave_poll_states WHERE instance_id = %s", world.internal_id(wf)) == \
        state_before
    assert world.db.scalar("SELECT COUNT(*) FROM pulse_tasks WHERE instance_id = %s", world.internal_id(wf)) == 1
    answer(world, "DONE")  # the other instance's task ends and frees the slot
    orch.drain()
    assert world.instance(other)["status"] == "SUCCEEDED"
    world.db.advance(1_000)
    orch.drain()
    poll = poll_of(world, wf)
    assert poll["rounds_used"] == 2 and poll["state"] == "IN_FLIGHT"
    assert parse(poll["poll_deadline"]) == state_before["poll_deadline"]


def test_P5_R8_a_round_takes_its_slot_last_and_losing_the_race_for_it_undoes_the_whole_round(world, orch, database):
    """A round start writes its task, round, poll state, checkpoint, event and audit row first and takes its app's
    and queue's slot last: a creation holds their rows only from its slot to its commit, so the creations of one
    app queue behind each other for that long only. A creator that had not committed when the round looked, and
    takes the last slot, wins: the round's whole decision is undone (ROOM_TAKEN, transient) and the call tries it
    again at once, as after a deadlock: the retry defers on the room check (R-8)."""
    world.publish(poll_flow())
    wf = started(world, orch)
    answer(world, "PENDING")
    orch.drain()
    routines.app_put(world.db.conn, world.admin, world.namespace, "billing", 1)  # room for the next round only
    state_before = world.db.row("SELECT * FROM weave_poll_states")
    world.db.advance(INTERVAL)
    rival = world.db.connect()  # a creator of the app that takes the last slot and has not committed yet
    rounder = dbmod.connect(database)
    due = checkpoint(world, wf)["id"]
    failures: list[BaseException] = []

    def round_start() -> None:
        try:
            with rounder.cursor() as cur:
                cur.execute("SET SESSION innodb_lock_wait_timeout = 20")
            dbmod.call(rounder, "weave_checkpoint_advance", due)
        except BaseException as exc:  # looked at below
            failures.append(exc)

    try:
        with rival.cursor() as cur:
            cur.execute("START TRANSACTION")
            cur.execute("UPDATE weave_apps SET slots_taken = slots_taken + 1 WHERE name = 'billing'")
        thread = threading.Thread(target=round_start)
        thread.start()
        seen: list[dict] = []

        def waiting_round() -> bool:
            seen[:] = world.db.rows("SELECT trx_rows_modified AS written, trx_query AS query FROM "
                                    "information_schema.INNODB_TRX WHERE trx_state = 'LOCK WAIT' AND "
                                    "trx_mysql_thread_id = %s", rounder.thread_id())
            return bool(seen) or not thread.is_alive()

        # INNODB_TRX is a cache that a read refreshes only when the one before is 0.1 s old.
        assert wait_for(waiting_round, timeout=10, interval=0.2) and seen, failures
        (waiting,) = seen
        # Everything of the round is written (task, round, state, checkpoint, instance, event, audit) before the
        # one statement that waits: the slot's.
        assert waiting["written"] >= 7 and waiting["query"].lstrip().startswith("UPDATE weave_apps"), waiting
        rival.commit()
        thread.join(30)
    finally:
        rival.rollback()
        rival.close()
    assert not thread.is_alive() and failures == []
    assert world.db.row("SELECT * FROM weave_poll_states") == state_before
    assert world.db.scalar("SELECT COUNT(*) FROM pulse_tasks") == 1
    # The retry inside the call: no room, so the round waits (P-6), and nothing is left for a runner to redo.
    assert checkpoint(world, wf)["last_error"].startswith("QUOTA_FULL")
    assert "CHECKPOINT:DEFERRED" not in orch.drain()
    with rounder.cursor() as cur:  # the rival's task never existed: its slot goes back for the invariants
        cur.execute("UPDATE weave_apps SET slots_taken = slots_taken - 1 WHERE name = 'billing'")
    rounder.commit()
    rounder.close()
    world.db.advance(1_000)
    assert orch.drain()["CHECKPOINT:ROUND"] == 1 and poll_of(world, wf)["rounds_used"] == 2


def test_P6_pause_defers_the_round_and_resume_makes_it_due_at_once(world, orch):
    world.publish(poll_flow())
    wf = started(world, orch)
    answer(world, "PENDING")
    orch.drain()
    routines.instance_pause(world.db.conn, world.token, world.namespace, wf, "hold on", "pause-1")
    state_before = world.db.row("SELECT * FROM weave_poll_states")
    world.db.advance(INTERVAL)
    assert orch.drain()["CHECKPOINT:DEFERRED"] == 1
    cp = checkpoint(world, wf)
    assert "paused" in cp["last_error"] and cp["available_at"] > world.db.now() + dt.timedelta(seconds=50)
    assert world.db.row("SELECT * FROM weave_poll_states") == state_before
    assert world.db.scalar("SELECT COUNT(*) FROM pulse_tasks") == 1
    world.db.advance(10_000)
    assert orch.drain()["CHECKPOINT:ROUND"] == 0
    routines.instance_resume(world.db.conn, world.token, world.namespace, wf, "go on", "resume-1")
    orch.drain()
    poll = poll_of(world, wf)
    assert poll["rounds_used"] == 2 and parse(poll["poll_deadline"]) == state_before["poll_deadline"]


def test_P6_a_pause_never_hides_the_poll_deadline(world, orch):
    world.publish(poll_flow(timeout_ms=INTERVAL + 20_000))
    wf = started(world, orch)
    answer(world, "PENDING")
    orch.drain()
    routines.instance_pause(world.db.conn, world.token, world.namespace, wf, "hold on", "pause-1")
    world.db.advance(INTERVAL)
    orch.drain()
    assert checkpoint(world, wf)["available_at"] == world.db.scalar("SELECT poll_deadline FROM weave_poll_states")
    world.db.advance(20_000)
    orch.drain()
    assert review_codes(world, wf) == ["POLL_DEADLINE"]


@pytest.mark.parametrize("what", ["identity", "app"])
def test_P6_a_disabled_identity_or_app_defers_the_round(world, orch, what):
    world.publish(poll_flow())
    starter = world.credential(["workflows:start", "workflows:read"], actor="starter")
    wf = world.start("pay", {"order_id": "o"}, token=starter["token"])
    orch.drain()
    answer(world, "PENDING")
    orch.drain()
    if what == "identity":
        routines.credential_disable(world.db.conn, world.admin, world.namespace, starter["credential_id"])
    else:
        routines.app_put(world.db.conn, world.admin, world.namespace, "billing", 1000, "DISABLED")
    world.db.advance(INTERVAL)
    assert orch.drain()["CHECKPOINT:DEFERRED"] == 1
    assert "disabled" in checkpoint(world, wf)["last_error"]
    assert world.db.scalar("SELECT rounds_used FROM weave_poll_states") == 1 and in_flight(world) == 0


# --- P-7 success --------------------------------------------------------------------------------------------
def test_P7_a_success_status_settles_the_step_with_the_result_object_and_successors_follow(world, orch):
    world.publish(poll_flow(then=True))
    wf = started(world, orch)
    answer(world, {"status": "PAID", "output": {"receipt": "r-1", "amount": 12.50}})
    assert orch.drain()["INBOX:SUCCEEDED"] == 1
    inst = world.instance(wf)
    check, after = inst["steps"]
    assert check["status"] == "SUCCEEDED"
    assert check["output"] == {"status": "PAID", "output": {"receipt": "r-1", "amount": 12.5}}
    assert after["status"] == "ACTIVE"
    assert json.loads(world.db.scalar("SELECT input FROM pulse_tasks WHERE step_key = 'after'")) == \
        {"paid": {"receipt": "r-1", "amount": 12.5}}
    assert check["poll"]["state"] == "SETTLED" and check["poll"]["rounds"][0]["outcome"] == "DONE"
    assert world.db.scalar("SELECT ended_at FROM weave_activations WHERE step_key = 'check'") is not None
    assert checkpoint(world, wf) is None
    types = event_types(world, wf)
    assert types.index("POLL_SUCCEEDED") < len(types) - 1 and types[-1] == "STEP_ACTIVATED"
    assert world.db.scalar("SELECT COUNT(*) FROM weave_audit WHERE action = 'poll.settle'") == 1


# --- P-8 rounds that need a person ----------------------------------------------------------------------------
@pytest.mark.parametrize("result, outcome, code, because", [
    ({"status": "MANUAL_CHECK", "output": {"why": "amount differs"}}, "REVIEW_VALUE", "POLL_REVIEW_VALUE", None),
    ({"status": "SHIPPED"}, "INVALID", "POLL_INVALID_RESULT",
     'its status "SHIPPED" is none of the step\'s pending, success and review statuses (case and spaces count)'),
    ({"output": {"no": "status"}}, "INVALID", "POLL_INVALID_RESULT", "the result object has no status"),
    ({"status": 7}, "INVALID", "POLL_INVALID_RESULT", "its status is integer, not a string"),
    ({"status": "pending"}, "INVALID", "POLL_INVALID_RESULT",
     'its status "pending" is none of the step\'s pending, success and review statuses (case and spaces count)'),
    (["PENDING"], "INVALID", "POLL_INVALID_RESULT", 'the result is array, not an object {"status": ...}'),
    ("PENDING", "INVALID", "POLL_INVALID_RESULT", 'the result is string, not an object {"status": ...}'),
    (None, "INVALID", "POLL_INVALID_RESULT", 'the result is null, not an object {"status": ...}'),
])
def test_P8_review_values_and_invalid_results_go_to_review_with_the_facts(world, orch, result, outcome, code,
                                                                           because):
    """Judged in the report's own transaction (Settle at Report), as the orchestrator judges them. An invalid result
    says what is wrong with it."""
    world.publish(poll_flow())
    wf = started(world, orch)
    got = claim(world)
    pulse.attempt_complete(world.db.conn, got["attempt_id"], "w1", result_json=json.dumps(result))
    assert world.db.scalar("SELECT state FROM pulse_inbox") == "CONSUMED"
    assert "INBOX:REVIEW" not in orch.drain()
    inst = world.instance(wf)
    assert inst["status"] == "NEEDS_REVIEW" and inst["gate"] == "CLOSED"
    assert inst["steps"][0]["status"] == "NEEDS_REVIEW"
    poll = inst["steps"][0]["poll"]
    assert poll["rounds"][0]["outcome"] == outcome and poll["rounds"][0]["result"] == result
    assert poll["state"] == "STOPPED" and poll["rounds_used"] == 1
    reason, = inst["review_reasons"]
    assert reason["code"] == code and reason["detail"]["result"] == result and reason["detail"]["round"] == 1
    assert reason["detail"]["task_id"] == got["task_id"]
    assert reason["detail"].get("invalid_because") == because
    world.db.advance(10 * INTERVAL)
    orch.drain()
    assert world.db.scalar("SELECT COUNT(*) FROM pulse_tasks") == 1


@pytest.mark.parametrize("how, outcome, code", [
    ("non_retryable", "FAILED", "POLL_FAILED"),
    ("lease_lost", "UNKNOWN", "POLL_UNKNOWN"),
    ("expired", "FAILED", "POLL_FAILED"),
])
def test_P8_failed_unknown_and_expired_rounds_go_to_review(world, orch, how, outcome, code):
    world.publish(poll_flow(task_timeout_ms=60_000))
    wf = started(world, orch)
    if how == "non_retryable":
        fail(world, retryable=False)
    elif how == "lease_lost":
        claim(world, lease_ms=5_000)
        world.db.advance(5_001)
    else:
        world.db.advance(60_001)  # the task never started before its own deadline (K-6)
    orch.drain()
    poll = poll_of(world, wf)
    assert poll["rounds"][0]["outcome"] == outcome and poll["current_task_id"] is None
    assert review_codes(world, wf) == [code]
    detail = world.instance(wf)["review_reasons"][0]["detail"]
    assert detail["kind"] == {"non_retryable": "FAILED", "lease_lost": "UNKNOWN", "expired": "EXPIRED"}[how]
    assert world.step(wf, "check")["status"] == "NEEDS_REVIEW" and world.instance(wf)["gate"] == "CLOSED"


def test_P8_a_cancelled_round_is_recorded(world, orch):
    world.publish(poll_flow())
    wf = started(world, orch)
    task_id = world.db.scalar("SELECT id FROM pulse_tasks")
    world.db.execute("CALL _pulse_task_cancel(%s, %s, @o)", task_id, world.db.now())
    orch.drain()
    poll = poll_of(world, wf)
    assert poll["rounds"][0]["outcome"] == "CANCELLED" and poll["current_task_id"] is None
    # No cancel flow owned it: a round that answered nothing is a failed round, never a reason for a new one.
    assert review_codes(world, wf) == ["POLL_FAILED"] and poll["rounds_used"] == 1


# --- P-9 budgets run out ------------------------------------------------------------------------------------
def test_P9_pending_on_the_last_round_is_rounds_exhausted(world, orch):
    world.publish(poll_flow(max_rounds=1))
    wf = started(world, orch)
    answer(world, {"status": "PENDING", "output": {"progress": 90}})
    orch.drain()
    inst = world.instance(wf)
    reason, = inst["review_reasons"]
    assert reason["code"] == "POLL_ROUNDS_EXHAUSTED" and reason["detail"]["rounds_used"] == 1
    assert reason["detail"]["max_rounds"] == 1 and reason["detail"]["result"]["output"] == {"progress": 90}
    poll = inst["steps"][0]["poll"]
    assert (poll["state"], poll["rounds_used"], poll["rounds"][0]["outcome"]) == ("STOPPED", 1, "POLL_PENDING")
    assert poll["next_poll_at"] is not None  # kept for continue
    assert world.db.scalar("SELECT stop_reason FROM weave_poll_states") == "POLL_ROUNDS_EXHAUSTED"
    assert inst["steps"][0]["status"] == "NEEDS_REVIEW" and checkpoint(world, wf) is None


def test_P9_the_poll_deadline_while_waiting_between_rounds_goes_to_review(world, orch):
    world.publish(poll_flow(timeout_ms=INTERVAL + 15_000))
    wf = started(world, orch)
    answer_rounds(world, orch, "PENDING", "PENDING")
    world.db.advance(14_000)
    assert orch.drain()["CHECKPOINT:REVIEW"] == 0
    world.db.advance(1_000)
    assert orch.drain()["CHECKPOINT:REVIEW"] == 1
    inst = world.instance(wf)
    assert [r["code"] for r in inst["review_reasons"]] == ["POLL_DEADLINE"]
    poll = inst["steps"][0]["poll"]
    assert (poll["state"], poll["rounds_used"]) == ("STOPPED", 2)
    assert inst["steps"][0]["status"] == "NEEDS_REVIEW" and inst["gate"] == "CLOSED"
    assert world.db.scalar("SELECT COUNT(*) FROM pulse_tasks") == 2


# --- P-10 results stored before the deadline ----------------------------------------------------------------
def test_P10_a_success_stored_before_the_deadline_but_consumed_after_it_settles_done(world, orch):
    world.publish(poll_flow(timeout_ms=60_000))
    wf = started(world, orch)
    world.db.advance(50_000)
    answer(world, "DONE")  # recorded in time; every orchestrator is down
    world.db.advance(30_000)  # the deadline passes before anyone consumes it
    assert advance_checkpoint(world, wf) == "INBOX_FIRST"  # the scan's time never overrules the stored result
    cp = checkpoint(world, wf)
    assert cp["available_at"] > world.db.now() and review_codes(world, wf) == []
    orch.drain()
    inst = world.instance(wf)
    assert inst["status"] == "SUCCEEDED" and inst["steps"][0]["output"] == {"status": "DONE"}
    assert inst["steps"][0]["poll"]["rounds"][0]["outcome"] == "DONE"


def test_P10_a_pending_stored_before_the_deadline_ends_at_the_deadline_not_in_a_new_round(world, orch):
    world.publish(poll_flow(timeout_ms=60_000))
    wf = started(world, orch)
    world.db.advance(50_000)
    answer(world, "PENDING")
    world.db.advance(30_000)
    orch.drain()
    assert review_codes(world, wf) == ["POLL_DEADLINE"]
    assert poll_of(world, wf)["rounds"][0]["outcome"] == "POLL_PENDING"
    assert world.db.scalar("SELECT COUNT(*) FROM pulse_tasks") == 1


# --- P-11 the deadline with the round in flight ---------------------------------------------------------------
def test_P11_in_flight_at_the_deadline_goes_to_review_and_a_later_unknown_is_still_recorded(world, orch):
    world.publish(poll_flow(timeout_ms=60_000))
    wf = started(world, orch)
    got = claim(world, lease_ms=120_000)
    task_id = tid(got["task_id"])
    world.db.advance(60_000)
    assert orch.drain()["CHECKPOINT:REVIEW"] == 1
    inst = world.instance(wf)
    assert inst["status"] == "NEEDS_REVIEW" and inst["gate"] == "CLOSED"
    assert [r["code"] for r in inst["review_reasons"]] == ["POLL_DEADLINE_IN_FLIGHT"]
    step = inst["steps"][0]
    assert step["status"] == "ACTIVE"  # the round keeps its task until Pulse records its end
    assert step["poll"]["current_task_id"] == f"tsk_{task_id}" and step["poll"]["rounds"][0]["outcome"] == "IN_FLIGHT"
    assert world.db.scalar("SELECT released_at FROM pulse_permits") is None  # the clock released nothing
    assert world.db.scalar("SELECT status FROM pulse_tasks") == "RUNNING"
    assert checkpoint(world, wf) is None
    world.db.advance(60_001)  # the worker is gone: its lease runs out (K-4)
    outcomes = orch.drain()
    assert outcomes["LEASE:UNKNOWN"] == 1 and outcomes["INBOX:REVIEW"] == 1
    inst = world.instance(wf)
    step = inst["steps"][0]
    assert step["status"] == "NEEDS_REVIEW"
    assert step["poll"]["rounds"][0]["outcome"] == "UNKNOWN" and step["poll"]["current_task_id"] is None
    assert step["poll"]["rounds"][0]["result"]["error"] == "LEASE_LOST"
    assert [r["code"] for r in inst["review_reasons"]] == ["POLL_DEADLINE_IN_FLIGHT"]  # still open, not replaced
    assert world.db.scalar("SELECT released_at FROM pulse_permits") is not None
    assert "POLL_ROUND_SETTLED" in event_types(world, wf)


def test_P11_a_late_success_is_recorded_on_the_round_but_never_clears_the_review(world, orch):
    world.publish(poll_flow(timeout_ms=60_000, then=True))
    wf = started(world, orch)
    got = claim(world, lease_ms=120_000)
    world.db.advance(60_000)
    orch.drain()
    pulse.attempt_complete(world.db.conn, got["attempt_id"], "w1", {"status": "DONE"})
    orch.drain()
    inst = world.instance(wf)
    assert inst["status"] == "NEEDS_REVIEW" and inst["steps"][0]["status"] == "NEEDS_REVIEW"
    assert inst["steps"][0]["poll"]["rounds"][0]["outcome"] == "DONE"
    assert inst["steps"][0]["output"] is None and inst["steps"][1]["status"] == "PENDING"
    assert [r["code"] for r in inst["review_reasons"]] == ["POLL_DEADLINE_IN_FLIGHT"]


def test_P11_an_outcome_consumed_after_the_deadline_is_judged_by_its_own_time(world, orch):
    world.publish(poll_flow(timeout_ms=60_000))
    wf = started(world, orch)
    got = claim(world, lease_ms=120_000)
    world.db.advance(61_000)  # every orchestrator is down at the deadline
    with world.held(wf):  # (the report's own consumption would judge it the same way)
        pulse.attempt_complete(world.db.conn, got["attempt_id"], "w1", {"status": "DONE"})  # after the deadline
    inbox_id = world.db.scalar("SELECT id FROM pulse_inbox")
    assert pulse.inbox_consume(world.db.conn, inbox_id) == "REVIEW"  # consumed before the deadline checkpoint
    inst = world.instance(wf)
    assert [r["code"] for r in inst["review_reasons"]] == ["POLL_DEADLINE_IN_FLIGHT"]
    assert inst["steps"][0]["status"] == "NEEDS_REVIEW"
    assert inst["steps"][0]["poll"]["rounds"][0]["outcome"] == "DONE"
    orch.drain()
    assert [r["code"] for r in world.instance(wf)["review_reasons"]] == ["POLL_DEADLINE_IN_FLIGHT"]


def test_P11_a_round_still_queued_at_the_deadline_is_expired_and_the_step_goes_to_review(world, orch):
    world.publish(poll_flow(timeout_ms=60_000))
    wf = started(world, orch)
    task = world.db.row("SELECT * FROM pulse_tasks")
    world.db.advance(60_000)
    assert advance_checkpoint(world, wf) == "REVIEW"  # before the expiry class got to it
    assert world.db.scalar("SELECT status FROM pulse_tasks") == "EXPIRED"
    inbox = world.db.row("SELECT * FROM pulse_inbox")
    assert (inbox["kind"], inbox["state"], inbox["occurred_at"]) == ("EXPIRED", "CONSUMED", task["deadline_at"])
    inst = world.instance(wf)
    assert [r["code"] for r in inst["review_reasons"]] == ["POLL_DEADLINE"]
    assert inst["steps"][0]["status"] == "NEEDS_REVIEW"
    assert inst["steps"][0]["poll"]["rounds"][0]["outcome"] == "FAILED"
    assert world.db.scalar("SELECT COUNT(*) FROM pulse_attempts") == 0
    assert world.db.scalar("SELECT COUNT(*) FROM weave_audit WHERE action = 'task.expire'") == 1
    assert orch.drain()["TASK_EXPIRY:EXPIRED"] == 0


def test_P10_K4_a_lease_lost_before_the_poll_deadline_is_the_round_s_outcome_whichever_candidate_comes_first(
        world, orch):
    """Every orchestrator was down from before the attempt's lease ran out until after the poll deadline. The
    deadline's checkpoint, served first, found the task still RUNNING and opened POLL_DEADLINE_IN_FLIGHT, while the
    same facts showed its lease had ended an hour before; the lease's UNKNOWN, dated before the deadline, then
    settled the round under that reason. By the stored times the attempt was lost before the deadline: the deadline
    leaves the round to its outcome, and the review says POLL_UNKNOWN, as it does with the runner up."""
    world.publish(poll_flow(timeout_ms=120_000))
    wf = started(world, orch)
    claim(world, lease_ms=60_000)  # the worker is gone: its lease ends at +60 s, the poll deadline is +120 s
    world.db.advance(180_000)
    assert advance_checkpoint(world, wf) == "INBOX_FIRST"  # the deadline's candidate served before the lease's
    assert world.instance(wf)["status"] == "RUNNING"
    assert world.db.scalar("SELECT deferred_reason FROM weave_pending_advances") == "LEASE_LOST"
    outcomes = orch.drain()
    assert outcomes["LEASE:UNKNOWN"] == 1
    assert review_codes(world, wf) == ["POLL_UNKNOWN"]
    assert world.instance(wf)["steps"][0]["poll"]["rounds"][0]["outcome"] == "UNKNOWN"


def test_P11_a_lease_that_ends_after_the_poll_deadline_is_in_flight_at_it(world, orch):
    world.publish(poll_flow(timeout_ms=60_000))
    wf = started(world, orch)
    claim(world, lease_ms=90_000)
    world.db.advance(120_000)  # past both; the lease was still held at the deadline
    assert advance_checkpoint(world, wf) == "REVIEW"
    assert review_codes(world, wf) == ["POLL_DEADLINE_IN_FLIGHT"]


def test_P11_the_expiry_class_reaching_the_queued_round_first_ends_the_same_way(world, orch):
    world.publish(poll_flow(timeout_ms=60_000))
    wf = started(world, orch)
    world.db.advance(60_000)
    assert pulse.task_expire(world.db.conn, world.db.scalar("SELECT id FROM pulse_tasks")) == "EXPIRED"
    assert advance_checkpoint(world, wf) == "INBOX_FIRST"
    orch.drain()
    assert review_codes(world, wf) == ["POLL_DEADLINE"]


# --- ownership, stale checkpoints, the instance deadline ------------------------------------------------------
def test_R6_a_round_task_its_round_does_not_name_is_an_ownership_mismatch(world, orch):
    world.publish(poll_flow())
    wf = started(world, orch)
    got = claim(world)
    world.db.execute("UPDATE weave_poll_rounds SET task_id = task_id + 1000")
    with world.held(wf):
        pulse.attempt_complete(world.db.conn, got["attempt_id"], "w1", {"status": "DONE"})
    assert orch.drain()["INBOX:MISMATCH"] == 1
    inst = world.instance(wf)
    assert [r["code"] for r in inst["review_reasons"]] == ["OWNERSHIP_MISMATCH"]
    assert inst["steps"][0]["status"] == "ACTIVE"  # nothing of the outcome applied
    assert world.db.scalar("SELECT outcome FROM weave_poll_rounds") == "IN_FLIGHT"
    assert world.db.scalar("SELECT state FROM pulse_inbox") == "MISMATCH"


@pytest.mark.breaks_invariants("M-4.21")  # the step is left ACTIVE with nothing to wake it
def test_R5_a_poll_checkpoint_of_an_old_activation_is_stale(world, orch):
    world.publish(poll_flow())
    wf = started(world, orch)
    cp = checkpoint(world, wf)
    world.db.execute("UPDATE weave_pending_advances SET activation_id = activation_id + 1000, "
                     "available_at = created_at")
    assert world.db.one("weave_checkpoint_advance", cp["id"])["outcome"] == "STALE"
    assert checkpoint(world, wf) is None and world.step(wf, "check")["status"] == "ACTIVE"


def test_R8_a_round_needed_past_the_instance_deadline_goes_to_review(world, orch):
    world.publish(poll_flow())
    wf = started(world, orch)
    answer(world, "PENDING")
    orch.drain()
    # Only reachable if the instance deadline stood before the poll deadline; set it so by hand.
    world.db.execute("UPDATE weave_instances SET deadline_at = %s", world.db.now() + dt.timedelta(seconds=10))
    world.db.advance(INTERVAL)
    orch.drain()
    assert review_codes(world, wf) == ["INSTANCE_DEADLINE"]
    assert world.db.scalar("SELECT COUNT(*) FROM pulse_tasks") == 1
    assert world.step(wf, "check")["status"] == "ACTIVE"


def test_P3_a_poll_runs_its_rounds_to_done_with_the_example_handler_state_held_nowhere_but_the_database(world, orch):
    import orchestrator.example_handlers  # noqa: F401 - registers example.*
    from orchestrator.worker import Worker

    world.publish(poll_flow(input={"done_at": 3, "output": "$.input.order_id"}, max_rounds=5))
    wf = started(world, orch)
    for _ in range(3):
        # A fresh worker each round: nothing but the database tells the handler which round it answers.
        Worker(world.db.dsn, ["payments"], concurrency=1, idle_probe_ms=5).run(max_claims=1, exit_when_idle=True)
        orch.drain()
        world.db.advance(INTERVAL)
        orch.drain()
    inst = world.instance(wf)
    assert inst["status"] == "SUCCEEDED" and inst["steps"][0]["output"] == {"status": "DONE", "output": "o-1"}
    assert [r["outcome"] for r in inst["steps"][0]["poll"]["rounds"]] == ["POLL_PENDING", "POLL_PENDING", "DONE"]


@pytest.mark.parametrize("status", ["DONE", "PENDING"])
def test_P7_P2_a_result_as_deep_as_a_report_allows_is_applied_not_stuck_in_the_inbox(world, orch, status):
    """A report takes a result nested 31 levels deep; the round's facts hold it one level further down, past the
    server's 32, so they say where it is instead: the round record keeps it and the step goes on."""
    deep: list = []
    for _ in range(29):
        deep = [deep]
    result = {"status": status, "output": deep}  # 31 levels
    world.publish(poll_flow())
    wf = world.start("pay", {"order_id": "o-1"})
    orch.drain()
    (c,) = pulse.task_claim(world.db.conn, "w1", "payments")
    pulse.attempt_complete(world.db.conn, c["attempt_id"], "w1", result)
    orch.drain()
    assert world.db.scalar("SELECT COUNT(*) FROM pulse_inbox WHERE state = 'PENDING'") == 0
    assert json.loads(world.db.scalar("SELECT result FROM weave_poll_rounds WHERE round_no = 1")) == result
    event = next(e for e in world.events(wf) if e["type"] in ("POLL_SUCCEEDED", "POLL_ROUND_PENDING"))
    assert "nested too deep" in event["data"]["result"]
    if status == "DONE":
        assert world.instance(wf)["status"] == "SUCCEEDED" and world.step(wf, "check")["output"] == result
    else:
        poll = world.step(wf, "check")["poll"]
        assert poll["state"] == "WAITING" and poll["rounds"][0]["outcome"] == "POLL_PENDING"
