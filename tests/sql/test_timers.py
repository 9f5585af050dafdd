"""TIMER (03-timers, T-1..T-8) and the checkpoint runtime it rides on (R-5..R-9), driven by the test clock."""

from __future__ import annotations

import datetime as dt

import pymysql
import pytest

from procedures import errors, invariants
from tests.sql.test_polls import advance_checkpoint

HOUR = 3_600_000


def timer_flow(name="cool-off", delay_ms=60_000, then=None):
    steps = [{"key": "cool_off", "type": "TIMER", "delay_ms": delay_ms}]
    if then:
        steps.append({"key": "after_cool_off", "type": "TIMER", "delay_ms": then, "after": ["cool_off"]})
    return {"name": name, "steps": steps}


def task_flow(name="charge"):
    """A definition with a TASK step, activated by the start itself (its task created in the start's
    transaction)."""
    return {"name": name, "steps": [{"key": "charge", "type": "TASK", "queue": "payments", "handler": "example.echo",
                                     "handler_version": "1", "input": {"order_id": "$.input.order_id"}}]}


def root_due(world, orch, *, blocker=None, deadline_ms: int = 86_400_000) -> str:
    """An instance whose ROOT checkpoint is due now: a one-second TIMER, then a TASK step. The start activates
    the timer; once it is due, a ``blocker`` of new work (set here, before the timer settles) leaves the TASK step
    to the ROOT checkpoint, deferred; the clock is then moved past that deferral."""
    world.publish({"name": "then-charge", "steps": [
        {"key": "wait", "type": "TIMER", "delay_ms": 1_000},
        {"key": "charge", "type": "TASK", "queue": "payments", "handler": "example.echo", "handler_version": "1",
         "input": {"order_id": "$.input.order_id"}, "after": ["wait"]}]})
    wf = world.start("then-charge", {"order_id": "o-1"}, deadline_ms=deadline_ms)
    iid = world.internal_id(wf)
    if blocker == "paused":
        world.db.execute("UPDATE weave_instances SET control = 'PAUSED' WHERE id = %s", iid)
    elif blocker == "identity":
        world.db.execute("UPDATE weave_credentials SET status = 'DISABLED' WHERE actor = 'ops'")
    elif blocker == "app":
        world.db.execute("UPDATE weave_apps SET status = 'DISABLED'")
    world.db.advance(1_001)
    assert orch.drain()["CHECKPOINT:SETTLED"] >= 1
    if blocker:
        world.db.advance(61_000)  # past the deferral (60 s while paused, 1 s else)
    return wf


def started(world, orch, *, deadline_ms: int = 86_400_000, **flow) -> str:
    """A timer flow published and one instance of it started and activated."""
    world.publish(timer_flow(**flow))
    wf = world.start("cool-off", deadline_ms=deadline_ms)
    orch.drain()
    return wf


def parse(ts: str) -> dt.datetime:
    return dt.datetime.strptime(ts, "%Y-%m-%dT%H:%M:%S.%fZ")


def test_T1_activation_stores_due_as_start_plus_delay_capped_by_deadline(world, orch):
    wf = started(world, orch, delay_ms=60_000, deadline_ms=HOUR)
    step = world.step(wf, "cool_off")
    assert step["status"] == "ACTIVE" and step["wait"]["status"] == "WAITING"
    assert parse(step["wait"]["due_at"]) - parse(step["started_at"]) == dt.timedelta(milliseconds=60_000)
    cp = world.db.row("SELECT kind, activation_id, due_at FROM weave_pending_advances WHERE step_key = 'cool_off'")
    act = world.db.row("SELECT id FROM weave_activations WHERE step_key = 'cool_off'")
    assert cp["kind"] == "TIMER" and cp["activation_id"] == act["id"]
    assert cp["due_at"].strftime("%Y-%m-%dT%H:%M:%S.%fZ") == step["wait"]["due_at"]


def test_T2_timer_creates_no_task_and_holds_no_permit(world, orch):
    world.publish(timer_flow())
    world.start("cool-off")
    orch.drain()
    world.db.advance(61_000)
    orch.drain()
    assert world.db.scalar("SELECT COUNT(*) FROM pulse_tasks") == 0
    assert world.db.scalar("SELECT COUNT(*) FROM pulse_permits") == 0


