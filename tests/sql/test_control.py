"""Instance control (06-control): pause, resume and the deadline action."""

from __future__ import annotations

import datetime as dt

import pytest

from procedures import errors, routines

TWO_TIMERS = {"name": "two", "steps": [{"key": "first", "type": "TIMER", "delay_ms": 60_000},
                                       {"key": "second", "type": "TIMER", "delay_ms": 1_000, "after": ["first"]}]}
ONE_TASK = {"name": "one", "steps": [{"key": "charge", "type": "TASK", "queue": "payments", "handler": "example.echo",
                                      "handler_version": "1", "input": {"order": "$.input.order_id"}}]}


def pause(world, wf, key="p1", reason="hold for audit"):
    return routines.instance_pause(world.db.conn, world.token, "acme", wf, reason, key)


def resume(world, wf, key="r1", reason="audit done"):
    return routines.instance_resume(world.db.conn, world.token, "acme", wf, reason, key)


def test_C1_timer_due_during_pause_settles_and_successor_waits_for_resume(world, orch):
    world.publish(TWO_TIMERS)
    wf = world.start("two")
    orch.drain()
    deadline = world.instance(wf)["deadline_at"]
    assert pause(world, wf)["changed"] == 1
    world.db.advance(61_000)
    orch.drain()
    inst = world.instance(wf)
    assert inst["control"] == "PAUSED" and inst["deadline_at"] == deadline  # pause never moves a deadline
    assert [s["status"] for s in inst["steps"]] == ["SUCCEEDED", "PENDING"]
    assert resume(world, wf)["changed"] == 1
    orch.drain()
    assert [s["status"] for s in world.instance(wf)["steps"]] == ["SUCCEEDED", "ACTIVE"]
    types = [e["type"] for e in world.events(wf)]
    assert types.index("INSTANCE_PAUSED") < types.index("TIMER_SETTLED") < types.index("INSTANCE_RESUMED")


def test_C1_resume_makes_overdue_checkpoints_due_at_once(world, orch):
    world.publish(TWO_TIMERS)
    wf = world.start("two")  # the start activates the first timer itself
    pause(world, wf)
    world.db.advance(61_000)
    orch.drain()  # the first timer settles while paused; its successor's ROOT is deferred
    root = world.db.row("SELECT due_at, available_at FROM weave_pending_advances WHERE step_key = ''")
    assert root["available_at"] > world.db.now()
    resume(world, wf)
    root = world.db.row("SELECT due_at, available_at FROM weave_pending_advances WHERE step_key = ''")
    assert root["available_at"] <= world.db.now()
    orch.drain()
    assert world.step(wf, "second")["status"] == "ACTIVE"


def test_C6_pause_repeat_is_a_noop_and_replay_answers_the_same(world):
    world.publish(TWO_TIMERS)
    wf = world.start("two")
    first = pause(world, wf, key="a")
    assert {k: v for k, v in first.items() if k != "instance"} == {"workflow_id": wf, "control": "PAUSED",
                                                                    "changed": 1, "replayed": 0}
    assert first["instance"] == world.instance(wf) and first["instance"]["control"] == "PAUSED"  # result sets 2-6
    assert pause(world, wf, key="a")["replayed"] == 1
    assert pause(world, wf, key="b")["changed"] == 0
    with pytest.raises(errors.IdempotencyConflict):
        pause(world, wf, key="a", reason="another reason")
    assert [e["type"] for e in world.events(wf)].count("INSTANCE_PAUSED") == 1
    audits = world.db.rows("SELECT actor, reason, idempotency_key FROM weave_audit WHERE action = 'instance.pause'")
    assert audits == [{"actor": "ops", "reason": "hold for audit", "idempotency_key": "a"},
                      {"actor": "ops", "reason": "hold for audit", "idempotency_key": "b"}]


def test_C6_control_needs_scope_reason_and_a_live_instance(world, orch):
    world.publish({"name": "short", "steps": [{"key": "t", "type": "TIMER", "delay_ms": 1}]})
    wf = world.start("short")
    reader = world.credential(["workflows:read"])["token"]
    with pytest.raises(errors.Forbidden):
        routines.instance_pause(world.db.conn, reader, "acme", wf, "why", "k")
    for nothing in ("", "   ", " \t\n"):  # spaces alone say nothing, and would be audited as the reason
        with pytest.raises(errors.ValidationFailed) as info:
            pause(world, wf, reason=nothing)
        assert info.value.field_code == "REASON_INVALID"
    orch.drain()
    world.db.advance(10)
    orch.drain()
    assert world.instance(wf)["status"] == "SUCCEEDED"
    with pytest.raises(errors.InvalidState):
        pause(world, wf, key="late")


