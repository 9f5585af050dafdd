"""R-17 upgrade test for migration 0017 (work waiting for room waits in line): a database with an instance deferred
for room, a waiting timer and an early signal, taken back to level 16 and migrated again, keeps every due time,
next check time and signal exactly; the deferred instance joins its line at its next look in its place (the time
its deferral began), and a task's end wakes it from then on."""

from __future__ import annotations

from procedures import installer, pulse, routines
from tests.support.db import columns, roll_back_migration
from tests.support.signals import send, signal_flow

MIGRATION = "0017.room-lines"
TASK = {"name": "pay", "steps": [{"key": "work", "type": "TASK", "queue": "payments", "handler": "example.echo",
                                  "handler_version": "1", "input": {}}]}
TIMER = {"name": "wait", "steps": [{"key": "t", "type": "TIMER", "delay_ms": 60_000}]}


def test_R17_migration_0017_keeps_deferrals_and_puts_them_in_line_at_their_next_look(world, orch, database):
    routines.app_put(world.db.conn, world.admin, world.namespace, "billing", 1)
    world.publish(TASK)
    world.publish(TIMER)
    world.publish(signal_flow("later-flow", before_timer_ms=30_000))
    world.start("pay", {"order_id": "holder"})
    waiting = world.start("pay", {"order_id": "waiting"})
    timer = world.start("wait")
    early_wf = world.start("later-flow", {"order_id": "o-1"})
    send(world, early_wf, "early-1")
    orch.drain()
    iid = world.internal_id(waiting)
    since = world.db.scalar("SELECT deferred_since FROM weave_pending_advances WHERE instance_id = %s", iid)

    roll_back_migration(database, MIGRATION)
    assert "deferred_for" not in columns(world.db, "weave_pending_advances")  # the previous level
    kept = {"checkpoints": world.db.rows("SELECT id, due_at, available_at, deferred_reason, deferred_since "
                                         "FROM weave_pending_advances ORDER BY id"),
            "signals": world.db.rows("SELECT id, status, available_at, request_digest FROM weave_signals")}

    assert installer.migrate(database, test_clock=True).migrations_applied == [MIGRATION]
    assert world.db.rows("SELECT id, due_at, available_at, deferred_reason, deferred_since "
                         "FROM weave_pending_advances ORDER BY id") == kept["checkpoints"]
    assert world.db.rows("SELECT id, status, available_at, request_digest FROM weave_signals") == kept["signals"]
    assert world.db.scalar("SELECT COUNT(*) FROM weave_pending_advances WHERE deferred_for IS NOT NULL") == 0

    world.db.advance(1_000)
    orch.drain()  # its next look: still no room, and now in line, in its place
    row = world.db.row("SELECT deferred_reason, deferred_for, deferred_since FROM weave_pending_advances "
                       "WHERE instance_id = %s", iid)
    assert (row["deferred_reason"], row["deferred_since"]) == ("QUOTA_FULL", since)
    assert row["deferred_for"] == world.db.scalar("SELECT id FROM weave_apps WHERE name = 'billing'")
    got, = pulse.task_claim(world.db.conn, "w1", "payments", limit=1, lease_ms=60_000)
    pulse.attempt_complete(world.db.conn, got["attempt_id"], "w1", {})
    orch.drain()  # woken by the task's end, with no time passing
    assert world.step(waiting, "work")["status"] == "ACTIVE"
    world.db.advance(60_000)
    orch.drain()
    assert world.instance(timer)["status"] == "SUCCEEDED"
    assert world.instance(early_wf)["status"] == "SUCCEEDED"
