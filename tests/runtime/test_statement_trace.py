"""The statement trace (tests/benchmarks/trace_statements.py) sees every statement a lifecycle runs: the same
calls, each with as many statements as the database's own counters give it. Only its completeness is checked;
its times are never asserted. The trace starts a private server from the binary on PATH, as the kill tests do."""

from __future__ import annotations

from tests.benchmarks.statements import Census, Stage, lifecycle_calls
from tests.benchmarks.trace_statements import calls, own_times, traced


def test_a_trace_holds_every_statement_the_counters_count(database):
    with Census() as census:
        stage = Stage(database, census)
        try:
            counted = [(f"CALL {routine}", n) for routine, n, _ in lifecycle_calls(stage, "timer")]
        finally:
            stage.close()
    steps = traced("timer", 2)
    assert [(call, n) for call, _, n in calls(steps)] == counted
    assert all(len(step.times) == 2 and min(step.times) > 0 for step in steps)
    own = own_times(steps)
    assert [o is not None for o in own] == [step.text.startswith("CALL ") for step in steps]