def test_T3_due_timer_settles_and_step_succeeds_with_null_output(world, orch):
    wf = started(world, orch)
    inst = world.past_due(orch, wf, "cool_off", 60_000)
    step = inst["steps"][0]
    assert step["status"] == "SUCCEEDED" and step["output"] is None
    assert step["wait"]["status"] == "SATISFIED"
    assert parse(step["wait"]["settled_at"]) >= parse(step["wait"]["due_at"])
    assert inst["status"] == "SUCCEEDED"
    assert world.db.scalar("SELECT COUNT(*) FROM weave_pending_advances") == 0


def test_T4_truncated_timer_goes_to_review_never_success(world, orch):
    wf = started(world, orch, delay_ms=2 * HOUR, deadline_ms=HOUR)
    step = world.step(wf, "cool_off")
    assert parse(step["wait"]["due_at"]) == parse(world.instance(wf)["deadline_at"])
    world.db.advance(HOUR + 1)
    orch.drain()
    inst = world.instance(wf)
    assert inst["status"] == "NEEDS_REVIEW" and inst["gate"] == "CLOSED"
    assert inst["steps"][0]["status"] == "NEEDS_REVIEW"
    assert inst["steps"][0]["wait"]["status"] == "EXPIRED"
    assert world.db.scalar("SELECT ended_at FROM weave_activations WHERE instance_id = %s",
                           world.internal_id(wf)) is not None  # the activation ends with the wait
    assert [r["code"] for r in inst["review_reasons"]] == ["TIMER_TRUNCATED"]
    assert "TIMER_SETTLED" not in [e["type"] for e in world.events(wf)]


@pytest.mark.parametrize("over_ms, outcome", [(0, "SATISFIED"), (1, "EXPIRED")])
def test_T3_T4_a_delay_ending_exactly_at_the_deadline_fits_and_one_millisecond_more_is_truncated(world, orch, over_ms,
                                                                                              outcome):
    """The start activates the timer in its own transaction, so started_at + delay_ms lands exactly on the instance
    deadline when the two are equal: that delay fits (T-3, <=); one millisecond more is cut short (T-4)."""
    wf = started(world, orch, delay_ms=60_000 + over_ms, deadline_ms=60_000)
    wait = world.step(wf, "cool_off")["wait"]
    assert parse(wait["due_at"]) == parse(world.instance(wf)["deadline_at"])
    world.db.advance(60_000)
    orch.drain()
    inst = world.instance(wf)
    assert inst["steps"][0]["wait"]["status"] == outcome
    if over_ms:
        assert inst["status"] == "NEEDS_REVIEW" and [r["code"] for r in inst["review_reasons"]] == ["TIMER_TRUNCATED"]
    else:
        assert inst["status"] == "SUCCEEDED" and inst["review_reasons"] == []


@pytest.mark.parametrize("delay_ms", [1, 365 * 86_400_000])
def test_T1_the_shortest_and_the_longest_delay_are_timed_from_the_start_to_the_microsecond(world, orch, delay_ms):
    wf = started(world, orch, delay_ms=delay_ms, deadline_ms=10 * 365 * 86_400_000)
    step = world.step(wf, "cool_off")
    due = parse(step["wait"]["due_at"])
    assert due - parse(step["started_at"]) == dt.timedelta(milliseconds=delay_ms)
    if delay_ms > 1:  # a second before it is due (real time runs under the test clock), then past it
        world.db.advance(delay_ms - 1_000)
        orch.drain()
        assert world.step(wf, "cool_off")["wait"]["status"] == "WAITING"
        world.db.advance(1_001)
    orch.drain()
    settled = world.step(wf, "cool_off")["wait"]
    assert settled["status"] == "SATISFIED" and parse(settled["settled_at"]) >= due


