"""R-17 upgrade test for migration 0013 (the counters of /metrics kept in sums apart from their rows): a database with
timers settled, signals consumed, rejected and pending, and poll rounds decided and in flight, taken back to the
level before 0013 and migrated again, keeps every row, dates its decided rounds, and /metrics answers exactly the
figures the rows give, before the first fold and after it."""

from __future__ import annotations

import datetime as dt

from procedures import installer, routines
from tests.sql.test_metrics_fold import LATER, SIGNAL, TIMER, counted, folded_until, some_of_everything
from tests.sql.test_polls import poll_flow
from tests.support.db import roll_back_migration

MIGRATION = "0013.metrics-rollup"


def test_R17_migration_0013_counts_the_history_kept_before_it(world, orch, database):
    for flow in (TIMER, SIGNAL, LATER, poll_flow()):
        world.publish(flow)
    some_of_everything(world, orch, "a")
    expected = counted(world.db)
    before = {t: world.db.rows(f"SELECT * FROM {t} ORDER BY id") for t in ("weave_waits", "weave_signals")}

    roll_back_migration(database, MIGRATION)
    tables = {r["t"] for r in world.db.rows("SELECT TABLE_NAME AS t FROM information_schema.TABLES "
                                            "WHERE TABLE_SCHEMA = DATABASE()")}
    assert "weave_metric_folds" not in tables  # the previous level
    assert installer.migrate(database, test_clock=True).migrations_applied == [MIGRATION]
    assert {t: world.db.rows(f"SELECT * FROM {t} ORDER BY id") for t in before} == before
    assert world.db.rows("SELECT outcome FROM weave_poll_rounds WHERE decided_at IS NULL") == [
        {"outcome": "IN_FLIGHT"}]  # every decided round dated, from its answer's time
    assert routines.engine_metrics(world.db.conn) == expected  # the first fold: nothing past the horizon yet
    world.db.advance(180_000)
    assert routines.engine_metrics(world.db.conn) == expected
    assert folded_until(world.db) > world.db.now() - dt.timedelta(minutes=3)
    assert world.db.scalar("SELECT SUM(rounds) FROM weave_metric_rounds") == 2