def test_C4_deadline_moves_later_only_and_reopens_an_instance_deadline_review(world, orch):
    world.publish(TWO_TIMERS)
    wf = world.start("two", deadline_ms=30_000)
    orch.drain()
    world.db.advance(60_001)  # a 60 s delay under a 30 s deadline: truncated (T-4)
    orch.drain()
    inst = world.instance(wf)
    assert [r["code"] for r in inst["review_reasons"]] == ["TIMER_TRUNCATED"]
    with pytest.raises(errors.ValidationFailed) as info:
        routines.instance_deadline(world.db.conn, world.token, "acme", wf, "shorter", "d0", extend_ms=-5)
    assert info.value.field_code == "DEADLINE_INVALID"
    moved = routines.instance_deadline(world.db.conn, world.token, "acme", wf, "more time", "d1", extend_ms=3_600_000)
    assert moved["status"] == "NEEDS_REVIEW"  # the step-level reason stays open
    assert world.instance(wf)["steps"][0]["wait"]["due_at"] == inst["steps"][0]["wait"]["due_at"]  # T-1


def test_C4_deadline_closes_instance_deadline_and_the_instance_runs_again(world, orch):
    world.publish(ONE_TASK)
    world.db.execute("UPDATE weave_apps SET status = 'DISABLED'")  # the first activation waits for ROOT ...
    wf = world.start("one", {"order_id": "o-1"}, deadline_ms=1_000)
    world.db.execute("UPDATE weave_apps SET status = 'ACTIVE'")
    world.db.advance(1_000)  # ... and meets the deadline
    orch.drain()
    assert [r["code"] for r in world.instance(wf)["review_reasons"]] == ["INSTANCE_DEADLINE"]
    result = routines.instance_deadline(world.db.conn, world.token, "acme", wf, "customer asked", "d1",
                                        extend_ms=3_600_000)
    assert result["status"] == "RUNNING"
    inst = world.instance(wf)
    assert inst["gate"] == "OPEN" and inst["review_reasons"] == []
    orch.drain()
    assert world.step(wf, "charge")["status"] == "ACTIVE"
    closed = world.db.row("SELECT closed_by FROM weave_review_reasons")
    assert closed == {"closed_by": "deadline"}
    assert routines.instance_deadline(world.db.conn, world.token, "acme", wf, "customer asked", "d1",
                                      extend_ms=3_600_000)["replayed"] == 1


def test_C4_R8_reactivate_past_the_instance_deadline_is_refused_until_the_deadline_moves(world, orch):
    """A reactivation is new work, which the instance deadline stops: past it, the step was reactivated, the answer
    said RUNNING with the gate open, and the instance went back to review at once with its new activation used up.
    It is refused, naming the deadline, and nothing changes; once the deadline moves, it goes through."""
    world.publish(TWO_TIMERS)
    wf = world.start("two", deadline_ms=30_000)
    orch.drain()
    world.db.advance(60_001)  # a 60 s delay under a 30 s deadline: truncated (T-4), and the deadline has passed
    orch.drain()
    assert [r["code"] for r in world.instance(wf)["review_reasons"]] == ["TIMER_TRUNCATED"]
    step = world.instance(wf)["steps"][0]["key"]
    before = world.db.table_counts()
    with pytest.raises(errors.InvalidState, match="instance deadline .* has passed"):
        routines.step_reactivate(world.db.conn, world.token, "acme", wf, step, "the full delay", "r-1")
    assert world.db.table_counts() == before
    routines.instance_deadline(world.db.conn, world.token, "acme", wf, "more time", "d-1", extend_ms=3_600_000)
    again = routines.step_reactivate(world.db.conn, world.token, "acme", wf, step, "the full delay", "r-2")
    assert again["activation_sequence"] == 2 and again["status"] == "RUNNING"


def test_C4_deadline_that_would_still_have_passed_is_refused_with_the_time_it_gives(world, orch):
    """An extension counted from a deadline that passed long ago may still lie in the past: taken, it answered RUNNING
    and the instance went back to review a moment later. It is refused, saying the time it gives and the clock's,
    and nothing changes; an extension past now is taken."""
    world.publish(ONE_TASK)
    world.db.execute("UPDATE weave_apps SET status = 'DISABLED'")
    wf = world.start("one", {"order_id": "o-1"}, deadline_ms=1_000)
    world.db.execute("UPDATE weave_apps SET status = 'ACTIVE'")
    world.db.advance(8_000)  # the deadline passed 7 s ago
    orch.drain()
    assert [r["code"] for r in world.instance(wf)["review_reasons"]] == ["INSTANCE_DEADLINE"]
    before = world.db.table_counts()
    past = world.db.now() - dt.timedelta(seconds=1)  # later than the deadline, earlier than now
    for field, move in (("extend_ms", {"extend_ms": 1_000}), ("deadline_at", {"deadline_at": past})):
        with pytest.raises(errors.ValidationFailed, match=f"{field} gives .*, which has passed") as info:
            routines.instance_deadline(world.db.conn, world.token, "acme", wf, "a bit more", f"d-{field}", **move)
        assert (info.value.field_code, info.value.field) == ("DEADLINE_INVALID", field)
    assert world.db.table_counts() == before
    moved = routines.instance_deadline(world.db.conn, world.token, "acme", wf, "an hour more", "d-2",
                                       extend_ms=3_600_000)
    assert moved["status"] == "RUNNING"
    orch.drain()
    assert world.instance(wf)["status"] == "RUNNING"