def test_T5_timer_due_during_pause_settles_and_successor_waits(world, orch):
    wf = started(world, orch, then=1_000)
    world.db.execute("UPDATE weave_instances SET control = 'PAUSED' WHERE id = %s", world.internal_id(wf))
    world.db.advance(61_000)
    orch.drain()
    inst = world.instance(wf)
    assert inst["steps"][0]["status"] == "SUCCEEDED"
    assert inst["steps"][1]["status"] == "PENDING"
    root = world.db.row("SELECT due_at, available_at, last_error FROM weave_pending_advances WHERE step_key = ''")
    assert root is not None and root["available_at"] > world.db.now()
    assert "paused" in root["last_error"]
    deadline = world.db.scalar("SELECT deadline_at FROM weave_instances")
    assert inst["deadline_at"] == deadline.strftime("%Y-%m-%dT%H:%M:%S.%fZ")  # pause moves no deadline


def test_T6_late_scan_settles_with_original_due_and_finishes(world, orch):
    wf = started(world, orch, delay_ms=60_000, deadline_ms=HOUR)
    due = world.step(wf, "cool_off")["wait"]["due_at"]
    world.db.advance(2 * HOUR)  # every process was down past the instance deadline
    orch.drain()
    inst = world.instance(wf)
    assert inst["status"] == "SUCCEEDED"  # finishing needs nothing new
    assert inst["steps"][0]["wait"]["due_at"] == due
    settled = next(e for e in world.events(wf) if e["type"] == "TIMER_SETTLED")
    assert settled["data"]["due_at"] == due and settled["data"]["lateness_ms"] >= 2 * HOUR - 60_000 - 1000


def test_T6_late_scan_with_successor_past_deadline_goes_to_review(world, orch):
    wf = started(world, orch, delay_ms=60_000, then=1_000, deadline_ms=HOUR)
    world.db.advance(2 * HOUR)
    orch.drain()
    inst = world.instance(wf)
    assert inst["steps"][0]["status"] == "SUCCEEDED"  # the timer itself was due in time
    assert inst["steps"][0]["wait"]["status"] == "SATISFIED"
    assert inst["steps"][1]["status"] == "PENDING"
    assert inst["status"] == "NEEDS_REVIEW" and inst["gate"] == "CLOSED"
    assert [r["code"] for r in inst["review_reasons"]] == ["INSTANCE_DEADLINE"]


def test_T7_audit_failure_rolls_back_the_whole_settlement(world, orch):
    wf = started(world, orch, then=1_000)
    world.db.execute(
        "CREATE TRIGGER test_audit_fails BEFORE INSERT ON weave_audit FOR EACH ROW "
        "BEGIN IF NEW.action = 'timer.settle' THEN "
        "SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'audit store down'; END IF; END")
    world.db.advance(61_000)
    before = world.db.table_counts()
    outcomes = orch.drain(max_rounds=3)
    assert outcomes["CHECKPOINT:FAILED"] >= 1
    after = world.db.table_counts()
    assert {k: v for k, v in after.items() if k != "weave_pending_advances"} == \
           {k: v for k, v in before.items() if k != "weave_pending_advances"}
    inst = world.instance(wf)
    assert inst["steps"][0]["wait"]["status"] == "WAITING"
    assert inst["steps"][1]["status"] == "PENDING"  # no partial successor
    cp = world.db.row("SELECT due_at, available_at, attempts, last_error FROM weave_pending_advances "
                      "WHERE step_key = 'cool_off'")
    assert cp["attempts"] >= 1 and "audit store down" in cp["last_error"]  # R-12 bookkeeping
    assert cp["due_at"].strftime("%Y-%m-%dT%H:%M:%S.%fZ") == inst["steps"][0]["wait"]["due_at"]
    world.db.execute("DROP TRIGGER test_audit_fails")
    world.db.advance(120_000)
    orch.drain()
    assert world.step(wf, "cool_off")["status"] == "SUCCEEDED"


def test_T8_settle_event_says_when_due_and_when_settled(world, orch):
    wf = started(world, orch)
    world.db.advance(90_000)
    orch.drain()
    settled = next(e for e in world.events(wf) if e["type"] == "TIMER_SETTLED")
    lateness = parse(settled["data"]["settled_at"]) - parse(settled["data"]["due_at"])
    assert settled["step_key"] == "cool_off" and settled["activation_sequence"] == 1
    assert abs(lateness.total_seconds() * 1000 - settled["data"]["lateness_ms"]) < 1
    assert settled["data"]["lateness_ms"] >= 29_000


