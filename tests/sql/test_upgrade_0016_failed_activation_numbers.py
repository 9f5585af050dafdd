"""R-17 upgrade test for migration 0016 (a failed activation's number on its step): a database with a step whose
first activation failed into review, as the level before left it (the step at 0, its reason naming activation 1),
beside a waiting timer and an early signal, migrated, shows the step at the number its reason names; a recovery
guarded by it is taken, the reactivation is the next number, and every due time and signal is kept exactly."""

from __future__ import annotations

import pytest

from procedures import errors, installer, routines
from tests.support.db import roll_back_migration
from tests.support.signals import send, signal_flow

MIGRATION = "0016.failed-activation-numbers"
TIMER = {"name": "wait", "steps": [{"key": "t", "type": "TIMER", "delay_ms": 60_000}]}


def test_R17_migration_0016_gives_a_step_in_review_its_failed_activation_s_number(world, orch, database):
    world.publish(signal_flow())
    world.publish(signal_flow("later-flow", before_timer_ms=30_000))
    world.publish(TIMER)
    failed = world.start("approval-flow", {"order_id": 42})  # a number: its correlation cannot resolve
    waiting = world.start("wait")
    early_wf = world.start("later-flow", {"order_id": "o-1"})
    early = send(world, early_wf, "early-1")
    orch.drain()
    (reason,) = world.instance(failed)["review_reasons"]
    assert (reason["code"], reason["activation_sequence"]) == ("ACTIVATION_FAILED", 1)

    roll_back_migration(database, MIGRATION)
    # As the level before left such a step: at 0, without an activation.
    world.db.execute("UPDATE weave_steps SET activation_seq = 0 WHERE status = 'NEEDS_REVIEW'")
    assert world.step(failed, "approval")["activation_sequence"] == 0
    kept = {"checkpoints": world.db.rows("SELECT id, due_at, available_at FROM weave_pending_advances ORDER BY id"),
            "signals": world.db.rows("SELECT id, status, available_at, request_digest FROM weave_signals"),
            "others": [world.instance(wf) for wf in (waiting, early_wf)]}

    assert installer.migrate(database, test_clock=True).migrations_applied == [MIGRATION]
    assert world.step(failed, "approval")["activation_sequence"] == 1
    assert world.db.rows("SELECT id, due_at, available_at FROM weave_pending_advances ORDER BY id") == \
        kept["checkpoints"]
    assert world.db.rows("SELECT id, status, available_at, request_digest FROM weave_signals") == kept["signals"]
    assert [world.instance(wf) for wf in (waiting, early_wf)] == kept["others"]

    with pytest.raises(errors.InvalidState):
        routines.step_reactivate(world.db.conn, world.token, "acme", failed, "approval", "fixed", "r-0",
                                 activation_sequence=2)
    again = routines.step_reactivate(world.db.conn, world.token, "acme", failed, "approval", "fixed", "r-1",
                                     activation_sequence=1)
    assert again["activation_sequence"] == 2
    # The runtime goes on: the timer settles, the early signal settles its wait once its step is activated.
    world.db.advance(60_001)
    orch.drain()
    assert world.instance(waiting)["status"] == "SUCCEEDED"
    assert world.instance(early_wf)["status"] == "SUCCEEDED" and early["status"] == "PENDING"  # accepted early
    assert world.db.scalar("SELECT status FROM weave_signals WHERE idempotency_key = 'early-1'") == "CONSUMED"
