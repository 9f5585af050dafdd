"""R-17 upgrade test for migration 0009 (a task's end releases its slot into release stripes): a database with
tasks at every point of their life (queued, running, ended with their outcomes consumed or waiting in the inbox)
taken back to the level before 0009 has in-flight counters equal to its tasks in flight, and migrated again keeps
that count as the slots taken with every stripe at zero, every due time and result exactly as before, and the
runtime carries every task to its end with the count kept right (invariant M-4.7b)."""

from __future__ import annotations

from orchestrator.worker import Worker
from procedures import db as dbmod
from procedures import installer, invariants
from tests.support.db import roll_back_migration
from tests.support.upgrade import POLL, TASK

MIGRATION = "0009.task-slot-releases"
FACTS = {
    "tasks": "SELECT id, status, attempts_used, deadline_at, available_at, result FROM pulse_tasks ORDER BY id",
    "checkpoints": "SELECT instance_id, step_key, kind, due_at FROM weave_pending_advances ORDER BY id",
    "inbox": "SELECT id, task_id, state, occurred_at FROM pulse_inbox ORDER BY id",
}
IN_FLIGHT = "SELECT COUNT(*) FROM pulse_tasks WHERE status IN ('QUEUED', 'RUNNING')"


def _counters(world) -> list[dict]:
    return world.db.rows("SELECT 'app' AS owner, in_flight FROM weave_apps UNION ALL "
                         "SELECT 'queue', in_flight FROM weave_queues")


def _stripes_table(world) -> int:
    return world.db.scalar("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() "
                           "AND TABLE_NAME = 'pulse_slot_releases'")


def test_R17_migration_0009_keeps_the_tasks_in_flight_counted_and_the_runtime_continues(world, orch, database):
    import orchestrator.example_handlers  # noqa: F401 - registers example.echo and example.poll

    world.publish(TASK)
    world.publish(POLL)
    for i in range(3):
        world.start("up-task", key=f"task-{i}")
        world.start("up-poll", key=f"poll-{i}")
    orch.drain()
    worker = Worker(world.db.dsn, queues=["payments"], concurrency=1)
    worker.run(max_claims=3)  # three tasks end: their slots are released into the stripes
    dbmod.call(world.db.conn, "pulse_task_claim", "w-old", "payments", None, 1, 600_000)  # one stays RUNNING
    in_flight = world.db.scalar(IN_FLIGHT)
    assert in_flight == 3 and world.db.scalar("SELECT SUM(released) FROM pulse_slot_releases") == 2 * 3
    before = {name: world.db.rows(sql) for name, sql in FACTS.items()}

    # The previous level: the counters hold the tasks in flight themselves, and there is no stripe.
    roll_back_migration(database, MIGRATION)
    world.db.conn.close()
    world.db.conn = dbmod.connect(database)
    assert _stripes_table(world) == 0
    assert _counters(world) == [{"owner": "app", "in_flight": in_flight}, {"owner": "queue", "in_flight": in_flight}]

    assert installer.migrate(database, test_clock=True).migrations_applied == [MIGRATION]
    assert world.db.in_flight("app") == in_flight and world.db.in_flight("queue") == in_flight
    assert world.db.scalar("SELECT COUNT(*) FROM pulse_slot_releases WHERE released = 0") == 2 * 16
    assert {name: world.db.rows(sql) for name, sql in FACTS.items()} == before
    assert "M-4.7b" not in invariants.violations(world.db.conn)

    # The runtime goes on: the running attempt ends, every round and task runs; each end releases its slot.
    running = world.db.row("SELECT id FROM pulse_attempts WHERE status = 'RUNNING'")
    dbmod.call(world.db.conn, "pulse_attempt_complete", running["id"], "w-old", '{"status": "PENDING"}')
    for _ in range(4):
        orch.drain()
        worker.run(exit_when_idle=True)
        orch.drain()
        world.db.advance(1_001)
    statuses = [r["status"] for r in world.db.rows("SELECT status FROM weave_instances ORDER BY id")]
    assert statuses == ["SUCCEEDED"] * 6, statuses
    assert world.db.in_flight("app") == 0 and world.db.in_flight("queue") == 0
    assert world.db.scalar("SELECT SUM(released) FROM pulse_slot_releases") > 0
