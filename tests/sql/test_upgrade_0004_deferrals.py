"""R-17 upgrade test for migration 0004 (deferral columns on checkpoints): a database with in-flight work
(waiting timers, a deferred paused instance, a waiting signal) taken back to the level before 0004 and
migrated again keeps every due time, next check time and budget exactly, and the runtime goes on."""

from __future__ import annotations

from procedures import installer, routines
from tests.support.db import columns, roll_back_migration
from tests.support.signals import send, signal_flow

CHECKPOINT_COLUMNS = "id, instance_id, step_key, kind, activation_id, due_at, available_at, attempts, version"


def test_R17_migration_0004_keeps_in_flight_checkpoints_and_the_runtime_continues(world, orch, database):
    world.publish({"name": "two-timers", "steps": [
        {"key": "first", "type": "TIMER", "delay_ms": 5_000},
        {"key": "second", "type": "TIMER", "delay_ms": 5_000, "after": ["first"]}]})
    world.publish(signal_flow())
    waiting = world.start("two-timers")
    paused = world.start("two-timers")
    approval = world.start("approval-flow", {"order_id": "o-1"})
    orch.drain()
    routines.instance_pause(world.db.conn, world.token, world.namespace, paused, "hold", "pause-up")
    world.db.advance(5_000)
    orch.drain()
    assert world.instance(paused)["deferred"]["reason"] == "PAUSED"
    before = world.db.rows(f"SELECT {CHECKPOINT_COLUMNS} FROM weave_pending_advances ORDER BY id")
    waits = world.db.rows("SELECT id, status, due_at, deadline_at FROM weave_waits ORDER BY id")

    roll_back_migration(database, "0017.room-lines")  # it builds on 0004's columns: back first, up again after
    roll_back_migration(database, "0004.deferrals")
    assert "deferred_reason" not in columns(world.db, "weave_pending_advances")  # the previous level

    report = installer.migrate(database, test_clock=True)
    assert report.migrations_applied == ["0004.deferrals", "0017.room-lines"]
    assert world.db.rows(f"SELECT {CHECKPOINT_COLUMNS} FROM weave_pending_advances ORDER BY id") == before
    assert world.db.rows("SELECT id, status, due_at, deadline_at FROM weave_waits ORDER BY id") == waits
    assert world.db.scalar("SELECT COUNT(*) FROM weave_pending_advances WHERE deferred_reason IS NOT NULL") == 0

    # The runtime continues from the preserved rows.
    routines.instance_resume(world.db.conn, world.token, world.namespace, paused, "go", "resume-up")
    world.db.advance(5_000)
    orch.drain()
    send(world, approval)
    orch.drain()
    assert world.instance(waiting)["status"] == "SUCCEEDED"
    assert world.step(paused, "second")["status"] == "ACTIVE"
    assert world.instance(approval)["status"] == "SUCCEEDED"
