"""R-17 upgrade test for migration 0012 (the instances of a definition indexed by status): a database with
instances of one definition in several statuses, taken back to the level before 0012 and migrated again, keeps
every instance, and lists by definition, with and without a status, answer what they answered before."""

from __future__ import annotations

from procedures import installer
from tests.sql.test_read_flatness import SIGNAL, TIMER
from tests.sql.test_upgrade_0011_instance_list_reads import _keys
from tests.support import signals as signal_support
from tests.support.db import roll_back_migration

MIGRATION = "0012.instance-definition-status-index"


def test_R17_migration_0012_keeps_the_instances_and_their_lists_by_definition_and_status(world, orch, database):
    for flow in (TIMER, SIGNAL):
        world.publish(flow)
    review = world.start("order-signal", {"order_id": "o-1"})
    orch.drain()
    world.db.advance(61_000)
    orch.drain()  # NEEDS_REVIEW
    done, running = (world.start("order-signal", {"order_id": f"o-{i}"}) for i in (2, 3))
    signal_support.send(world, done, correlation_key="o-2")  # SUCCEEDED
    world.start("order-timer")

    def lists() -> list[list[str]]:
        from procedures import routines

        def ids(**filters) -> list[str]:
            page = routines.instance_list(world.db.conn, world.token, world.namespace, **filters)
            return [i["workflow_id"] for i in page["items"]]
        return [ids(definition="order-signal"), ids(definition="order-signal", status="SUCCEEDED"),
                ids(definition="order-signal", status="NEEDS_REVIEW"), ids(definition="order-signal", limit=2)]

    assert lists() == [[running, done, review], [done], [review], [running, done]]
    before = world.db.rows("SELECT * FROM weave_instances ORDER BY id")
    roll_back_migration(database, MIGRATION)
    assert _keys(world, "weave_instances")["ix_instance_definition"] == ["namespace_id", "definition_name", "id"]
    assert installer.migrate(database, test_clock=True).migrations_applied == [MIGRATION]
    keys = _keys(world, "weave_instances")
    assert "ix_instance_definition" not in keys
    assert keys["ix_instance_definition_status"] == ["namespace_id", "definition_name", "status", "id"]
    assert world.db.rows("SELECT * FROM weave_instances ORDER BY id") == before
    assert lists() == [[running, done, review], [done], [review], [running, done]]
