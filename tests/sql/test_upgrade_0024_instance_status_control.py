"""R-17 upgrade test for migration 0024 (the instances' status index carries their control): a database with live
instances, some paused, and settled ones, taken back to level 23 and migrated again, keeps every instance, counts
the same live figures, lists by status in the same order, and counts them from the index alone (R-11)."""

from __future__ import annotations

import re
from pathlib import Path

from procedures import installer, routines
from tests.sql.test_control import TWO_TIMERS, pause
from tests.sql.test_upgrade_0011_instance_list_reads import _keys
from tests.support.db import roll_back_migration

MIGRATION = "0024.instance-status-control"
STATUS = Path(__file__).resolve().parents[2] / "procedures" / "instances" / "weave_status.sql"


def live_count_statement() -> str:
    """weave_status's count of the live instances by status, as the routine's file writes it."""
    text = STATUS.read_text()
    return re.search(r"SELECT st\.status, COUNT\(i\.id\).*?;", text, re.S).group(0).rstrip(";")


def test_R11_R17_migration_0024_keeps_the_figures_and_counts_the_live_instances_from_the_index_alone(world,
                                                                                                    database):
    world.publish(TWO_TIMERS)
    running = [world.start("two") for _ in range(4)]
    for n, wf in enumerate(running[:2]):
        pause(world, wf, key=f"p-{n}")
    routines.instance_cancel(world.db.conn, world.token, "acme", running[3], "not needed", "c-1")

    def figures() -> tuple:
        listed = routines.instance_list(world.db.conn, world.token, world.namespace, status="RUNNING")["items"]
        return routines.status(world.db.conn)["instances"], [i["workflow_id"] for i in listed]

    before, rows = figures(), world.db.rows("SELECT * FROM weave_instances ORDER BY id")
    assert before[0]["RUNNING"] == {"instances": 3, "paused": 2}
    roll_back_migration(database, MIGRATION)
    assert _keys(world, "weave_instances")["ix_instance_status"] == ["namespace_id", "status", "id"]
    plan = {r["table"]: r for r in world.db.rows("EXPLAIN " + live_count_statement())}
    assert "Using index" not in (plan["i"]["Extra"] or "")  # each live instance's row was read for its control
    assert installer.migrate(database, test_clock=True).migrations_applied == [MIGRATION]
    assert _keys(world, "weave_instances")["ix_instance_status"] == ["namespace_id", "status", "id", "control"]
    assert world.db.rows("SELECT * FROM weave_instances ORDER BY id") == rows
    assert figures() == before
    plan = {r["table"]: r for r in world.db.rows("EXPLAIN " + live_count_statement())}
    assert plan["i"]["key"] == "ix_instance_status" and "Using index" in plan["i"]["Extra"]