@pytest.mark.parametrize("move", [dict(extend_ms=2**62), dict(extend_ms=315_360_000_000_000),
                                  dict(deadline_at="9999-12-31 23:59:59.999999", then_extend_ms=1),
                                  dict(deadline_at="0000-00-00 00:00:00"), dict(deadline_at="2030-00-10 00:00:00")],
                         ids=["product-overflows", "sum-overflows", "after-the-last-time", "zero-date", "zero-month"])
def test_C4_deadline_past_the_last_time_or_at_no_time_is_DEADLINE_INVALID_and_changes_nothing(world, move):
    world.publish(TWO_TIMERS)
    wf = world.start("two")
    conn = world.db.client()  # a zero date reaches the routine as it is
    try:
        if "then_extend_ms" in move:
            routines.instance_deadline(conn, world.token, "acme", wf, "as far as it goes", "d0",
                                       deadline_at=move["deadline_at"])
            move = dict(extend_ms=move["then_extend_ms"])
        before = world.db.table_counts(), world.db.scalar("SELECT deadline_at FROM weave_instances")
        with pytest.raises(errors.ValidationFailed) as info:
            routines.instance_deadline(conn, world.token, "acme", wf, "more time", "d1", **move)
        assert info.value.field_code == "DEADLINE_INVALID"
        assert (world.db.table_counts(), world.db.scalar("SELECT deadline_at FROM weave_instances")) == before
    finally:
        conn.close()

# --- cancel (C-2) and recovery (C-4) with tasks -----------------------------------------------------------
def two_tasks():
    task = {"type": "TASK", "queue": "payments", "handler": "example.echo", "handler_version": "1",
            "input": {"order": "$.input.order_id"}}
    return {"name": "pair", "steps": [{"key": "a", **task}, {"key": "b", **task}]}


def cancel(world, wf, key="c1"):
    return routines.instance_cancel(world.db.conn, world.token, "acme", wf, "customer withdrew", key)


def test_C2_cancel_with_one_queued_and_one_running_task_waits_for_the_real_outcome(world, orch):
    from procedures import pulse

    world.publish(two_tasks())
    wf = world.start("pair", {"order_id": "o1"})
    orch.drain()
    running = pulse.task_claim(world.db.conn, "w1", "payments", limit=1)[0]
    result = cancel(world, wf)
    assert result["status"] == "CANCELLING" and result["changed"] == 1
    inst = world.instance(wf)
    assert inst["gate"] == "CLOSED" and {s["status"] for s in inst["steps"]} == {"CANCELLED"}
    statuses = {r["status"]: r["cancel_requested"] for r in world.db.rows(
        "SELECT status, cancel_requested FROM pulse_tasks")}
    assert statuses == {"CANCELLED": 0, "RUNNING": 1}  # queued cancelled at once, running asked to stop (K-5)
    beat = pulse.attempt_heartbeat(world.db.conn, running["attempt_id"], "w1")
    assert beat["cancel_requested"] == 1
    orch.drain()
    assert world.instance(wf)["status"] == "CANCELLING"  # the running task's outcome is not in yet
    assert world.db.scalar("SELECT COUNT(*) FROM pulse_permits WHERE released_at IS NULL") == 1
    pulse.attempt_complete(world.db.conn, running["attempt_id"], "w1", {"done": True})
    assert world.instance(wf)["status"] == "CANCELLED"  # the report consumed its outcome and finished the cancel
    assert "INBOX:RECORDED" not in orch.drain()
    inst = world.instance(wf)
    assert inst["status"] == "CANCELLED" and inst["finished_at"] is not None
    types = [e["type"] for e in world.events(wf)]
    assert "TASK_OUTCOME_RECORDED" in types and types[-1] == "INSTANCE_CANCELLED"
    assert cancel(world, wf, key="c2")["changed"] == 0  # a no-op success once cancelled


def test_C2_cancel_without_tasks_in_flight_is_final_at_once_and_rejects_pending_signals(world, orch):
    world.publish(TWO_TIMERS)
    wf = world.start("two")
    orch.drain()
    result = cancel(world, wf)
    assert result["status"] == "CANCELLED"
    inst = world.instance(wf)
    assert inst["steps"][0]["wait"]["status"] == "CANCELLED"
    assert world.db.scalar("SELECT COUNT(*) FROM weave_pending_advances") == 0
    with pytest.raises(errors.InvalidState):
        pause(world, wf, key="after-cancel")


