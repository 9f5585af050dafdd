"""R-17 upgrade test for migration 0011 (instances listed by control and by review code on an index): a database
with paused, running and reviewed instances, taken back to the level before 0011 and migrated again, keeps every
instance and review reason, and lists by control and by review code answer what they answered before."""

from __future__ import annotations

from procedures import installer, routines
from tests.sql.test_read_flatness import SIGNAL, TIMER
from tests.support.db import roll_back_migration

MIGRATION = "0011.instance-list-reads"


def _keys(world, table: str) -> dict[str, list[str]]:
    rows = world.db.rows("SELECT INDEX_NAME AS k, COLUMN_NAME AS c FROM information_schema.STATISTICS WHERE "
                         "TABLE_SCHEMA = DATABASE() AND TABLE_NAME = %s ORDER BY INDEX_NAME, SEQ_IN_INDEX", table)
    keys: dict[str, list[str]] = {}
    for r in rows:
        keys.setdefault(r["k"], []).append(r["c"])
    return keys


def test_R17_migration_0011_keeps_the_instances_and_their_lists_by_control_and_review_code(world, orch, database):
    for flow in (TIMER, SIGNAL):
        world.publish(flow)
    timers = [world.start("order-timer") for _ in range(3)]
    review = world.start("order-signal", {"order_id": "o-1"})
    orch.drain()
    world.db.advance(61_000)
    orch.drain()
    routines.instance_pause(world.db.conn, world.token, world.namespace, timers[1], "hold", "p-1")

    def lists() -> tuple[list[str], list[str], list[str]]:
        def ids(**filters) -> list[str]:
            page = routines.instance_list(world.db.conn, world.token, world.namespace, **filters)
            return [i["workflow_id"] for i in page["items"]]
        return ids(control="PAUSED"), ids(control="ACTIVE"), ids(review_code="SIGNAL_TIMEOUT")

    assert lists() == ([timers[1]], [review, timers[2], timers[0]], [review])
    before = world.db.rows("SELECT * FROM weave_instances ORDER BY id"), \
        world.db.rows("SELECT * FROM weave_review_reasons ORDER BY id")

    roll_back_migration(database, MIGRATION)
    assert "ix_instance_control" not in _keys(world, "weave_instances")  # the previous level
    assert _keys(world, "weave_review_reasons")["ix_review_open"] == ["closed_at", "instance_id"]
    assert installer.migrate(database, test_clock=True).migrations_applied == [MIGRATION]
    assert _keys(world, "weave_instances")["ix_instance_control"] == ["namespace_id", "control", "id"]
    assert _keys(world, "weave_review_reasons")["ix_review_open"] == ["closed_at", "code", "namespace_id",
                                                                      "instance_id"]
    assert (world.db.rows("SELECT * FROM weave_instances ORDER BY id"),
            world.db.rows("SELECT * FROM weave_review_reasons ORDER BY id")) == before
    assert lists() == ([timers[1]], [review, timers[2], timers[0]], [review])
