"""R-17 upgrade test for migration 0010 (no index of tasks by app): a database with tasks queued, running and
ended, taken back to the level before 0010 and migrated again, keeps every task, the app list counts the app's
tasks in flight from its counter as before, and the tasks run on."""

from __future__ import annotations

from procedures import installer, pulse, routines
from tests.support.db import roll_back_migration
from tests.support.upgrade import TASK

MIGRATION = "0010.task-app-index"


def _keys(world) -> set[str]:
    return {r["k"] for r in world.db.rows("SELECT INDEX_NAME AS k FROM information_schema.STATISTICS WHERE "
                                          "TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'pulse_tasks'")}


def _in_flight(world) -> int:
    (app,) = routines.app_list(world.db.conn, world.admin, world.namespace)
    return app["in_flight"]


def test_R17_migration_0010_keeps_the_tasks_and_the_app_list_counts_them_in_flight(world, database):
    world.publish(TASK)
    for i in range(3):
        world.start("up-task", key=f"t-{i}")
    ended, running = pulse.task_claim(world.db.conn, "w1", "payments", limit=2)
    pulse.attempt_complete(world.db.conn, ended["attempt_id"], "w1", {"ok": True})
    before = world.db.rows("SELECT id, app_id, status FROM pulse_tasks ORDER BY id")
    assert [t["status"] for t in before] == ["SUCCEEDED", "RUNNING", "QUEUED"]
    assert _in_flight(world) == 2  # one running, one queued: the ended task gave its slot back

    roll_back_migration(database, MIGRATION)
    assert "ix_task_app" in _keys(world)  # the previous level
    assert installer.migrate(database, test_clock=True).migrations_applied == [MIGRATION]
    assert "ix_task_app" not in _keys(world)
    assert world.db.rows("SELECT id, app_id, status FROM pulse_tasks ORDER BY id") == before
    assert _in_flight(world) == 2

    pulse.attempt_complete(world.db.conn, running["attempt_id"], "w1", {"ok": True})
    (last,) = pulse.task_claim(world.db.conn, "w1", "payments")
    assert _in_flight(world) == 1
    pulse.attempt_complete(world.db.conn, last["attempt_id"], "w1", {"ok": True})
    assert _in_flight(world) == 0
    assert world.db.scalar("SELECT COUNT(*) FROM pulse_tasks WHERE status = 'SUCCEEDED'") == 3