def test_C6_cancel_of_a_succeeded_instance_is_invalid(world, orch):
    world.publish({"name": "short", "steps": [{"key": "t", "type": "TIMER", "delay_ms": 1}]})
    wf = world.start("short")
    orch.drain()
    world.db.advance(5)
    orch.drain()
    with pytest.raises(errors.InvalidState):
        cancel(world, wf)


def failing_task():
    return {"name": "charge", "steps": [
        {"key": "charge", "type": "TASK", "queue": "payments", "handler": "example.fail", "handler_version": "1",
         "input": {"order": "$.input.order_id"}, "retry": {"max_attempts": 1}},
        {"key": "cool", "type": "TIMER", "delay_ms": 1000, "after": ["charge"]}]}


def fail_current_task(world, orch):
    from procedures import pulse

    claimed = pulse.task_claim(world.db.conn, "w1", "payments", limit=1)[0]
    pulse.attempt_fail(world.db.conn, claimed["attempt_id"], "w1", "card declined", retryable=False)
    orch.drain()


def test_C4_recovery_is_refused_while_a_task_is_in_flight_then_accepted(world, orch):
    from procedures import pulse

    doc = failing_task()
    doc["steps"].append({"key": "notify", "type": "TASK", "queue": "payments", "handler": "example.echo",
                         "handler_version": "1", "priority": -1})
    world.publish(doc)
    wf = world.start("charge", {"order_id": "o1"})
    orch.drain()
    fail_current_task(world, orch)  # charge fails first (higher priority); notify is still queued
    assert [r["code"] for r in world.instance(wf)["review_reasons"]] == ["TASK_FAILED"]
    with pytest.raises(errors.TaskInFlight) as queued:
        routines.step_reactivate(world.db.conn, world.token, "acme", wf, "charge", "retry after fix", "r1")
    notify = pulse.task_claim(world.db.conn, "w1", "payments", limit=1)[0]
    with pytest.raises(errors.TaskInFlight) as running:
        routines.step_reactivate(world.db.conn, world.token, "acme", wf, "charge", "retry after fix", "r1")
    with world.held(attempt_id=notify["attempt_id"]):
        pulse.attempt_complete(world.db.conn, notify["attempt_id"], "w1", {"sent": True})
    with pytest.raises(errors.TaskInFlight) as stored:  # stored but not consumed yet: still unsettled
        routines.step_reactivate(world.db.conn, world.token, "acme", wf, "charge", "retry after fix", "r1")
    # Each refusal names the task that holds recovery back, and where it is.
    task = notify["task_id"]
    assert str(queued.value).endswith(f"task {task} of step notify is QUEUED")
    assert str(running.value).endswith(f"task {task} of step notify is RUNNING on worker w1")
    assert str(stored.value).endswith(f"the outcome of task {task} of step notify waits for the orchestrator")
    orch.drain()
    routines.step_reactivate(world.db.conn, world.token, "acme", wf, "charge", "retry after fix", "r1")
    orch.drain()
    step = world.step(wf, "charge")
    assert step["status"] == "ACTIVE" and step["activation_sequence"] == 2
    fail_current_task(world, orch)
    open_before = world.db.scalar("SELECT open_steps FROM weave_instances")
    result = routines.step_resolve(world.db.conn, world.token, "acme", wf, "charge", "paid by wire", "s1",
                                   output={"paid": "wire"}, evidence_ref="ticket-42")
    assert result["status"] == "RUNNING"
    assert world.db.scalar("SELECT open_steps FROM weave_instances") == open_before - 1  # the resolved step succeeded
    orch.drain()
    inst = world.instance(wf)
    assert inst["steps"][0]["output"] == {"paid": "wire"} and inst["steps"][1]["status"] == "ACTIVE"
    # C-5: both activations and their tasks stay as they were.
    assert world.db.scalar("SELECT COUNT(*) FROM weave_activations WHERE step_key = 'charge'") == 2
    assert world.db.scalar("SELECT COUNT(*) FROM pulse_tasks WHERE status = 'FAILED'") == 2
    closed = world.db.rows("SELECT code, closed_by FROM weave_review_reasons ORDER BY id")
    assert closed == [{"code": "TASK_FAILED", "closed_by": "reactivate"},
                      {"code": "TASK_FAILED", "closed_by": "resolve"}]


