"""R-17 upgrade test for migration 0023 (each instance's count of PENDING steps on its row): a database with
instances at every point of their flow (just started, part way along a chain, a step in review and reactivated, one
cancelled, finished) taken back to the level before 0023 and migrated again gets every count right from the step
rows, keeps every due time and answer exactly, and the runtime carries each instance on with the counts kept right
(invariant M-4.9c)."""

from __future__ import annotations

from procedures import installer, invariants, routines
from tests.support.db import columns, roll_back_migration
from tests.support.signals import signal_step

MIGRATION = "0023.instance-pending-steps"
CHAIN = {"name": "chain", "steps": [
    {"key": "a", "type": "TIMER", "delay_ms": 1_000},
    {"key": "b", "type": "TIMER", "delay_ms": 5_000, "after": ["a"]},
    {"key": "c", "type": "TIMER", "delay_ms": 60_000, "after": ["b"]}]}
ASK = {"name": "ask", "steps": [signal_step("approval", timeout_ms=1_000),
                                {"key": "then", "type": "TIMER", "delay_ms": 1_000, "after": ["approval"]}]}


def _counts(world) -> dict[int, int]:
    return {r["id"]: r["pending_steps"]
            for r in world.db.rows("SELECT id, pending_steps FROM weave_instances ORDER BY id")}


def test_R17_migration_0023_counts_the_pending_steps_of_instances_in_flight_and_the_runtime_continues(
        world, orch, database):
    world.publish(CHAIN)
    world.publish(ASK)
    conn, token, ns = world.db.conn, world.token, world.namespace
    done = world.start("chain", key="done")
    world.db.advance(1_001)
    orch.drain()
    world.db.advance(5_001)
    orch.drain()
    world.db.advance(60_001)
    orch.drain()  # "done" finished
    part_way = world.start("chain", key="part")
    reviewed = world.start("ask", {"order_id": "o-1"}, key="reviewed")
    again = world.start("ask", {"order_id": "o-2"}, key="again")
    cancelled = world.start("chain", key="cancelled")
    world.db.advance(1_001)
    orch.drain()  # "a" settled in part-way and cancelled; both waits timed out into review
    routines.step_reactivate(conn, token, ns, again, "approval", "ask once more", "r-again")  # PENDING again
    routines.instance_cancel(conn, token, ns, cancelled, "withdrawn", "c-1")
    fresh = world.start("chain", key="fresh")  # every step PENDING but the first, activated by the start
    every = (done, part_way, reviewed, again, cancelled, fresh)
    before = {"counts": _counts(world), "instances": [world.instance(wf) for wf in every],
              "checkpoints": world.db.rows("SELECT id, due_at, available_at FROM weave_pending_advances ORDER BY id")}
    assert list(before["counts"].values()) == [0, 1, 1, 2, 0, 2]

    roll_back_migration(database, MIGRATION)
    assert "pending_steps" not in columns(world.db, "weave_instances")  # the previous level
    assert installer.migrate(database, test_clock=True).migrations_applied == [MIGRATION]
    assert _counts(world) == before["counts"]
    assert [world.instance(wf) for wf in every] == before["instances"]
    assert world.db.rows("SELECT id, due_at, available_at FROM weave_pending_advances ORDER BY id") == \
        before["checkpoints"]
    assert "M-4.9c" not in invariants.violations(conn)

    # The runtime goes on from the counted rows: the chains end, the reactivated wait takes its signal, the one in
    # review is resolved.
    orch.drain()
    from tests.support.signals import send

    send(world, again, "s-again", correlation_key="o-2", target_activation_sequence=2)
    routines.step_resolve(conn, token, ns, reviewed, "approval", "approved by phone", "res-1",
                          output={"approved": True})
    for _ in range(3):
        world.db.advance(60_001)
        orch.drain()
    assert {world.instance(wf)["status"] for wf in (done, part_way, reviewed, again, fresh)} == {"SUCCEEDED"}
    assert set(_counts(world).values()) == {0}
