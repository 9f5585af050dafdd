"""R-17 upgrade test for migration 0008 (queues found by name): a database with tasks queued in several
namespaces taken back to the level before 0008 and migrated again keeps every queue and task exactly, and
workers with and without a namespace claim from it as before."""

from __future__ import annotations

from procedures import installer, pulse
from tests.support.db import roll_back_migration
from tests.support.upgrade import TASK
from tests.support.world import World


def _keys(world) -> set[str]:
    return {r["k"] for r in world.db.rows("SELECT INDEX_NAME AS k FROM information_schema.STATISTICS WHERE "
                                          "TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'weave_queues'")}


def _rows(world) -> dict[str, list[dict]]:
    return {"queues": world.db.rows("SELECT id, namespace_id, name, capacity, slots_taken FROM weave_queues "
                                    "ORDER BY id"),
            "tasks": world.db.rows("SELECT id, queue_id, status, available_at FROM pulse_tasks ORDER BY id")}


def test_R17_migration_0008_keeps_queues_and_tasks_and_claims_go_on(world, database):
    other = World.create(world.db, "tenant")
    for w in (world, other):
        w.publish(TASK)
        for i in range(2):
            w.start("up-task", key=f"t-{i}")
    before = _rows(world)
    assert [t["status"] for t in before["tasks"]] == ["QUEUED"] * 4

    roll_back_migration(database, "0008.queue-name-index")
    assert "ix_queue_name" not in _keys(world)  # the previous level
    assert installer.migrate(database, test_clock=True).migrations_applied == ["0008.queue-name-index"]
    assert "ix_queue_name" in _keys(world)
    assert _rows(world) == before

    # A worker of one namespace claims only there; one without a namespace claims from every namespace.
    mine = pulse.task_claim(world.db.conn, "w1", "payments", limit=10, namespace="tenant")
    assert [c["namespace"] for c in mine] == ["tenant", "tenant"]
    rest = pulse.task_claim(world.db.conn, "w2", "mail,payments", limit=10)
    assert [c["namespace"] for c in rest] == ["acme", "acme"]