def test_R9_C4_resolving_the_last_step_ends_the_instance_in_the_same_transaction(world, orch):
    """R-9: when every step is SUCCEEDED the instance is, in the transaction that settled the last step. A resolve
    of the last step answered RUNNING, and the instance ended a moment later by the ROOT checkpoint's walk: the
    answer and every read between said a finished instance was running."""
    world.publish({"name": "only", "steps": [dict(failing_task()["steps"][0])]})
    wf = world.start("only", {"order_id": "o1"})
    orch.drain()
    fail_current_task(world, orch)
    assert world.instance(wf)["status"] == "NEEDS_REVIEW"
    result = routines.step_resolve(world.db.conn, world.token, "acme", wf, "charge", "paid by wire", "s1",
                                   output={"paid": "wire"})
    assert result["status"] == "SUCCEEDED" and result["instance"]["status"] == "SUCCEEDED"
    assert [e["type"] for e in world.events(wf)][-3:] == ["STEP_RESOLVED", "INSTANCE_REOPENED", "INSTANCE_SUCCEEDED"]
    assert world.db.scalar("SELECT COUNT(*) FROM weave_pending_advances") == 0
    assert routines.step_resolve(world.db.conn, world.token, "acme", wf, "charge", "paid by wire", "s1",
                                 output={"paid": "wire"})["replayed"] == 1


def test_C4_a_task_in_flight_with_the_longest_step_key_and_worker_id_is_named_within_a_message(world, orch):
    """The refusal names the task's step and worker; the longest of each would have made the message longer than
    the 128 characters a message carries (the routine's text a refusal of another kind): each is cut to 24."""
    from procedures import pulse

    doc = failing_task()
    doc["steps"].append({"key": "n" * 64, "type": "TASK", "queue": "payments", "handler": "example.echo",
                         "handler_version": "1", "priority": -1})
    world.publish(doc)
    wf = world.start("charge", {"order_id": "o1"})
    orch.drain()
    fail_current_task(world, orch)
    pulse.task_claim(world.db.conn, "w" * 128, "payments", limit=1)
    with pytest.raises(errors.TaskInFlight) as running:
        routines.step_reactivate(world.db.conn, world.token, "acme", wf, "charge", "retry after fix", "r1")
    assert f"of step {'n' * 24} is RUNNING on worker {'w' * 24}" in str(running.value)


def test_C4_recovery_of_a_step_not_in_review_is_invalid_and_actions_are_audited(world, orch):
    world.publish(failing_task())
    wf = world.start("charge", {"order_id": "o1"})
    orch.drain()
    with pytest.raises(errors.InvalidState):
        routines.step_resolve(world.db.conn, world.token, "acme", wf, "cool", "x", "s0", output=None)
    fail_current_task(world, orch)
    with pytest.raises(errors.NotFound):
        routines.step_reactivate(world.db.conn, world.token, "acme", wf, "nope", "x", "r0")
    routines.step_reactivate(world.db.conn, world.token, "acme", wf, "charge", "try again", "r1")
    again = routines.step_reactivate(world.db.conn, world.token, "acme", wf, "charge", "try again", "r1")
    assert again["replayed"] == 1 and again["activation_sequence"] == 2
    audit = world.db.rows("SELECT actor, action, reason FROM weave_audit WHERE action = 'step.reactivate'")
    assert audit == [{"actor": "ops", "action": "step.reactivate", "reason": "try again"}]


@pytest.mark.parametrize("evidence_ref", ["", "e" * 513, "ticket 42", "ticket\t42", "ticket\x0742", "ticket\u00a042",
                                          "ticket\u200842", "ticket\u202842"])
def test_C4_resolve_refuses_an_evidence_ref_exactly_as_a_signal_does(world, orch, evidence_ref):
    """One rule for the field wherever it is given (05-signals): at most 512 characters, no whitespace (Unicode's
    separators included) and no control characters."""
    world.publish(failing_task())
    wf = world.start("charge", {"order_id": "o1"})
    orch.drain()
    fail_current_task(world, orch)
    with pytest.raises(errors.ValidationFailed) as info:
        routines.step_resolve(world.db.conn, world.token, "acme", wf, "charge", "paid by wire", "s1",
                              output={"paid": "wire"}, evidence_ref=evidence_ref)
    assert info.value.field_code == "EVIDENCE_REF_INVALID"


@pytest.mark.parametrize(("first", "again"), [
    ({"evidence_ref": "-"}, {}),  # an absent evidence_ref is not the evidence_ref "-"
    ({}, {"evidence_ref": "-"}),
    ({"evidence_ref": "x|y", "reason": "z"}, {"evidence_ref": "x", "reason": "y|z"}),  # nor a moved field boundary
    ({}, {"output": {"paid": "card"}}),
    ({}, {"reason": "paid by card"}),
])
def test_C4_resolve_under_one_key_with_another_output_evidence_or_reason_is_a_conflict(world, orch, first, again):
    """A resolve's request digest covers each of its fields on its own: the same key with any field different is
    IDEMPOTENCY_CONFLICT, never a replay of the first resolve; and a replay is still answered."""
    world.publish(failing_task())
    wf = world.start("charge", {"order_id": "o1"})
    orch.drain()
    fail_current_task(world, orch)
    request = {"reason": "paid by wire", "output": {"paid": "wire"}}

    def resolve(**fields):
        body = {**request, **fields}
        return routines.step_resolve(world.db.conn, world.token, "acme", wf, "charge", body.pop("reason"), "s1",
                                     **body)

    assert resolve(**first)["replayed"] == 0
    assert resolve(**first)["replayed"] == 1
    with pytest.raises(errors.IdempotencyConflict):
        resolve(**again)
    assert world.db.scalar("SELECT COUNT(*) FROM weave_audit WHERE action = 'step.resolve'") == 1