@pytest.mark.breaks_invariants("M-4.21")  # the step is left ACTIVE with nothing to wake it
def test_R5_stale_checkpoint_of_an_old_activation_never_acts(world, orch):
    wf = started(world, orch)
    iid = world.internal_id(wf)
    # A second generation of the step (what recovery creates); the checkpoint still names the first.
    old = world.second_activation(wf)
    world.db.advance(61_000)
    outcomes = orch.drain()
    assert outcomes["CHECKPOINT:STALE"] == 1
    assert world.db.scalar("SELECT status FROM weave_waits WHERE activation_id = %s", old) == "WAITING"
    assert world.db.scalar("SELECT COUNT(*) FROM weave_pending_advances WHERE instance_id = %s", iid) == 0
    assert world.db.scalar("SELECT status FROM weave_steps WHERE instance_id = %s", iid) == "ACTIVE"


@pytest.mark.breaks_invariants("M-4.11")
def test_R6_timer_facts_that_do_not_verify_are_left_untouched(world, orch):
    wf = started(world, orch)
    world.db.execute("UPDATE weave_waits SET due_at = due_at - INTERVAL 30 SECOND")  # corrupted on purpose
    world.db.advance(61_000)
    outcomes = orch.drain(max_rounds=2)
    assert outcomes["CHECKPOINT:FAILED"] >= 1
    assert world.step(wf, "cool_off")["wait"]["status"] == "WAITING"
    cp = world.db.row("SELECT attempts, last_error FROM weave_pending_advances WHERE step_key = 'cool_off'")
    assert "INVALID_STATE" in cp["last_error"]


@pytest.mark.breaks_invariants("M-4.11")
def test_R6_a_timer_whose_planned_due_time_does_not_follow_from_its_delay_is_left_untouched(world, orch):
    """The planned due time must be the start plus the frozen delay, whatever the due time says (T-1)."""
    wf = started(world, orch)
    world.db.execute("UPDATE weave_waits SET planned_due_at = planned_due_at + INTERVAL 1 SECOND")
    world.db.advance(61_000)
    outcomes = orch.drain(max_rounds=2)
    assert outcomes["CHECKPOINT:FAILED"] >= 1 and outcomes["CHECKPOINT:SETTLED"] == 0
    assert world.step(wf, "cool_off")["wait"]["status"] == "WAITING"
    cp = world.db.row("SELECT last_error FROM weave_pending_advances WHERE step_key = 'cool_off'")
    assert "timer facts do not verify" in cp["last_error"]


def test_R5_a_checkpoint_of_the_current_activation_whose_step_has_ended_is_stale(world, orch):
    """The activation is current, but its step is no longer ACTIVE: the wait is never settled and the checkpoint
    goes, as an old activation's does."""
    wf = started(world, orch)
    iid = world.internal_id(wf)
    world.db.execute("UPDATE weave_steps SET status = 'CANCELLED' WHERE instance_id = %s", iid)
    world.db.advance(61_000)
    outcomes = orch.drain(max_rounds=2)
    assert outcomes["CHECKPOINT:STALE"] == 1 and outcomes["CHECKPOINT:SETTLED"] == 0
    assert world.step(wf, "cool_off")["wait"]["status"] == "WAITING"
    assert world.db.scalar("SELECT COUNT(*) FROM weave_pending_advances WHERE instance_id = %s", iid) == 0
    assert not [e for e in world.events(wf) if e["type"] == "TIMER_SETTLED"]


def test_R7_at_most_32_step_changes_per_transaction(world, orch):
    steps = [{"key": f"t{i:02d}", "type": "TIMER", "delay_ms": 1000} for i in range(40)]
    world.publish({"name": "fan-out", "steps": steps})
    wf = world.start("fan-out")  # the start's own ROOT advance (a definition without tasks)
    statuses = [s["status"] for s in world.instance(wf)["steps"]]
    assert statuses.count("ACTIVE") == 32 and statuses.count("PENDING") == 8
    root = world.db.row("SELECT due_at, available_at FROM weave_pending_advances WHERE step_key = ''")
    assert root["available_at"] <= world.db.now()  # stays due now
    orch.drain()
    assert [s["status"] for s in world.instance(wf)["steps"]].count("ACTIVE") == 40
    activations = [e for e in world.events(wf) if e["type"] == "STEP_ACTIVATED"]
    assert len(activations) == 40


