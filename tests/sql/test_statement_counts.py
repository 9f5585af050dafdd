"""Statements per decision and per lifecycle, counted by the database itself (tests/benchmarks/statements.py).

Statement counts are deterministic, unlike timings, and database CPU tracks them; these ceilings keep a change
from quietly making a decision or a lifecycle more expensive. When a change makes one cheaper, lower its ceiling
here in the same commit (docs/benchmarks.md records the history).
"""

from __future__ import annotations

import pytest

from tests.benchmarks.statements import POLL_ROUNDS, Census, Stage, decisions

# Per decision: the ceiling on its statements.
DECISIONS = {
    "root activate (TIMER)": 41,
    "timer settle": 43,
    "timer settle, 10 in one call (each)": 40.4,
    "signal checkpoint before its deadline": 18,
    "signal send (settles the open wait)": 68,
    "signal settle (candidate path)": 51,
    "signal twin candidate": 10,
    "root activate (POLL, round 1)": 52,
    "task claim": 16,
    "attempt complete": 21,
    "inbox consume (round pending)": 42,
    "poll round start": 45,
    "scan (nothing due)": 5,
    "idle probe": 4,
    "task claim (nothing queued)": 4,
}
# All in, from the start request to SUCCEEDED (per round for the POLL flow).
LIFECYCLES = {"timer": 152, "signal": 166, "poll": 181}


@pytest.fixture
def stage(db, database):
    with Census() as census:
        stage = Stage(database, census)
        yield stage
        stage.close()


def test_statements_per_decision_stay_within_their_ceilings(stage):
    counts = decisions(stage)
    assert sorted(counts) == sorted(DECISIONS)
    over = {name: (c["statements"], DECISIONS[name]) for name, c in counts.items()
            if c["statements"] > DECISIONS[name]}
    assert over == {}, "statements (now, ceiling)"


@pytest.mark.parametrize("kind", sorted(LIFECYCLES))
def test_statements_per_lifecycle_stay_within_their_ceilings(stage, kind):
    spent = stage.lifecycle(kind)
    per = spent / POLL_ROUNDS if kind == "poll" else spent
    assert per <= LIFECYCLES[kind]