def test_C4_resolve_replayed_with_its_output_spelled_otherwise_is_the_same_request(world, orch):
    """The output is a JSON value: the same resolve from another client (keys in another order, whitespace, escapes)
    is a replay; another value is a conflict. A resolve that an earlier version recorded with the digest of the
    output's exact text is still answered as a replay when sent again with that text."""
    world.publish(failing_task())
    wf = world.start("charge", {"order_id": "o1"})
    orch.drain()
    fail_current_task(world, orch)

    def resolve(text: str, key: str = "s1") -> dict:
        return routines.step_resolve(world.db.conn, world.token, "acme", wf, "charge", "paid by wire", key,
                                     output=None, output_json=text)

    assert resolve('{"paid": "wire", "amount": 12.5, "by": "Zoë"}')["replayed"] == 0
    for same in ('{"by":"Zo\\u00eb","amount":12.5,"paid":"wire"}', '{ "amount" : 12.50 , "paid":"wire","by":"Zoë"}'):
        assert resolve(same)["replayed"] == 1, same
    before = world.db.table_counts()
    for other in ('{"paid": "wire", "amount": 12.51, "by": "Zoë"}', '{"paid": "wire", "amount": 12.5}',
                  '{"paid": "wire", "amount": 12.5, "by": "Zoë"'):
        with pytest.raises(errors.IdempotencyConflict):
            resolve(other)
    assert world.db.table_counts() == before

    # As an earlier version recorded it: the digest of the output's text as it came (the API's compact writing, a
    # SQL caller's as typed), which the step keeps. A retry after the upgrade, from whichever client, is a replay.
    first = world.db.scalar("SELECT output FROM weave_steps WHERE step_key = 'charge'")
    assert first == '{"paid": "wire", "amount": 12.5, "by": "Zoë"}'
    world.db.execute("UPDATE weave_audit SET request_digest = _weave_resolve_digest('charge', NULL, %s, NULL, "
                     "'paid by wire') WHERE action = 'step.resolve'", first)
    for again in (first, '{"by":"Zoë","paid":"wire","amount":12.5}', '{"amount": 12.50, "paid": "wire", "by": "Zoë"}'):
        assert resolve(again)["replayed"] == 1, again
    for other in ('{"paid": "card"}', '{"paid": "wire", "amount": 12.5, "by": "Zoë"', first + " " * 300_000):
        with pytest.raises(errors.IdempotencyConflict):
            resolve(other)
    assert world.db.table_counts() == before


@pytest.mark.parametrize("action", ["reactivate", "resolve", "continue"])
def test_C4_an_action_meant_for_one_activation_is_refused_once_the_step_is_in_review_at_another(world, orch, action):
    """An operator decides about what one activation showed. Meanwhile another may reactivate the step, and its new
    activation fail into review for other reasons: the action, sent with the activation it was meant for, is then
    refused INVALID_STATE with nothing changed, and goes through once aimed at the activation in review now. Without
    an activation the action applies to the current one, as before."""
    doc = failing_task() if action != "continue" else {"name": "charge", "steps": [
        {"key": "charge", "type": "POLL", "queue": "payments", "handler": "example.poll", "handler_version": "1",
         "interval_ms": 1_000, "max_rounds": 1, "timeout_ms": 3_600_000,
         "result": {"pending": ["PENDING"], "success": ["DONE"]}}]}
    world.publish(doc)
    wf = world.start("charge", {"order_id": "o1"})
    orch.drain()

    def into_review() -> None:
        if action != "continue":
            fail_current_task(world, orch)
            return
        from procedures import pulse

        claimed = pulse.task_claim(world.db.conn, "w1", "payments", limit=1)[0]
        pulse.attempt_complete(world.db.conn, claimed["attempt_id"], "w1", {"status": "PENDING"})
        orch.drain()

    into_review()
    routines.step_reactivate(world.db.conn, world.token, "acme", wf, "charge", "someone else retried", "r1",
                             activation_sequence=1)
    orch.drain()
    into_review()
    assert world.step(wf, "charge")["activation_sequence"] == 2 and world.instance(wf)["status"] == "NEEDS_REVIEW"

    def act(seq: int | None, key: str) -> dict:
        conn, token = world.db.conn, world.token
        if action == "reactivate":
            return routines.step_reactivate(conn, token, "acme", wf, "charge", "retry", key, activation_sequence=seq)
        if action == "resolve":
            return routines.step_resolve(conn, token, "acme", wf, "charge", "paid by wire", key, output={"paid": 1},
                                         activation_sequence=seq)
        return routines.step_continue(conn, token, "acme", wf, "charge", "one more", key, extra_rounds=1,
                                      activation_sequence=seq)

    before = world.db.table_counts()
    with pytest.raises(errors.InvalidState, match="at activation 2, not 1"):
        act(1, "stale")
    assert world.db.table_counts() == before
    assert world.instance(wf)["status"] == "NEEDS_REVIEW"
    assert act(2, "current")["replayed"] == 0
    assert act(2, "current")["replayed"] == 1  # a replay answers, whatever the step is at now
    with pytest.raises(errors.IdempotencyConflict):
        act(None, "current")  # the activation is part of the request