def test_R7_a_settlement_activates_its_ready_successors_in_definition_order_and_no_other(world, orch):
    """Ready steps between steps that are not ready, and more of them than one walk activates: the walk takes the
    ready ones in the definition's order, leaves the rest for the ROOT checkpoint, and never a step still waiting."""
    steps = [{"key": "a", "type": "TIMER", "delay_ms": 1000}, {"key": "slow", "type": "TIMER", "delay_ms": 60_000}]
    for i in range(40):
        steps.append({"key": f"s{i:02d}", "type": "TIMER", "delay_ms": 60_000,
                      "after": ["a", "slow"] if i % 3 == 1 else ["a"]})
    world.publish({"name": "fan-between", "steps": steps})
    wf = world.start("fan-between")
    world.db.advance(1_001)
    assert advance_checkpoint(world, wf, "a") == "SETTLED"
    ready = [f"s{i:02d}" for i in range(40) if i % 3 != 1]  # 27 of them, fewer than one walk's 31
    activated = [e["step_key"] for e in world.events(wf) if e["type"] == "STEP_ACTIVATED"]
    assert activated == ["a", "slow"] + ready
    status = {s["key"]: s["status"] for s in world.instance(wf)["steps"]}
    assert [k for k, v in status.items() if v == "PENDING"] == [f"s{i:02d}" for i in range(40) if i % 3 == 1]

    steps = [{"key": "a", "type": "TIMER", "delay_ms": 1000}]
    steps += [{"key": f"s{i:02d}", "type": "TIMER", "delay_ms": 60_000, "after": ["a"]} for i in range(40)]
    world.publish({"name": "fan-wide", "steps": steps})
    wf = world.start("fan-wide")
    world.db.advance(1_001)
    assert advance_checkpoint(world, wf, "a") == "SETTLED"
    activated = [e["step_key"] for e in world.events(wf) if e["type"] == "STEP_ACTIVATED"]
    assert activated == ["a"] + [f"s{i:02d}" for i in range(31)]  # one walk's budget, in order
    orch.drain()
    activated = [e["step_key"] for e in world.events(wf) if e["type"] == "STEP_ACTIVATED"]
    assert activated == ["a"] + [f"s{i:02d}" for i in range(40)]
    assert world.db.scalar("SELECT COUNT(*) FROM weave_pending_advances WHERE instance_id = %s AND step_key = ''",
                           world.internal_id(wf)) == 0


def test_R7_successor_activates_only_when_all_after_steps_succeeded(world, orch):
    world.publish({"name": "join", "steps": [
        {"key": "a", "type": "TIMER", "delay_ms": 1000},
        {"key": "b", "type": "TIMER", "delay_ms": 5000},
        {"key": "c", "type": "TIMER", "delay_ms": 1000, "after": ["a", "b"]}]})
    wf = world.start("join")
    orch.drain()
    world.db.advance(1_001)
    orch.drain()
    assert [s["status"] for s in world.instance(wf)["steps"]] == ["SUCCEEDED", "ACTIVE", "PENDING"]
    world.db.advance(4_000)
    orch.drain()
    assert [s["status"] for s in world.instance(wf)["steps"]] == ["SUCCEEDED", "SUCCEEDED", "ACTIVE"]
    world.db.advance(1_001)
    orch.drain()
    assert world.instance(wf)["status"] == "SUCCEEDED"


def test_R7_a_start_activates_the_first_steps_of_a_definition_without_tasks_in_its_own_transaction(world, orch):
    world.publish(timer_flow())
    wf = world.start("cool-off")
    inst = world.instance(wf)
    assert inst["status"] == "RUNNING" and [s["status"] for s in inst["steps"]] == ["ACTIVE"]
    assert [c["kind"] for c in inst["checkpoints"]] == ["TIMER"]
    events = world.events(wf)
    assert [e["type"] for e in events] == ["INSTANCE_STARTED", "STEP_ACTIVATED"]
    assert events[0]["occurred_at"] == events[1]["occurred_at"]  # one transaction, one clock reading
    assert orch.scan().candidates == []


