"""Instance control (06-control): pause, resume and the deadline action."""

from __future__ import annotations

import pytest

from procedures import errors, routines

TWO_TIMERS = {"name": "two", "steps": [{"key": "first", "type": "TIMER", "delay_ms": 60_000},
                                       {"key": "second", "type": "TIMER", "delay_ms": 1_000, "after": ["first"]}]}


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
    wf = world.start("two")
    pause(world, wf)
    orch.drain()  # ROOT deferred while paused
    root = world.db.row("SELECT due_at, available_at FROM weave_pending_advances WHERE step_key = ''")
    assert root["available_at"] > world.db.now()
    resume(world, wf)
    root = world.db.row("SELECT due_at, available_at FROM weave_pending_advances WHERE step_key = ''")
    assert root["available_at"] <= world.db.now()
    orch.drain()
    assert world.step(wf, "first")["status"] == "ACTIVE"


def test_C6_pause_repeat_is_a_noop_and_replay_answers_the_same(world):
    world.publish(TWO_TIMERS)
    wf = world.start("two")
    assert pause(world, wf, key="a") == {"workflow_id": wf, "control": "PAUSED", "changed": 1, "replayed": 0}
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
    with pytest.raises(errors.ValidationFailed) as info:
        pause(world, wf, reason="")
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
    world.publish(TWO_TIMERS)
    wf = world.start("two", deadline_ms=1_000)
    world.db.advance(1_000)
    orch.drain()
    assert [r["code"] for r in world.instance(wf)["review_reasons"]] == ["INSTANCE_DEADLINE"]
    result = routines.instance_deadline(world.db.conn, world.token, "acme", wf, "customer asked", "d1",
                                        extend_ms=3_600_000)
    assert result["status"] == "RUNNING"
    inst = world.instance(wf)
    assert inst["gate"] == "OPEN" and inst["review_reasons"] == []
    orch.drain()
    assert world.step(wf, "first")["status"] == "ACTIVE"
    closed = world.db.row("SELECT closed_by FROM weave_review_reasons")
    assert closed == {"closed_by": "deadline"}
    assert routines.instance_deadline(world.db.conn, world.token, "acme", wf, "customer asked", "d1",
                                      extend_ms=3_600_000)["replayed"] == 1
