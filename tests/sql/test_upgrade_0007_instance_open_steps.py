"""R-17 upgrade test for migration 0007 (each instance's count of open steps on its row): a database with
instances at every point of their flow (just started, one step settled, one step left, finished) taken back to
the level before 0007 and migrated again gets every count right from the step rows, keeps every due time and
answer exactly, and the runtime carries each instance to its end with the counts kept right (invariant
M-4.9b)."""

from __future__ import annotations

from procedures import installer, invariants
from tests.support.db import columns, roll_back_migration

FLOW = {"name": "three", "steps": [
    {"key": "a", "type": "TIMER", "delay_ms": 1_000},
    {"key": "b", "type": "TIMER", "delay_ms": 5_000, "after": ["a"]},
    {"key": "c", "type": "TIMER", "delay_ms": 60_000}]}
SHORT = {"name": "short", "steps": [{"key": "only", "type": "TIMER", "delay_ms": 1_000}]}


def _counts(world) -> dict[int, int]:
    return {r["id"]: r["open_steps"] for r in world.db.rows("SELECT id, open_steps FROM weave_instances ORDER BY id")}


def test_R17_migration_0007_counts_the_open_steps_of_instances_in_flight_and_the_runtime_continues(
        world, orch, database):
    world.publish(FLOW)
    world.publish(SHORT)
    done = world.start("short", key="done")
    part_way = [world.start("three", key="part-0")]
    world.db.advance(1_001)
    orch.drain()  # "done" finished, "a" settled in part-0 ("b" and "c" waiting)
    part_way.append(world.start("three", key="part-1"))
    world.db.advance(1_001)
    orch.drain()  # "a" settled in part-1
    world.db.advance(4_000)
    orch.drain()  # "b" settled in part-0 only (part-1's is due a second later; "c" still waiting in both)
    fresh = world.start("three", key="fresh")  # every step open
    before = {"counts": _counts(world),
              "instances": [world.instance(wf) for wf in (done, *part_way, fresh)],
              "checkpoints": world.db.rows("SELECT id, due_at, available_at FROM weave_pending_advances ORDER BY id")}
    assert list(before["counts"].values()) == [0, 1, 2, 3]

    roll_back_migration(database, "0007.instance-open-steps")
    assert "open_steps" not in columns(world.db, "weave_instances")  # the previous level
    assert installer.migrate(database, test_clock=True).migrations_applied == ["0007.instance-open-steps"]
    assert _counts(world) == before["counts"]
    assert [world.instance(wf) for wf in (done, *part_way, fresh)] == before["instances"]
    assert world.db.rows("SELECT id, due_at, available_at FROM weave_pending_advances ORDER BY id") == \
        before["checkpoints"]
    assert "M-4.9b" not in invariants.violations(world.db.conn)

    # The runtime goes on from the counted rows: every instance ends, each when its last step settles.
    world.db.advance(60_001)
    orch.drain()
    world.db.advance(5_001)
    orch.drain()
    assert {world.instance(wf)["status"] for wf in (done, *part_way, fresh)} == {"SUCCEEDED"}
    assert set(_counts(world).values()) == {0}
