"""A DBA's KILL QUERY on the engine's sessions while they decide: whatever statement it lands on, the decision is
whole or not at all. The invariants that run after each test (M-4.20 above all: a RUNNING instance has something due
or someone to wait for) catch a decision committed half."""

from __future__ import annotations

import threading

from procedures import db as dbmod
from procedures import errors, routines

FLOW = {"name": "two-timers", "steps": [{"key": "first", "type": "TIMER", "delay_ms": 1_000},
                                        {"key": "second", "type": "TIMER", "delay_ms": 1_000, "after": ["first"]}]}
# The statement the kills aim at: the walk's read of its instance (_weave_root_advance), which every start and every
# settlement makes. A kill that lands while the server reads the instance row as a constant could end that read with
# no row and no error, and the start committed an instance whose first step never activated.
TARGET = "SELECT i.status, i.control, i.gate%"


def test_R1_starts_and_settlements_killed_in_their_walk_are_whole_or_not_at_all(world, orch):
    world.publish(FLOW)
    deciding, killer = world.db.connect(), world.db.connect()
    target = deciding.thread_id()
    stop, kills = threading.Event(), [0]

    def kill() -> None:
        with killer.cursor() as cur:
            while not stop.is_set():
                cur.execute("SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST WHERE ID = %s AND INFO LIKE %s",
                            (target, TARGET))
                if cur.fetchone()["n"]:
                    cur.execute(f"KILL QUERY {target}")
                    kills[0] += 1

    def until_done(call) -> object:  # an interrupted decision did nothing: it is made again
        for _ in range(200):
            try:
                return call()
            except errors.TransientDatabaseError:
                continue
        raise AssertionError("a decision was interrupted 200 times in a row")

    thread = threading.Thread(target=kill, daemon=True)
    thread.start()
    try:
        started = [until_done(lambda n=n: routines.instance_start(
            deciding, world.token, world.namespace, definition="two-timers", app=world.app, input_json="{}",
            idempotency_key=f"k-{n}", deadline_ms=3_600_000)["workflow_id"]) for n in range(300)]
        world.db.advance(1_000)
        due = world.db.rows("SELECT id FROM weave_pending_advances WHERE available_at <= %s", world.db.now())
        for row in due:  # the first timers' settlements, each walking to the second timer, on the same session
            until_done(lambda cp=row["id"]: dbmod.call(deciding, "weave_checkpoint_advance", cp))
    finally:
        stop.set()
        thread.join(10)
        killer.close()
        deciding.close()
    assert kills[0] > 0 and len(set(started)) == 300
    for wf in started:
        steps = {s["key"]: s["status"] for s in world.instance(wf)["steps"]}
        assert steps == {"first": "SUCCEEDED", "second": "ACTIVE"}, (wf, steps, world.instance(wf)["review_reasons"])