def test_R7_a_step_type_without_an_activation_fails_the_decision_and_opens_no_wait(world, orch):
    """Activation dispatches on the step's type once, with no fallback: a type no routine activates (here a stored
    row altered by hand) fails the decision that would activate it, and the whole decision is undone, never taken
    for a wait of some kind."""
    world.publish(timer_flow(then=60_000))
    wf = world.start("cool-off")
    iid = world.internal_id(wf)
    world.db.execute("UPDATE weave_steps SET type = 'BOGUS' WHERE instance_id = %s AND step_key = 'after_cool_off'",
                     iid)
    world.db.advance(60_001)
    cp = world.db.scalar("SELECT id FROM weave_pending_advances WHERE instance_id = %s AND kind = 'TIMER'", iid)
    with pytest.raises(pymysql.err.MySQLError) as failed:
        world.db.one("weave_checkpoint_advance", cp)
    assert failed.value.args[0] == 1339  # case not found
    assert [s["status"] for s in world.instance(wf)["steps"]] == ["ACTIVE", "PENDING"]
    assert world.db.scalar("SELECT COUNT(*) FROM weave_waits WHERE instance_id = %s", iid) == 1
    world.db.execute("UPDATE weave_steps SET type = 'TIMER' WHERE instance_id = %s", iid)
    orch.drain()
    assert [s["status"] for s in world.instance(wf)["steps"]] == ["SUCCEEDED", "ACTIVE"]


def test_R8_a_start_whose_app_is_disabled_leaves_its_root_deferred_and_activates_nothing(world, orch):
    world.publish(timer_flow())
    world.db.execute("UPDATE weave_apps SET status = 'DISABLED'")
    wf = world.start("cool-off")
    inst = world.instance(wf)
    assert [s["status"] for s in inst["steps"]] == ["PENDING"]
    root = world.db.row("SELECT deferred_reason, available_at FROM weave_pending_advances WHERE step_key = ''")
    assert root["deferred_reason"].startswith("APP_DISABLED") and root["available_at"] > world.db.now()
    assert world.db.scalar("SELECT COUNT(*) FROM weave_activations") == 0
    world.db.execute("UPDATE weave_apps SET status = 'ACTIVE'")
    world.db.advance(1_001)
    orch.drain()
    assert world.step(wf, "cool_off")["status"] == "ACTIVE"


@pytest.mark.parametrize("blocker", ["paused", "identity", "app"])
def test_R8_deferred_root_keeps_its_due_time_and_consumes_nothing(world, orch, blocker):
    wf = root_due(world, orch, blocker=blocker)
    due_before = world.db.scalar("SELECT due_at FROM weave_pending_advances WHERE step_key = ''")
    outcomes = orch.drain()
    assert outcomes["CHECKPOINT:DEFERRED"] == 1
    root = world.db.row("SELECT due_at, available_at FROM weave_pending_advances WHERE step_key = ''")
    assert root["due_at"] == due_before and root["available_at"] > world.db.now()
    assert world.db.scalar("SELECT COUNT(*) FROM weave_activations") == 1  # the timer's only
    assert world.db.scalar("SELECT COUNT(*) FROM pulse_tasks") == 0
    assert world.db.scalar("SELECT deadline_at FROM weave_instances") is not None
    world.db.execute("UPDATE weave_instances SET control = 'ACTIVE'")
    world.db.execute("UPDATE weave_credentials SET status = 'ACTIVE'")
    world.db.execute("UPDATE weave_apps SET status = 'ACTIVE'")
    world.db.advance(61_000)
    orch.drain()
    assert world.step(wf, "charge")["status"] == "ACTIVE"


