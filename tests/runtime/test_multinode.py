"""R-13: any number of orchestrators against one database produce exactly the effects of one."""

from __future__ import annotations

from orchestrator.loop import Orchestrator
from tests.support.load import start_many
from tests.support.threads import run_threads

TIMERS = 2_000


def test_R13_three_orchestrators_settle_2000_due_timers_exactly_once(world, database):
    world.publish({"name": "storm", "steps": [{"key": "t", "type": "TIMER", "delay_ms": 60_000}]})
    start_many(world, "storm", TIMERS)
    nodes = [Orchestrator(database, concurrency=2, node_id=f"node-{i}") for i in range(3)]
    try:
        _run_all(nodes)  # activations
        assert world.db.scalar("SELECT COUNT(*) FROM weave_waits WHERE status = 'WAITING'") == TIMERS
        dues = {r["id"]: r["due_at"] for r in world.db.rows("SELECT id, due_at FROM weave_waits")}
        world.db.advance(60_001)
        _run_all(nodes)  # the storm
    finally:
        for n in nodes:
            n.close()
    db = world.db
    assert db.scalar("SELECT COUNT(*) FROM weave_waits WHERE status = 'SATISFIED'") == TIMERS
    assert db.scalar("SELECT COUNT(*) FROM weave_events WHERE type = 'TIMER_SETTLED'") == TIMERS
    assert db.scalar("SELECT COUNT(*) FROM weave_audit WHERE action = 'timer.settle'") == TIMERS
    assert db.scalar("SELECT COUNT(*) FROM weave_instances WHERE status = 'SUCCEEDED'") == TIMERS
    per_instance = db.rows("SELECT instance_id, COUNT(*) AS n FROM weave_events GROUP BY instance_id HAVING n <> 4")
    assert per_instance == []  # started, activated, settled, succeeded: nothing twice
    assert {r["id"]: r["due_at"] for r in db.rows("SELECT id, due_at FROM weave_waits")} == dues
    settled = sum(n.stats["CHECKPOINT:SETTLED"] for n in nodes)
    assert settled == TIMERS
    assert all(n.stats["CHECKPOINT:SETTLED"] > 0 for n in nodes), "every node took part"


def _run_all(nodes: list[Orchestrator]) -> None:
    """Every node drains at once; a node's failure is raised here."""
    run_threads(lambda i: nodes[i].drain(), len(nodes))
