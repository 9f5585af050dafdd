"""Statement counts per decision and per lifecycle (see tests/benchmarks/statements.py for how they are
counted). Deterministic, so they are the guide while tuning: CPU on the database tracks them.

    python -m tests.benchmarks.bench_statements

Prints one JSON line per decision and per lifecycle (TIMER flow, SIGNAL flow, one POLL round), one line per
lifecycle with its routine calls in order and the statements of each (and how many of all its statements are
nested CALLs), then the statements an idle orchestrator and worker spend per second. A decision's ``calls`` are
the procedure calls among its statements, its own CALL included.
"""

from __future__ import annotations

import argparse

from tests.benchmarks.common import check_invariants, figure, fresh_database
from tests.benchmarks.statements import POLL_ROUNDS, Census, Stage, decisions, idle_rate, lifecycle_calls

TARGETS = {"timer": 50, "signal": 80, "poll": 50}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "),
                                     epilog="The database is WEAVE_BENCH_DSN's server, in a database of its own "
                                            "(<its name>_statements), made anew for each run.")
    parser.parse_args()
    dsn = fresh_database("weave_bench_statements")
    with Census() as census:
        stage = Stage(dsn, census)
        try:
            for name, counts in decisions(stage).items():
                figure("statements per decision", decision=name, **counts)
            for kind in ("timer", "signal", "poll"):
                spent = stage.lifecycle(kind)
                per = spent / POLL_ROUNDS if kind == "poll" else spent
                figure("statements per lifecycle", flow=kind, unit="round" if kind == "poll" else "lifecycle",
                       statements=round(per, 1), target=TARGETS[kind])
            for kind in ("timer", "signal", "poll"):  # where each lifecycle's statements go, call by call
                calls = lifecycle_calls(stage, kind)
                figure("statements per lifecycle, by call", flow=kind, total=sum(n for _, n, _ in calls),
                       nested_calls=sum(c - 1 for _, _, c in calls),
                       calls=[f"{routine} {n}" for routine, n, _ in calls])
        finally:
            stage.close()
    check_invariants(dsn)
    figure("idle statements per second", orchestrators=1, workers=1, statements_per_s=round(idle_rate(dsn), 1),
           target=100)


if __name__ == "__main__":
    main()