def test_R8_instance_deadline_passed_when_new_work_is_needed_goes_to_review(world, orch):
    wf = root_due(world, orch, blocker="app", deadline_ms=30_000)  # the ROOT checkpoint due past the deadline
    world.db.execute("UPDATE weave_apps SET status = 'ACTIVE'")
    orch.drain()
    inst = world.instance(wf)
    assert inst["status"] == "NEEDS_REVIEW" and inst["gate"] == "CLOSED"
    assert inst["review_reasons"][0]["code"] == "INSTANCE_DEADLINE"
    assert [s["status"] for s in inst["steps"]] == ["SUCCEEDED", "PENDING"]


def test_R9_instance_succeeds_in_the_transaction_of_its_last_step(world, orch):
    wf = started(world, orch, then=1_000)
    world.db.advance(61_000)
    orch.drain()
    world.db.advance(1_001)
    orch.drain()
    events = world.events(wf)
    last_settle = [e for e in events if e["type"] == "TIMER_SETTLED"][-1]
    done = next(e for e in events if e["type"] == "INSTANCE_SUCCEEDED")
    assert done["occurred_at"] == last_settle["occurred_at"] and done["seq"] == last_settle["seq"] + 1
    assert world.db.scalar("SELECT COUNT(*) FROM weave_pending_advances") == 0
    # The settling statement ended the instance itself: its row is as the walk's end left it before.
    row = world.db.row("SELECT status, open_steps, event_seq, finished_at, updated_at FROM weave_instances")
    assert row["status"] == "SUCCEEDED" and row["open_steps"] == 0 and row["event_seq"] == done["seq"] == len(events)
    assert row["finished_at"] == row["updated_at"] == world.db.scalar("SELECT MAX(settled_at) FROM weave_waits")


def test_R9_the_instance_counts_its_open_steps_and_ends_when_none_is_left(world, orch):
    """The ROOT walk reads how many steps have not succeeded from the instance row: the start sets it to every step,
    each settlement lowers it in the statement that settles the step, and the walk that finds it at 0 ends the
    instance (R-9); while steps are open, it finds the ready ones and no more."""
    world.publish({"name": "join", "steps": [
        {"key": "a", "type": "TIMER", "delay_ms": 1000},
        {"key": "b", "type": "TIMER", "delay_ms": 5000},
        {"key": "c", "type": "TIMER", "delay_ms": 1000, "after": ["a", "b"]}]})
    wf = world.start("join")
    inst = world.internal_id(wf)

    def open_steps() -> int:
        return world.db.scalar("SELECT open_steps FROM weave_instances WHERE id = %s", inst)

    assert open_steps() == 3
    world.db.advance(1_001)
    orch.drain()
    assert open_steps() == 2 and [s["status"] for s in world.instance(wf)["steps"]] == ["SUCCEEDED", "ACTIVE",
                                                                                         "PENDING"]
    world.db.advance(4_000)
    orch.drain()
    assert open_steps() == 1 and world.step(wf, "c")["status"] == "ACTIVE"
    world.db.advance(1_001)
    orch.drain()
    assert open_steps() == 0 and world.instance(wf)["status"] == "SUCCEEDED"


@pytest.mark.breaks_invariants("M-4.9b")
def test_R9_M4_9b_an_open_step_count_that_disagrees_with_the_steps_is_caught(world, orch):
    wf = started(world, orch, then=1_000)
    assert "M-4.9b" not in invariants.violations(world.db.conn)
    world.db.execute("UPDATE weave_instances SET open_steps = 1 WHERE id = %s", world.internal_id(wf))
    broken = invariants.violations(world.db.conn)
    assert broken.get("M-4.9b") and list(broken) == ["M-4.9b"], broken


@pytest.mark.breaks_invariants("M-4.20")
def test_R7_M4_20_a_ready_step_left_without_its_root_checkpoint_is_caught(world, orch):
    """A walk that leaves a ready step (here: deferred, the instance paused) keeps the ROOT checkpoint that will look
    again; without it the instance would stall RUNNING and say nothing."""
    wf = root_due(world, orch, blocker="paused")
    iid = world.internal_id(wf)
    assert world.db.scalar("SELECT status FROM weave_steps WHERE instance_id = %s AND step_key = 'charge'",
                           iid) == "PENDING"
    assert "M-4.20" not in invariants.violations(world.db.conn)
    world.db.execute("DELETE FROM weave_pending_advances WHERE instance_id = %s AND kind = 'ROOT'", iid)
    broken = invariants.violations(world.db.conn)
    assert broken == {"M-4.20": [iid]}, broken