def test_C5_recovery_never_rewrites_history(world, orch):
    world.publish(failing_task())
    wf = world.start("charge", {"order_id": "o1"})
    orch.drain()
    fail_current_task(world, orch)
    before = world.events(wf)
    first_activation = world.db.row("SELECT * FROM weave_activations WHERE seq = 1")
    routines.step_reactivate(world.db.conn, world.token, "acme", wf, "charge", "again", "r1")
    orch.drain()
    assert world.events(wf)[:len(before)] == before
    assert world.db.row("SELECT * FROM weave_activations WHERE seq = 1") == first_activation


def test_C3_review_lists_every_open_reason_with_its_facts_and_the_listing_is_indexed(world, orch):
    world.publish(failing_task())
    wf = world.start("charge", {"order_id": "o1"})
    world.start("charge", {"order_id": "o2"})
    orch.drain()
    fail_current_task(world, orch)
    listed = routines.instance_list(world.db.conn, world.token, "acme", status="NEEDS_REVIEW")
    assert [i["workflow_id"] for i in listed["items"]] == [wf]
    reason = world.instance(wf)["review_reasons"][0]
    assert reason["code"] == "TASK_FAILED" and reason["step_key"] == "charge" and reason["activation_sequence"] == 1
    assert reason["detail"]["last_error"] == "card declined" and reason["detail"]["attempts_used"] == 1
    plan = world.db.rows("EXPLAIN SELECT id FROM weave_instances FORCE INDEX (ix_instance_status) "
                         "WHERE namespace_id = 1 AND status = 'NEEDS_REVIEW' AND id < 100 ORDER BY id DESC LIMIT 50")
    assert plan[0]["key"] == "ix_instance_status" and plan[0]["type"] in ("range", "ref")


def test_R9_resolving_the_last_step_ends_the_instance_on_the_root_walk(world, orch):
    """A step a person resolves is settled by the resolution, not by a step's own settlement: the ROOT walk that
    follows finds no step open and ends the instance itself (R-9), its event numbered after the resolution's."""
    world.publish({"name": "charge", "steps": [failing_task()["steps"][0]]})
    wf = world.start("charge", {"order_id": "o1"})
    orch.drain()
    fail_current_task(world, orch)
    assert world.instance(wf)["status"] == "NEEDS_REVIEW"
    routines.step_resolve(world.db.conn, world.token, "acme", wf, "charge", "paid by wire", "s1",
                          output={"paid": "wire"})
    orch.drain()
    inst = world.instance(wf)
    assert inst["status"] == "SUCCEEDED" and inst["finished_at"] is not None
    events = world.events(wf)
    assert [e["type"] for e in events][-3:] == ["STEP_RESOLVED", "INSTANCE_REOPENED", "INSTANCE_SUCCEEDED"]
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert world.db.scalar("SELECT COUNT(*) FROM weave_pending_advances") == 0


def test_C4_resolve_of_a_step_whose_activation_failed_supplies_the_output_its_successor_reads(world, orch):
    """A step sent to review by its own activation (R-18) has no activation row: resolve still settles it, and the
    next step's expressions read the output the operator supplied."""
    world.publish({"name": "approve-then-charge", "steps": [
        {"key": "approval", "type": "SIGNAL", "correlation": "$.input.order_id", "timeout_ms": 3_600_000,
         "signal": {"name": "approval.decided", "payload_version": "1", "payload_type": "object"}},
        {"key": "charge", "type": "TASK", "queue": "payments", "handler": "example.echo", "handler_version": "1",
         "after": ["approval"], "input": {"approved": "$.steps.approval.output.approved"}}]})
    wf = world.start("approve-then-charge", {"order_id": 42})  # a number: no correlation bytes, ACTIVATION_FAILED
    orch.drain()
    assert [r["code"] for r in world.instance(wf)["review_reasons"]] == ["ACTIVATION_FAILED"]
    routines.step_resolve(world.db.conn, world.token, "acme", wf, "approval", "approved by phone", "resolve-1",
                          output={"approved": True})
    orch.drain()
    inst = world.instance(wf)
    assert inst["status"] == "RUNNING" and inst["review_reasons"] == []
    steps = {s["key"]: s for s in inst["steps"]}
    assert steps["approval"]["status"] == "SUCCEEDED" and steps["approval"]["output"] == {"approved": True}
    assert steps["charge"]["status"] == "ACTIVE"
    assert world.db.scalar("SELECT input FROM pulse_tasks WHERE step_key = 'charge'") == '{"approved": true}'


