"""Statements per decision and per lifecycle, counted by the database itself (tests/benchmarks/statements.py).

Statement counts are deterministic, unlike timings, and database CPU tracks them; these ceilings keep a change
from quietly making a decision or a lifecycle more expensive. When a change makes one cheaper, lower its ceiling
here in the same commit (docs/benchmarks-history.md records how each count moved).
"""

from __future__ import annotations

import pytest

from tests.benchmarks.statements import POLL_ROUNDS, Census, Stage, decisions

# Per decision: the ceiling on its statements.
DECISIONS = {
    "start (TIMER, activated by the start)": 29,
    "timer settle": 17,
    "timer settle, its successor activated": 26,
    "timer settle, three successors activated": 45,
    "timer settle, 10 in one call (each)": 16.2,
    "start (SIGNAL, activated by the start)": 31,
    "signal checkpoint before its deadline": 9,
    "signal send (settles the open wait)": 29,
    "signal send (early: accepted, stored PENDING)": 18,
    "retry (the instance's own failing decision)": 44,
    "retry (a step's failing signal: the step goes on)": 55,
    "signal settle (candidate path)": 25,
    "signal twin candidate": 6,
    "start (POLL, round 1 created by the start)": 38,
    "task claim": 10,
    "attempt complete (consumes the round's answer)": 27,
    "poll round start": 26,
    "instance get": 15,
    "attempt complete (instance held: answer left in the inbox)": 16,
    "inbox consume (round pending)": 20,
    "inbox consume, 3 in one call (each)": 18.7,
    "attempt heartbeat": 8,
    "attempt fail (retry scheduled)": 12,
    "pause": 31,
    "resume": 35,
    "deadline (extended)": 35,
    "cancel": 50,
    "scan (nothing due)": 4,
    "idle probe": 2,
    "task claim (nothing queued)": 3,
}
# All in, from the start request to SUCCEEDED (per round for the POLL flow).
LIFECYCLES = {"timer": 50, "signal": 64, "poll": 74.7}
# How far under its ceiling a count may fall before the ceiling counts as stale.
SLACK = 0.9


def _off(count: float, ceiling: float) -> bool:
    return not SLACK * ceiling <= count <= ceiling


@pytest.fixture
def stage(db, database):
    with Census() as census:
        stage = Stage(database, census)
        yield stage
        stage.close()


def test_statements_per_decision_stay_at_their_recorded_counts(stage):
    counts = decisions(stage)
    assert sorted(counts) == sorted(DECISIONS)
    off = {name: (c["statements"], DECISIONS[name]) for name, c in counts.items()
           if _off(c["statements"], DECISIONS[name])}
    assert off == {}, f"statements (now, ceiling): above the ceiling, or under {SLACK:.0%} of it"


def test_no_decision_needs_a_temporary_table_on_disk_even_on_small_tables(stage):
    """On tables of a few rows (a new installation, a queue-only workload with no waits) the optimizer prefers a
    scan through a join buffer to a keyed lookup; where that broke the order a read relied on, the rows were
    sorted again in a temporary table, on disk because they carry a JSON column: a file created and removed per
    start, instance read and claim. The tests' tables are that small, so each call here is checked as it runs."""
    counts = decisions(stage)
    assert {name: c["disk_tables"] for name, c in counts.items() if c["disk_tables"]} == {}


@pytest.mark.parametrize("kind", sorted(LIFECYCLES))
def test_statements_per_lifecycle_stay_at_their_recorded_counts(stage, kind):
    spent = stage.lifecycle(kind)
    per = spent / POLL_ROUNDS if kind == "poll" else spent
    assert not _off(per, LIFECYCLES[kind]), (per, LIFECYCLES[kind])
