"""A DBA's KILL QUERY on the engine's sessions while they decide: whatever statement it lands on, the decision is
whole or not at all. MariaDB gives a subquery of a select list no value when a kill lands in it (NULL, or 0 for an
EXISTS), raises nothing and forgets the kill; the engine's reads that such a kill can empty say so and undo the
decision. The invariants that run after each test (M-4.20 above all: a RUNNING instance has something due or
someone to wait for) catch a decision committed half."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

from procedures import db as dbmod
from procedures import errors, routines
from tests.support.signals import send, signal_flow

FLOW = {"name": "two-timers", "steps": [{"key": "first", "type": "TIMER", "delay_ms": 1_000},
                                        {"key": "second", "type": "TIMER", "delay_ms": 1_000, "after": ["first"]}]}
# The walk's read of its instance (_weave_root_advance), which every start and every settlement makes.
WALK = "SELECT i.status, i.control, i.gate%"
SUBQUERY = "%(SELECT%"  # any statement with a subquery: the kind a kill can empty


class Session:
    """The deciding session: the same connection, or the one opened after the engine closed it (one it could not
    roll back after an interrupt)."""

    def __init__(self, world) -> None:
        self.world, self.conn = world, world.db.connect()

    def get(self) -> Any:
        if not dbmod.usable(self.conn):
            self.conn = self.world.db.connect()
        return self.conn

    def close(self) -> None:
        self.conn.close()


@contextlib.contextmanager
def killing(world, target: Session, pattern: str, every: int = 1) -> Iterator[list[int]]:
    """KILL QUERY on the session of ``target``'s connection when it runs a statement like ``pattern`` (each
    ``every``-th time it is seen so: a decision of many such statements must be let through now and then), for the
    block; yields the count of kills sent. A connection the engine closed (one it could not roll back) is followed
    to the one opened after it."""
    killer, stop, kills, seen = world.db.connect(), threading.Event(), [0], [0]

    def kill() -> None:
        with killer.cursor() as cur:
            while not stop.is_set():
                thread_id = target.conn.thread_id()
                cur.execute("SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST WHERE ID = %s AND INFO LIKE %s",
                            (thread_id, pattern))
                if cur.fetchone()["n"]:
                    seen[0] += 1
                    if seen[0] % every == 0:
                        cur.execute(f"KILL QUERY {thread_id}")
                        kills[0] += 1
                        # One kill a call: the next only once the session has answered this one (back to Sleep), as
                        # a person's kills come; two kills racing within one call are another test.
                        while not stop.is_set():
                            cur.execute("SELECT COMMAND FROM information_schema.PROCESSLIST WHERE ID = %s",
                                        (thread_id,))
                            row = cur.fetchone()
                            if row is None or row["COMMAND"] == "Sleep":
                                break

    thread = threading.Thread(target=kill, daemon=True)
    thread.start()
    try:
        yield kills
    finally:
        stop.set()
        thread.join(10)
        killer.close()


def until_done(call: Callable[[], Any]) -> Any:
    """An interrupted decision did nothing (or its answer was lost: a call with a key answers its first outcome): it
    is made again."""
    for _ in range(200):
        try:
            return call()
        except errors.TransientDatabaseError:
            continue
    raise AssertionError("a decision was interrupted 200 times in a row")


def started_two_timers(world, deciding: Session) -> list[str]:
    """300 instances of the two timers, started on the deciding session."""
    return [until_done(lambda n=n: routines.instance_start(
        deciding.get(), world.token, world.namespace, definition="two-timers", app=world.app, input_json="{}",
        idempotency_key=f"k-{n}", deadline_ms=3_600_000)["workflow_id"]) for n in range(300)]


def settle_due_timers(world, deciding: Session) -> None:
    """A second on, every timer then due settled on the deciding session."""
    world.db.advance(1_000)
    due = world.db.rows("SELECT id FROM weave_pending_advances WHERE available_at <= %s", world.db.now())
    for row in due:
        until_done(lambda cp=row["id"]: dbmod.call(deciding.get(), "weave_checkpoint_advance", cp))

def test_R1_starts_and_settlements_killed_in_their_walk_are_whole_or_not_at_all(world, orch):
    world.publish(FLOW)
    deciding = Session(world)
    try:
        with killing(world, deciding, WALK) as kills:
            started = started_two_timers(world, deciding)
            settle_due_timers(world, deciding)  # the first timers', each walking to the second timer
    finally:
        deciding.close()
    assert kills[0] > 0 and len(set(started)) == 300
    for wf in started:
        steps = {s["key"]: s["status"] for s in world.instance(wf)["steps"]}
        assert steps == {"first": "SUCCEEDED", "second": "ACTIVE"}, (wf, steps, world.instance(wf)["review_reasons"])



def test_R1_settlements_that_end_their_instance_killed_in_their_walk_are_whole_or_not_at_all(world, orch):
    """A kill that lands in a DELETE ends its scan early, with no error and no warning: the walk's delete of the
    ended instance's checkpoints removed nothing, and the settlement committed with a checkpoint left behind
    (M-4.18). The walk counts what its deletes must remove, and a delete that came back short undoes it."""
    world.publish(FLOW)
    deciding = Session(world)
    try:
        with killing(world, deciding, WALK) as kills:
            started = started_two_timers(world, deciding)
            for _ in range(2):  # the first timers' settlements, then the second ones', each ending its instance
                settle_due_timers(world, deciding)
    finally:
        deciding.close()
    assert kills[0] > 0
    assert {world.instance(wf)["status"] for wf in started} == {"SUCCEEDED"}
    assert world.db.scalar("SELECT COUNT(*) FROM weave_pending_advances") == 0

def test_R1_signals_and_task_creations_killed_in_their_reads_are_whole_or_not_at_all(world, orch):
    """Kills aimed at every statement with a subquery while early signals are sent (a wrong one first, which must be
    refused: a send whose read of its step was emptied stored it with its contract unchecked) and while instances
    whose first step is a task start (their room and their task's queue are read that way)."""
    world.publish(signal_flow("early", before_timer_ms=1_000))
    world.publish({"name": "pay", "steps": [{"key": "work", "type": "TASK", "queue": world.queue,
                                             "handler": "example.echo", "handler_version": "1", "input": {}}]})
    early = [world.start("early", {"order_id": f"o-{n}"}) for n in range(100)]
    deciding = Session(world)
    refused = 0
    try:
        with killing(world, deciding, SUBQUERY, every=4) as kills:
            for n, wf in enumerate(early):
                try:
                    until_done(lambda wf=wf, n=n: send(world, wf, f"wrong-{n}", conn=deciding.get(),
                                                       correlation_key=f"o-{n}", name="approval.other"))
                except errors.ValidationFailed:
                    refused += 1
                until_done(lambda wf=wf, n=n: send(world, wf, f"right-{n}", conn=deciding.get(),
                                                   correlation_key=f"o-{n}"))
            paying = [until_done(lambda n=n: routines.instance_start(
                deciding.get(), world.token, world.namespace, definition="pay", app=world.app, input_json="{}",
                idempotency_key=f"p-{n}", deadline_ms=3_600_000)["workflow_id"]) for n in range(150)]
    finally:
        deciding.close()
    assert kills[0] > 0 and refused == 100
    world.db.advance(1_000)
    orch.drain()
    for wf in early:
        instance = world.instance(wf)
        assert instance["status"] == "SUCCEEDED", (wf, instance["review_reasons"])
    for wf in paying:
        tasks = world.db.rows("SELECT status FROM pulse_tasks WHERE instance_id = %s", world.internal_id(wf))
        assert [t["status"] for t in tasks] == ["QUEUED"], (wf, tasks)