def test_C1_R8_an_instance_paused_past_its_deadline_with_work_waiting_goes_to_review_at_the_deadline(world, orch):
    """Pause moves no deadline: the successor that waits for resume is new work, so at the instance deadline the
    instance goes to review (INSTANCE_DEADLINE) — not up to a minute later, when the paused ROOT would next have
    looked — and resume then starts nothing."""
    world.publish(TWO_TIMERS)
    wf = world.start("two", deadline_ms=90_000)
    pause(world, wf)
    world.db.advance(61_000)
    orch.drain()  # the first timer settles while paused; the second waits on the ROOT checkpoint
    assert world.instance(wf)["status"] == "RUNNING"
    root = world.db.row("SELECT available_at FROM weave_pending_advances WHERE step_key = ''")
    assert root["available_at"] <= world.db.scalar("SELECT deadline_at FROM weave_instances")
    world.db.advance(29_000)  # at (just past) the instance deadline
    orch.drain()
    inst = world.instance(wf)
    assert inst["status"] == "NEEDS_REVIEW" and inst["gate"] == "CLOSED" and inst["control"] == "PAUSED"
    assert [r["code"] for r in inst["review_reasons"]] == ["INSTANCE_DEADLINE"]
    assert [s["status"] for s in inst["steps"]] == ["SUCCEEDED", "PENDING"]
    assert resume(world, wf)["changed"] == 1
    orch.drain()
    assert world.step(wf, "second")["status"] == "PENDING" and world.instance(wf)["status"] == "NEEDS_REVIEW"


def test_a_business_key_filter_matches_the_key_exactly_trailing_spaces_included(world):
    """The docs promise an exact match; the key's collation pads with spaces, where 'bk' and 'bk ' are one value."""
    world.publish({"name": "keyed", "steps": [{"key": "wait", "type": "TIMER", "delay_ms": 60_000}]})
    plain, spaced = world.start("keyed", business_key="bk"), world.start("keyed", business_key="bk ")
    for key, want in (("bk", [plain]), ("bk ", [spaced]), ("bk  ", [])):
        listed = routines.instance_list(world.db.conn, world.token, "acme", business_key=key)["items"]
        assert [i["workflow_id"] for i in listed] == want, key
    assert [i["workflow_id"] for i in routines.instance_list(world.db.conn, world.token, "acme", business_key="bk",
                                                             status="RUNNING")["items"]] == [plain]


def test_R3_cancel_locks_only_its_own_instance_signals_and_never_waits_for_another_instance(world, orch):
    """C-2 rejects the instance's PENDING signals. R-3: it takes the child rows of its own, locked instance only:
    a decision of another instance that holds one of that instance's PENDING signals does not make the cancel wait
    (nor deadlock with it, when that decision goes on to settle its signal), however many signals either holds."""
    from tests.support.signals import send, signal_flow

    world.publish(signal_flow(then_timer=True))
    world.publish(signal_flow("early-flow", before_timer_ms=60_000))
    settled = world.start("approval-flow", {"order_id": "o-1"})
    orch.drain()
    for i in range(30):  # one wins, the others are settled at acceptance: many signals, none PENDING
        send(world, settled, f"k{i}")
    early = world.start("early-flow", {"order_id": "o-1"})
    orch.drain()
    pending = send(world, early, "k1")  # an early signal: PENDING until the step activates (S-10)
    assert pending["status"] == "PENDING"
    holder, acting = world.db.connect(), world.db.connect()
    try:
        holder.begin()
        with holder.cursor() as cur:  # a decision of the other instance holds its signal
            cur.execute("SELECT id FROM weave_signals WHERE id = %s FOR UPDATE", (pending["signal_id"][4:],))
        with acting.cursor() as cur:
            cur.execute("SET SESSION innodb_lock_wait_timeout = 2")
        result = routines.instance_cancel(acting, world.token, "acme", settled, "customer withdrew", "c1")
    finally:
        holder.rollback()
        holder.close()
        acting.close()
    assert result["status"] == "CANCELLED"
    assert world.db.scalar("SELECT status FROM weave_signals WHERE id = %s", pending["signal_id"][4:]) == "PENDING"
