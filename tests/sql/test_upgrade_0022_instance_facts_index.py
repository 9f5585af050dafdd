"""R-17 upgrade test for migration 0022 (the facts that order an instance's decisions, read by their times): a
database with attempts running and ended, taken back to level 21 and migrated again, gives every attempt its task's
instance, so that a lease that ran out before a timer fell due is still decided first (R-13, F-9), and keeps every
row as it was."""

from __future__ import annotations

from procedures import installer, invariants, pulse
from tests.sql.test_stored_order import MINUTE, advance, branches, risky, the_outcome_then_the_timer
from tests.sql.test_timers import task_flow
from tests.support.db import columns, roll_back_migration

MIGRATION = "0022.instance-facts-index"
TABLES = ("pulse_tasks", "pulse_inbox", "weave_pending_advances", "weave_instances", "weave_steps")


def test_R17_migration_0022_names_every_attempt_s_instance_and_the_order_holds(world, database):
    world.publish(task_flow())
    world.publish(branches(risky()))
    ended = world.start("charge", {"order_id": "o-1"})
    [done] = pulse.task_claim(world.db.conn, "w1", "payments")
    pulse.attempt_complete(world.db.conn, done["attempt_id"], "w1", {"charged": 1})
    wf = world.start("charge-after-cooling", {"order_id": "o-2"})
    [running] = pulse.task_claim(world.db.conn, "w1", "payments", lease_ms=MINUTE)
    assert world.instance(ended)["status"] == "SUCCEEDED"
    before = {t: world.db.rows(f"SELECT * FROM {t} ORDER BY 1") for t in TABLES}
    attempts = world.db.rows("SELECT * FROM pulse_attempts ORDER BY id")

    roll_back_migration(database, MIGRATION)
    assert "instance_id" not in columns(world.db, "pulse_attempts")  # the previous level
    assert installer.migrate(database, test_clock=True).migrations_applied == [MIGRATION]
    assert {t: world.db.rows(f"SELECT * FROM {t} ORDER BY 1") for t in TABLES} == before
    assert world.db.rows("SELECT * FROM pulse_attempts ORDER BY id") == attempts  # each its task's instance again
    assert [a["instance_id"] for a in attempts] == [world.internal_id(ended), world.internal_id(wf)]
    assert "M-4.13c" not in invariants.violations(world.db.conn)

    world.db.advance(7 * MINUTE)  # the lease ran out at 1:00, the timer fell due at 5:07
    assert advance(world, wf, "cool") == "EARLIER_FIRST"
    assert pulse.lease_recover(world.db.conn, running["attempt_id"]) == "UNKNOWN"
    the_outcome_then_the_timer(world, wf)
