"""R-17 upgrade test for migration 0006 (an index on the rounds by instance): a database with polls in flight
(rounds answered PENDING, a round in flight, a waiting timer) taken back to the level before 0006 and migrated
again keeps every round, due time and budget exactly, answers the same instance, and the runtime goes on."""

from __future__ import annotations

from procedures import installer
from tests.sql.test_polls import INTERVAL, answer, poll_flow, started
from tests.support.db import roll_back_migration


def _rounds(world) -> list[dict]:
    return world.db.rows("SELECT id, instance_id, activation_id, round_no, task_id, outcome, result FROM "
                         "weave_poll_rounds ORDER BY id")


def test_R17_migration_0006_keeps_rounds_in_flight_and_the_runtime_continues(world, orch, database):
    world.publish(poll_flow())
    wf = started(world, orch)
    answer(world, "PENDING")
    orch.drain()
    world.db.advance(INTERVAL)
    orch.drain()  # round 2 in flight
    before = {"rounds": _rounds(world), "instance": world.instance(wf),
              "checkpoints": world.db.rows("SELECT id, due_at, available_at, attempts FROM weave_pending_advances "
                                           "ORDER BY id"),
              "states": world.db.rows("SELECT activation_id, state, rounds_used, current_task_id, next_poll_at "
                                      "FROM weave_poll_states ORDER BY activation_id")}
    assert [r["round_no"] for r in before["rounds"]] == [1, 2]

    roll_back_migration(database, "0006.round-instance-index")
    keys = {r["k"] for r in world.db.rows("SELECT INDEX_NAME AS k FROM information_schema.STATISTICS WHERE "
                                          "TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'weave_poll_rounds'")}
    assert "ix_round_instance" not in keys  # the previous level

    assert installer.migrate(database, test_clock=True).migrations_applied == ["0006.round-instance-index"]
    assert _rounds(world) == before["rounds"]
    assert world.instance(wf) == before["instance"]
    assert world.db.rows("SELECT id, due_at, available_at, attempts FROM weave_pending_advances ORDER BY id") == \
        before["checkpoints"]

    # The runtime continues from the preserved rows: round 2 answers DONE and the step settles.
    answer(world, "DONE")
    orch.drain()
    assert world.instance(wf)["status"] == "SUCCEEDED"
    assert [r["number"] for r in world.step(wf, "check")["poll"]["rounds"]] == [1, 2]
