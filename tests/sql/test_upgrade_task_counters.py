"""R-17 upgrade test for migration 0003.task-counters (in-flight counters on app and queue rows).

The previous level is the schema without the counters: a database is filled with in-flight work (QUEUED and
RUNNING tasks of TASK and POLL steps, a waiting timer, an early signal), then migration 0003 is rolled back,
which leaves exactly the rows a level-1 install holds, and ``weave migrate`` brings it up again. The counters
must come back equal to the tasks in flight, every due time, budget and result must be exactly as before, and
the runtime must carry on to the end with the counters kept right (invariant M-4.7b).
"""

from __future__ import annotations

import os

import pytest

from orchestrator.loop import Orchestrator
from orchestrator.worker import Worker
from procedures import db as dbmod
from procedures import installer, invariants
from tests.support.db import Db, roll_back_migration
from tests.support.server import server_dsn
from tests.support.signals import send, signal_flow
from tests.support.upgrade import POLL, TASK
from tests.support.world import World

MIGRATION = "0003.task-counters"
# The later migration that turned the counters into slots taken less release stripes: it is rolled back first and
# applied again after this one (its own upgrade test is test_upgrade_0009_task_slot_releases).
STRIPES = "0009.task-slot-releases"

TIMER = {"name": "up-timer", "steps": [{"key": "wait", "type": "TIMER", "delay_ms": 60_000}]}

FACTS = {
    "checkpoints": "SELECT instance_id, step_key, kind, activation_id, due_at FROM weave_pending_advances "
                   "ORDER BY instance_id, step_key",
    "waits": "SELECT id, status, started_at, due_at, planned_due_at, deadline_at FROM weave_waits ORDER BY id",
    "tasks": "SELECT id, status, attempts_used, max_attempts, deadline_at, available_at, result FROM pulse_tasks "
             "ORDER BY id",
    "polls": "SELECT activation_id, state, rounds_used, max_rounds, next_poll_at, poll_deadline FROM weave_poll_states "
             "ORDER BY activation_id",
    "signals": "SELECT id, status, accepted_at, expires_at FROM weave_signals ORDER BY id",
    "steps": "SELECT id, status, output FROM weave_steps ORDER BY id",
}


@pytest.fixture
def upgrade_db():
    server, _ = server_dsn()
    dsn = server.with_database(f"{server.database}_up_{os.getpid()}")
    with dbmod.connect(dsn, database=False) as conn, conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{dsn.database}`")
    installer.migrate(dsn, test_clock=True)
    handle = Db(dsn)
    yield handle
    handle.close()
    with dbmod.connect(dsn, database=False) as conn, conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{dsn.database}`")


def _counter_columns(db: Db) -> int:
    return db.scalar("SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() "
                     "AND COLUMN_NAME IN ('in_flight', 'slots_taken') AND TABLE_NAME IN ('weave_apps', 'weave_queues')")


def test_R17_upgrade_to_task_counters_keeps_work_in_flight_and_counts_it(upgrade_db):
    import orchestrator.example_handlers  # noqa: F401 - registers example.echo and example.poll

    db = upgrade_db
    world = World.create(db, quota=50, capacity=40)
    for flow in (TASK, POLL, TIMER, signal_flow("up-signal", before_timer_ms=60_000)):
        world.publish(flow)
    for i in range(3):
        world.start("up-task", key=f"task-{i}")
        world.start("up-poll", key=f"poll-{i}")
    world.start("up-timer", key="timer")
    early = world.start("up-signal", {"order_id": "o-1"}, key="signal")
    send(world, early)  # an early signal: its step is not active yet
    orch = Orchestrator(db.dsn, concurrency=1, spread=False)
    orch.drain()
    worker = Worker(db.dsn, queues=["payments"], concurrency=1)
    worker.run(max_claims=2)  # two tasks end (their outcomes wait in the inbox) ...
    dbmod.call(db.conn, "pulse_task_claim", "w-old", "payments", None, 1, 600_000)  # ... and one stays RUNNING
    in_flight = db.scalar("SELECT COUNT(*) FROM pulse_tasks WHERE status IN ('QUEUED', 'RUNNING')")
    assert in_flight == 4 and db.scalar("SELECT COUNT(*) FROM pulse_tasks WHERE status = 'RUNNING'") == 1
    before = {name: db.rows(sql) for name, sql in FACTS.items()}

    # Back to the previous level: the rows stay, the counters go.
    roll_back_migration(db.dsn, STRIPES)
    roll_back_migration(db.dsn, MIGRATION)
    db.conn.close()
    db.conn = dbmod.connect(db.dsn)
    assert _counter_columns(db) == 0

    report = installer.migrate(db.dsn, test_clock=True)
    assert report.migrations_applied == [MIGRATION, STRIPES]
    assert _counter_columns(db) == 2
    assert db.in_flight("app", "billing") == in_flight
    assert db.in_flight("queue", "payments") == in_flight
    assert {name: db.rows(sql) for name, sql in FACTS.items()} == before  # due times, budgets, results
    invariants.check(db.conn)

    # The runtime carries on: the running attempt ends, every round and task runs, the timers settle.
    running = db.row("SELECT a.id FROM pulse_attempts a WHERE a.status = 'RUNNING'")
    dbmod.call(db.conn, "pulse_attempt_complete", running["id"], "w-old", '{"status": "PENDING"}')
    for _ in range(6):
        orch.drain()
        worker.run(exit_when_idle=True)
        orch.drain()
        db.advance(61_000)
    orch.close()
    statuses = [r["status"] for r in db.rows("SELECT status FROM weave_instances ORDER BY id")]
    assert statuses == ["SUCCEEDED"] * len(statuses), statuses
    assert db.in_flight("app", "billing") == 0
    assert db.in_flight("queue", "payments") == 0
    invariants.check(db.conn)
