"""R-17 upgrade test for migration 0020 (a round keeps its result's size): a database with a poll whose rounds hold
large results, taken back to level 19 and migrated again, keeps every round as it was; the rounds that ended before
have no kept size and are measured as before, those that end after keep theirs, and a page of them is cut at 8 MiB
by both alike."""

from __future__ import annotations

import pytest

from procedures import installer, invariants
from tests.sql.test_polls import INTERVAL, poll_flow, started
from tests.sql.test_step_rounds import answer_rounds, round_pages
from tests.support.db import roll_back_migration

MIGRATION = "0020.round-result-bytes"
def sizes(world) -> list[tuple]:
    return [(r["round_no"], r["result_bytes"], r["measured"]) for r in world.db.rows(
        "SELECT round_no, result_bytes, OCTET_LENGTH(result) AS measured FROM weave_poll_rounds ORDER BY round_no")]


def test_R17_migration_0020_keeps_every_round_and_cuts_pages_by_kept_and_measured_sizes_alike(world, orch, database):
    world.publish(poll_flow(max_rounds=20))
    wf = started(world, orch)
    answer_rounds(world, orch, 1, 6)
    assert all(kept == measured for _, kept, measured in sizes(world))  # written with each result
    roll_back_migration(database, MIGRATION)
    kept = world.db.rows("SELECT * FROM weave_poll_rounds ORDER BY id")
    assert installer.migrate(database, test_clock=True).migrations_applied == [MIGRATION]
    assert [{k: v for k, v in r.items() if k != "result_bytes"}
            for r in world.db.rows("SELECT * FROM weave_poll_rounds ORDER BY id")] == kept
    assert [kept for _, kept, _ in sizes(world)] == [None] * 6  # ended before level 20

    answer_rounds(world, orch, 7, 12)  # after: their sizes kept
    assert [(n, kept is not None) for n, kept, _ in sizes(world)] == [(n, n >= 7) for n in range(1, 13)]
    assert round_pages(world, wf) == [list(range(1, 11)), [11, 12]]  # 9 results: 8,100 KiB; the 10th passes 8 MiB


@pytest.mark.breaks_invariants("M-4.19b")
def test_M4_19b_a_round_s_kept_result_size_is_its_result_s_size(world, orch):
    """A kept size that is not its result's would cut a page of rounds past 8 MiB, or short of it."""
    world.publish(poll_flow(max_rounds=20))
    started(world, orch)
    answer_rounds(world, orch, 1, 2)
    world.db.advance(INTERVAL)
    orch.drain()  # round 3 started: in flight, no result yet
    conn = world.db.conn
    assert "M-4.19b" not in invariants.violations(conn)
    world.db.execute("UPDATE weave_poll_rounds SET result_bytes = result_bytes - 1 WHERE round_no = 1")
    world.db.execute("UPDATE weave_poll_rounds SET result_bytes = 7 WHERE result IS NULL")  # the round in flight
    assert len(invariants.violations(conn)["M-4.19b"]) == 2
