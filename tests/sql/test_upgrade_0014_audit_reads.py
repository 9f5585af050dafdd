"""R-17 upgrade test for migration 0014 (the audit trail read a namespace at a time): a database with a namespace's
own actions beside an instance's audit rows, taken back to the level before 0014, answers the same pages but reads
the engine's rows to find them; migrated again, it keeps every audit row and reads only what it answers."""

from __future__ import annotations

from procedures import installer, routines
from tests.benchmarks.bench_reads import reads_of
from tests.sql.test_upgrade_0011_instance_list_reads import _keys
from tests.support.db import roll_back_migration

MIGRATION = "0014.audit-reads"
TIMER = {"name": "wait", "steps": [{"key": "t", "type": "TIMER", "delay_ms": 1_000}]}


def test_R17_migration_0014_keeps_the_audit_trail_and_reads_a_namespace_s_actions_apart(world, orch, database):
    for n in range(3):
        world.credential(["workflows:read"], actor=f"bot-{n}")
    world.publish(TIMER)
    for n in range(40):
        world.start("wait", key=f"busy-{n}")
    world.db.advance(1_001)
    orch.drain()

    def page() -> tuple[list[str], int]:
        read = lambda: routines.audit_list(world.db.conn, world.admin, world.namespace, limit=3)  # noqa: E731
        return [r["audit_id"] for r in read()["items"]], reads_of(world.db.conn, read)

    ids, reads = page()
    before = world.db.rows("SELECT * FROM weave_audit ORDER BY id")
    roll_back_migration(database, MIGRATION)
    assert _keys(world, "weave_audit")["ix_audit_namespace"] == ["namespace_id", "created_at"]
    old_ids, old_reads = page()
    assert old_ids == ids and old_reads > reads + 80, (reads, old_reads)  # the engine's 80 rows walked
    assert installer.migrate(database, test_clock=True).migrations_applied == [MIGRATION]
    assert _keys(world, "weave_audit")["ix_audit_namespace"] == ["namespace_id", "instance_id", "created_at"]
    assert world.db.rows("SELECT * FROM weave_audit ORDER BY id") == before
    assert page() == (ids, reads)