def test_R12_failure_bookkeeping_only_when_the_version_is_unchanged(world, orch):
    root_due(world, orch, blocker="app")
    world.db.execute("UPDATE weave_apps SET status = 'ACTIVE'")
    cand = orch.scan().candidates[0]
    world.db.execute("UPDATE weave_pending_advances SET version = version + 1 WHERE id = %s", cand.id)
    before = world.db.row("SELECT attempts, available_at, due_at FROM weave_pending_advances")
    assert world.db.one("weave_candidate_fail", "CHECKPOINT", cand.id, cand.version, "boom")["recorded"] == 0
    row = world.db.row("SELECT attempts, available_at, due_at, version FROM weave_pending_advances")
    assert row["attempts"] == 0 and {k: row[k] for k in before} == before
    assert world.db.one("weave_candidate_fail", "CHECKPOINT", cand.id, row["version"], "boom")["recorded"] == 1
    after = world.db.row("SELECT attempts, available_at, due_at, last_error FROM weave_pending_advances")
    assert after["attempts"] == 1 and after["due_at"] == row["due_at"] and after["available_at"] > after["due_at"]


def test_R13_instance_locked_by_another_node_is_skipped_not_waited_for(world, orch, database):
    wf = root_due(world, orch, blocker="app")
    world.db.execute("UPDATE weave_apps SET status = 'ACTIVE'")
    other = world.db.connect()
    try:
        other.begin()
        with other.cursor() as cur:
            cur.execute("SELECT id FROM weave_instances WHERE id = %s FOR UPDATE", (world.internal_id(wf),))
        cand = orch.scan().candidates[0]
        assert orch.advance(cand) == "BUSY"
        other.rollback()
        assert orch.advance(cand) == "ACTIVATED"
    finally:
        other.close()


def test_R1_a_failing_routine_leaves_no_open_transaction(world):
    conn = world.db.conn
    with pytest.raises(errors.NotFound):
        world.instance("wf_999999")
    with conn.cursor() as cur:
        cur.execute("SELECT @@in_transaction AS t" if "MariaDB" in conn.get_server_info() else "SELECT 0 AS t")
        assert cur.fetchone()["t"] == 0
    with pytest.raises(errors.IdempotencyConflict):
        world.publish(timer_flow())
        world.start("cool-off", key="k1")
        world.start("cool-off", key="k1", deadline_ms=5)
    assert isinstance(conn, pymysql.Connection)


@pytest.mark.breaks_invariants("M-4.18")
def test_R5_M4_18_a_checkpoint_left_behind_by_a_settled_timer_is_caught(world, orch):
    # A timer's checkpoint goes with its settlement (in the ROOT walk's closing delete): one put back after the
    # step settled would wake a step that no longer waits, and the invariant, and only it, reports it.
    world.publish({"name": "two-timers", "steps": [{"key": "first", "type": "TIMER", "delay_ms": 1000},
                                                    {"key": "second", "type": "TIMER", "delay_ms": 60_000,
                                                     "after": ["first"]}]})
    wf = world.start("two-timers")
    world.db.advance(1001)
    orch.drain()
    inst = int(wf.removeprefix("wf_"))
    assert world.db.scalar("SELECT COUNT(*) FROM weave_pending_advances WHERE instance_id = %s AND step_key = 'first'",
                           inst) == 0
    assert "M-4.18" not in invariants.violations(world.db.conn)
    world.db.execute("""INSERT INTO weave_pending_advances (namespace_id, instance_id, step_key, kind, activation_id,
                                                            due_at, available_at, created_at)
                        SELECT namespace_id, instance_id, step_key, 'TIMER', id, started_at, started_at,
                               started_at
                          FROM weave_activations WHERE instance_id = %s AND step_key = 'first'""", inst)
    broken = invariants.violations(world.db.conn)
    assert broken.get("M-4.18") and list(broken) == ["M-4.18"], broken
