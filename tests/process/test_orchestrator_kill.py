"""Real orchestrator processes killed with -9 mid-storm: every timer still settles exactly once, with
its original due time (Q-2, T-6, R-13)."""

from __future__ import annotations

from procedures import invariants
from tests.support.load import start_many
from tests.support.processes import WeaveProcess
from tests.support.waiting import wait_for

TIMERS = 1_500


def orchestrator(database, log) -> WeaveProcess:
    return WeaveProcess(database, "orchestrator", "--concurrency", "2", log=log)


def settled(db) -> int:
    return db.scalar("SELECT COUNT(*) FROM weave_waits WHERE status = 'SATISFIED'")


def test_T6_kill_9_every_orchestrator_mid_storm_and_restart(world, database, tmp_path):
    world.publish({"name": "storm", "steps": [{"key": "t", "type": "TIMER", "delay_ms": 30_000}]})
    start_many(world, "storm", TIMERS)
    first = [orchestrator(database, tmp_path / f"a{i}.log") for i in range(2)]
    try:
        assert wait_for(lambda: world.db.scalar("SELECT COUNT(*) FROM weave_waits") == TIMERS, timeout=60)
        dues = {r["id"]: r["due_at"] for r in world.db.rows("SELECT id, due_at FROM weave_waits")}
        world.db.advance(30_001)
        assert wait_for(lambda: settled(world.db) >= 100, timeout=60)
        for p in first:
            p.kill9()
        partial = settled(world.db)
        assert partial < TIMERS, "the storm finished before the kill; raise TIMERS"
        invariants.check(world.db.conn)  # nothing partial after kill -9
        world.db.advance(3_600_000)  # every process stayed down for an hour
    finally:
        for p in first:
            p.close()
    second = [orchestrator(database, tmp_path / f"b{i}.log") for i in range(2)]
    try:
        assert wait_for(lambda: settled(world.db) == TIMERS, timeout=90)
        for p in second:
            assert p.terminate() == 0  # clean stop on SIGTERM
    finally:
        for p in second:
            p.close()
    db = world.db
    assert {r["id"]: r["due_at"] for r in db.rows("SELECT id, due_at FROM weave_waits")} == dues
    assert db.scalar("SELECT COUNT(*) FROM weave_events WHERE type = 'TIMER_SETTLED'") == TIMERS
    assert db.scalar("SELECT COUNT(*) FROM weave_instances WHERE status = 'SUCCEEDED'") == TIMERS
    late = db.rows("SELECT e.data FROM weave_events e WHERE e.type = 'TIMER_SETTLED' "
                   "AND CAST(JSON_VALUE(e.data, '$.lateness_ms') AS DECIMAL(20,3)) > 3000000 LIMIT 1")
    assert late, "timers settled after the outage report their lateness against the original due time"


def test_R16_orchestrator_refuses_to_start_against_another_level(world, database, tmp_path):
    world.db.execute("UPDATE weave_routines SET digest = REPEAT('0', 64) WHERE name = 'weave_scan'")
    proc = WeaveProcess(database, "orchestrator", log=tmp_path / "o.log")
    try:
        assert proc.proc.wait(30) == 1
        out = (tmp_path / "o.log").read_text()
        assert "SCHEMA_MISMATCH" in out and "weave migrate" in out
    finally:
        proc.close()
        from procedures import installer

        installer.migrate(database, test_clock=True)
