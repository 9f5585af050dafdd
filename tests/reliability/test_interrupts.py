"""A DBA's KILL QUERY on the engine's sessions while they decide: whatever statement it lands on, the decision is whole
or not at all. MariaDB gives a subquery of a select list no value when a kill lands in it (NULL, or 0 for an EXISTS),
raises nothing and forgets the kill; the engine's reads that such a kill can empty say so and undo the decision.
Kills aimed at the writes (every INSERT, UPDATE and DELETE of a start, a pause, a resume, a deadline, a cancel, a
reactivation, a resolution, a continued poll, an instance's retry, a send, a signal's settlement, a poll round's
report, consumption and next round, a lost lease's recovery, a task's expiry, a heartbeat, a failure that schedules a
retry; a retention window; an app, queue, credential, definition or console session written) must leave each decision
whole too, and so must kills aimed at any of their statements. The invariants that run after each test (M-4.20 above
all: a RUNNING instance has something due or someone to wait for) catch a decision committed half."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from procedures import db as dbmod
from procedures import errors, invariants, pulse, routines, signals
from tests.support.signals import send, signal_flow

FLOW = {"name": "two-timers", "steps": [{"key": "first", "type": "TIMER", "delay_ms": 1_000},
                                        {"key": "second", "type": "TIMER", "delay_ms": 1_000, "after": ["first"]}]}
POLL = {"name": "polling", "steps": [
    {"key": "check", "type": "POLL", "queue": "payments", "handler": "example.poll", "handler_version": "1",
     "input": {}, "interval_ms": 1_000, "max_rounds": 3, "timeout_ms": 3_600_000, "task_timeout_ms": 600_000,
     "result": {"pending": ["PENDING"], "success": ["DONE"]}},
    {"key": "after", "type": "TIMER", "delay_ms": 1_000, "after": ["check"]}]}


def task_flow(name: str, **fields: Any) -> dict:
    """A definition of one TASK step `work` on the scenario's queue (the world's, `payments`), with ``fields``."""
    return {"name": name, "steps": [{"key": "work", "type": "TASK", "queue": "payments", "handler": "example.echo",
                                     "handler_version": "1", "input": {}, **fields}]}


# What a kill is aimed at, as a regular expression over the statement a session runs (its routine's statement).
# The walk's read of its instance (_weave_root_advance), which every start and every settlement makes.
WALK = r"^SELECT i\.status, i\.control, i\.gate"
SUBQUERY = r"\(SELECT"  # any statement with a subquery: the kind a kill can empty
WRITES = "^(INSERT|UPDATE|DELETE)"
ANY = "."  # every statement: reads, writes, calls, savepoints, commits
# The decisions below are killed in their writes, where a kill must undo what was written, and in any statement.
TARGETS = pytest.mark.parametrize("target", [WRITES, ANY], ids=["writes", "any"])


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
    """KILL QUERY on the session of ``target``'s connection when it runs a statement that ``pattern`` matches (each
    ``every``-th time it is seen so: a decision of many such statements must be let through now and then), for the
    block; yields the count of kills sent. A connection the engine closed (one it could not roll back) is followed
    to the one opened after it."""
    killer, stop, kills, seen = world.db.connect(), threading.Event(), [0], [0]

    def kill() -> None:
        with killer.cursor() as cur:
            while not stop.is_set():
                thread_id = target.conn.thread_id()
                cur.execute("SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST WHERE ID = %s AND INFO RLIKE %s",
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


@contextlib.contextmanager
def deciding_killed(world, pattern: str, every: int = 1) -> Iterator[tuple[Session, list[int]]]:
    """A deciding session for the block, its statements that ``pattern`` matches killed as ``killing`` kills them;
    yields the session and the count of kills sent. The session is closed after the block, whatever happened."""
    deciding = Session(world)
    try:
        with killing(world, deciding, pattern, every) as kills:
            yield deciding, kills
    finally:
        deciding.close()


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


def decide_due(world, deciding: Session) -> None:
    """Every decision due (checkpoints, signal candidates, answers waiting in the inbox) made on the deciding session,
    until none is left: what the orchestrator would do, on the session the kills are aimed at. The invariants are
    checked before each pass, so that what a decision committed half is seen before a later pass serves it again."""
    for _ in range(50):
        invariants.check(world.db.conn)
        now = world.db.now()
        due = world.db.rows("SELECT id FROM weave_pending_advances WHERE available_at <= %s", now)
        waiting = world.db.rows("SELECT id FROM weave_signals WHERE status = 'PENDING' AND available_at <= %s", now)
        answers = world.db.rows("SELECT id FROM pulse_inbox WHERE state = 'PENDING' AND available_at <= %s", now)
        if not due and not waiting and not answers:
            return
        for row in answers:
            until_done(lambda i=row["id"]: pulse.inbox_consume(deciding.get(), i))
        for row in waiting:
            until_done(lambda sig=row["id"]: signals.process(deciding.get(), sig))
        for row in due:
            until_done(lambda cp=row["id"]: dbmod.call(deciding.get(), "weave_checkpoint_advance", cp))
    raise AssertionError("decisions still due after 50 passes")


def settle_due_timers(world, deciding: Session) -> None:
    """A second on, every timer then due settled on the deciding session, in one pass: a checkpoint that a settlement
    left behind stays for the test to find (decide_due would serve it again)."""
    world.db.advance(1_000)
    due = world.db.rows("SELECT id FROM weave_pending_advances WHERE available_at <= %s", world.db.now())
    for row in due:
        until_done(lambda cp=row["id"]: dbmod.call(deciding.get(), "weave_checkpoint_advance", cp))


def test_R1_starts_and_settlements_killed_in_their_walk_are_whole_or_not_at_all(world, orch):
    world.publish(FLOW)
    with deciding_killed(world, WALK) as (deciding, kills):
        started = started_two_timers(world, deciding)
        settle_due_timers(world, deciding)  # the first timers', each walking to the second timer
    assert kills[0] > 0 and len(set(started)) == 300
    for wf in started:
        steps = {s["key"]: s["status"] for s in world.instance(wf)["steps"]}
        assert steps == {"first": "SUCCEEDED", "second": "ACTIVE"}, (wf, steps, world.instance(wf)["review_reasons"])



def test_R1_settlements_that_end_their_instance_killed_in_their_walk_are_whole_or_not_at_all(world, orch):
    """A kill that lands in a DELETE ends its scan early, with no error and no warning: the walk's delete of the
    ended instance's checkpoints removed nothing, and the settlement committed with a checkpoint left behind
    (M-4.18). The walk counts what its deletes must remove, and a delete that came back short undoes it."""
    world.publish(FLOW)
    with deciding_killed(world, WALK) as (deciding, kills):
        started = started_two_timers(world, deciding)
        for _ in range(2):  # the first timers' settlements, then the second ones', each ending its instance
            settle_due_timers(world, deciding)
    assert kills[0] > 0
    assert {world.instance(wf)["status"] for wf in started} == {"SUCCEEDED"}
    assert world.db.scalar("SELECT COUNT(*) FROM weave_pending_advances") == 0

def test_R1_signals_and_task_creations_killed_in_their_reads_are_whole_or_not_at_all(world, orch):
    """Kills aimed at every statement with a subquery while early signals are sent (a wrong one first, which must be
    refused: a send whose read of its step was emptied stored it with its contract unchecked) and while instances
    whose first step is a task start (their room and their task's queue are read that way)."""
    world.publish(signal_flow("early", before_timer_ms=1_000))
    world.publish(task_flow("pay"))
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


@TARGETS
def test_R1_cancels_killed_in_their_statements_are_whole_or_not_at_all(world, orch, target):
    """A cancel writes many rows: the instance, its waits, steps, activations and review reasons, each PENDING signal
    rejected, its checkpoints deleted. Here each instance waits on a timer with two early signals for the step
    after it."""
    world.publish(signal_flow("early", before_timer_ms=60_000))
    started = [world.start("early", {"order_id": f"o-{n}"}) for n in range(60)]
    for n, wf in enumerate(started):
        for twin in ("a", "b"):
            send(world, wf, f"{twin}-{n}", correlation_key=f"o-{n}")
    with deciding_killed(world, target, every=2) as (deciding, kills):
        for n, wf in enumerate(started):
            until_done(lambda wf=wf, n=n: routines.instance_cancel(
                deciding.get(), world.token, world.namespace, wf, "stopped by the desk", f"cancel-{n}"))
    assert kills[0] > 0
    assert {world.instance(wf)["status"] for wf in started} == {"CANCELLED"}
    assert world.db.scalar("SELECT COUNT(*) FROM weave_signals WHERE status = 'PENDING'") == 0
    assert world.db.scalar("SELECT COUNT(*) FROM weave_pending_advances") == 0


@TARGETS
def test_R1_starts_and_operator_actions_killed_in_their_statements_are_whole_or_not_at_all(world, orch, target):
    """Starts, then a pause, a resume and a deadline extension of each instance, every write of them a target (or
    every statement); each is asked again with its key until it answers. Each instance is started once, each action
    is written once (one audit row) and holds, and the instances then run to their end."""
    world.publish(signal_flow("early", before_timer_ms=1_000))
    with deciding_killed(world, target, every=2) as (deciding, kills):
        started = [until_done(lambda n=n: routines.instance_start(
            deciding.get(), world.token, world.namespace, definition="early", app=world.app,
            input_json=f'{{"order_id": "o-{n}"}}', idempotency_key=f"start-{n}",
            deadline_ms=3_600_000)["workflow_id"]) for n in range(50)]
        deadlines = {wf: world.instance(wf)["deadline_at"] for wf in started}
        for n, wf in enumerate(started):
            for action in (routines.instance_pause, routines.instance_resume):
                until_done(lambda wf=wf, n=n, action=action: action(
                    deciding.get(), world.token, world.namespace, wf, "by the desk", f"{action.__name__}-{n}"))
            until_done(lambda wf=wf, n=n: routines.instance_deadline(
                deciding.get(), world.token, world.namespace, wf, "more time", f"deadline-{n}",
                extend_ms=3_600_000))
    assert kills[0] > 0 and len(set(started)) == 50
    audits = world.db.rows("SELECT action, COUNT(*) AS n FROM weave_audit WHERE action LIKE 'instance.%%' "
                           "GROUP BY action")
    assert {row["action"]: row["n"] for row in audits} == {
        "instance.start": 50, "instance.pause": 50, "instance.resume": 50, "instance.deadline": 50}
    for wf in started:
        instance = world.instance(wf)
        assert (instance["status"], instance["control"]) == ("RUNNING", "ACTIVE"), (wf, instance)
        assert instance["deadline_at"] != deadlines[wf], wf
    world.db.advance(1_000)
    orch.drain()
    for n, wf in enumerate(started):
        send(world, wf, f"s-{n}", correlation_key=f"o-{n}")
    assert {world.instance(wf)["status"] for wf in started} == {"SUCCEEDED"}


@TARGETS
def test_R1_signal_settlements_killed_in_their_statements_are_whole_or_not_at_all(world, orch, target):
    """Sends that settle their open wait, and early signals settled as candidates once their step opens (each with a
    twin that the settlement rejects), every write of them a target (or every statement)."""
    world.publish(signal_flow("open"))
    world.publish(signal_flow("early", before_timer_ms=1_000))
    opened = [world.start("open", {"order_id": f"o-{n}"}) for n in range(60)]
    early = [world.start("early", {"order_id": f"e-{n}"}) for n in range(60)]
    for n, wf in enumerate(early):
        for twin in ("a", "b"):
            send(world, wf, f"{twin}-{n}", correlation_key=f"e-{n}")
    world.db.advance(1_000)
    with deciding_killed(world, target, every=2) as (deciding, kills):
        for n, wf in enumerate(opened):
            until_done(lambda wf=wf, n=n: send(world, wf, f"s-{n}", conn=deciding.get(), correlation_key=f"o-{n}"))
        decide_due(world, deciding)  # the timers, the early signals as candidates, sends whose settling failed
    assert kills[0] > 0
    assert {world.instance(wf)["status"] for wf in opened + early} == {"SUCCEEDED"}
    assert world.db.scalar("SELECT COUNT(*) FROM weave_signals WHERE status = 'PENDING'") == 0
    assert world.db.scalar("SELECT COUNT(*) FROM weave_pending_advances") == 0


@TARGETS
def test_R1_recovery_actions_killed_in_their_statements_are_whole_or_not_at_all(world, orch, target):
    """The recovery actions, every write of them a target (or every statement): SIGNAL waits that timed out into
    review, half of them reactivated and then sent their signal, half resolved by hand; polls whose rounds ran out,
    continued for one more round that ends them. Each action is asked again with its key until it answers."""
    world.publish(signal_flow("timing-out", timeout_ms=1_000))
    world.publish({**POLL, "name": "one-round", "steps": [{**POLL["steps"][0], "max_rounds": 1}]})
    waits = [world.start("timing-out", {"order_id": f"o-{n}"}) for n in range(40)]
    polls = [world.start("one-round", {"id": f"p-{n}"}) for n in range(20)]
    for attempt in pulse.task_claim(world.db.conn, "w-1", world.queue, limit=100):
        pulse.attempt_complete(world.db.conn, attempt["attempt_id"], "w-1", {"status": "PENDING"})
    world.db.advance(2_000)
    orch.drain()
    assert {world.instance(wf)["status"] for wf in waits + polls} == {"NEEDS_REVIEW"}
    reactivated, resolved = waits[:20], waits[20:]
    with deciding_killed(world, target, every=2) as (deciding, kills):
        for n, wf in enumerate(reactivated):
            until_done(lambda wf=wf, n=n: routines.step_reactivate(
                deciding.get(), world.token, world.namespace, wf, "approval", "ask again", f"again-{n}",
                timeout_ms=3_600_000))
        for n, wf in enumerate(resolved):
            until_done(lambda wf=wf, n=n: routines.step_resolve(
                deciding.get(), world.token, world.namespace, wf, "approval", "approved by phone", f"hand-{n}",
                output={"approved": True}))
        for n, wf in enumerate(polls):
            until_done(lambda wf=wf, n=n: routines.step_continue(
                deciding.get(), world.token, world.namespace, wf, "check", "one more look", f"more-{n}",
                extra_rounds=1))
        decide_due(world, deciding)  # the continued polls' next rounds
    assert kills[0] > 0
    assert {world.instance(wf)["status"] for wf in reactivated + polls} == {"RUNNING"}
    assert {world.instance(wf)["status"] for wf in resolved} == {"SUCCEEDED"}
    for n, wf in enumerate(reactivated):
        send(world, wf, f"s-{n}", correlation_key=f"o-{n}", target_activation_sequence=2)
    world.db.advance(1_000)
    claimed = pulse.task_claim(world.db.conn, "w-1", world.queue, limit=100)
    assert len(claimed) == len(polls)
    for attempt in claimed:
        pulse.attempt_complete(world.db.conn, attempt["attempt_id"], "w-1", {"status": "DONE"})
    world.db.advance(1_000)
    orch.drain()
    assert {world.instance(wf)["status"] for wf in waits + polls} == {"SUCCEEDED"}


@TARGETS
def test_R1_retries_killed_in_their_statements_are_whole_or_not_at_all(world, orch, target):
    """Instances whose early signal failed a third time the same way (a CANDIDATE_FAILING reason of the instance
    itself), each retried with every write of the retry a target (or every statement), asked again with its key until
    it answers: each reason closed once, by one audited retry, and every instance going on to its end."""
    world.publish(signal_flow("early", before_timer_ms=1_000))
    started = [world.start("early", {"order_id": f"o-{n}"}) for n in range(20)]
    orch.drain()
    for n, wf in enumerate(started):
        send(world, wf, f"s-{n}", correlation_key=f"o-{n}", queued=True)
        for _ in range(3):
            sig = world.db.row("SELECT id, version FROM weave_signals WHERE idempotency_key = %s", f"s-{n}")
            dbmod.call(world.db.conn, "weave_candidate_fail", "SIGNAL", sig["id"], sig["version"], "INVALID_STATE: x")
    assert {world.instance(wf)["status"] for wf in started} == {"NEEDS_REVIEW"}
    with deciding_killed(world, target, every=2) as (deciding, kills):
        for n, wf in enumerate(started):
            until_done(lambda wf=wf, n=n: routines.instance_retry(
                deciding.get(), world.token, world.namespace, wf, "routines reinstalled", f"retry-{n}"))
    assert kills[0] > 0
    assert {world.instance(wf)["status"] for wf in started} == {"RUNNING"}
    assert world.db.scalar("SELECT COUNT(*) FROM weave_audit WHERE action = 'instance.retry'") == len(started)
    assert world.db.rows("SELECT closed_by, COUNT(*) AS n FROM weave_review_reasons GROUP BY closed_by") == [
        {"closed_by": "retry", "n": len(started)}]
    assert world.db.scalar("SELECT COUNT(*) FROM weave_signals WHERE attempts > 0") == 0
    world.db.advance(1_000)
    orch.drain()
    assert {world.instance(wf)["status"] for wf in started} == {"SUCCEEDED"}


@TARGETS
def test_R1_lost_leases_and_expired_tasks_killed_in_their_statements_are_whole_or_not_at_all(world, orch, target):
    """Tasks whose worker's lease ran out, and tasks never claimed before their deadline: their recoveries, expiries
    and the consumptions of those outcomes, every write of them a target (or every statement). Each step then waits
    in review (an unknown or an expired task is never retried by itself) with one task ended once, and is resolved by
    hand."""
    world.publish(task_flow("leased"))
    world.publish(task_flow("expiring", task_timeout_ms=60_000))
    leased = [world.start("leased") for _ in range(30)]
    claimed = pulse.task_claim(world.db.conn, "w-1", world.queue, limit=100, lease_ms=1_000)
    assert len(claimed) == 30
    expiring = [world.start("expiring") for _ in range(30)]
    world.db.advance(61_000)
    with deciding_killed(world, target, every=2) as (deciding, kills):
        for attempt in claimed:
            until_done(lambda a=attempt["attempt_id"]: pulse.lease_recover(deciding.get(), a))
        for row in world.db.rows("SELECT id FROM pulse_tasks WHERE status = 'QUEUED'"):
            until_done(lambda t=row["id"]: pulse.task_expire(deciding.get(), t))
        decide_due(world, deciding)  # the outcomes consumed from the inbox
    assert kills[0] > 0
    ended = world.db.rows("SELECT status, COUNT(*) AS n FROM pulse_tasks GROUP BY status")
    assert {row["status"]: row["n"] for row in ended} == {"UNKNOWN": 30, "EXPIRED": 30}
    for n, wf in enumerate(leased + expiring):
        assert world.instance(wf)["status"] == "NEEDS_REVIEW", wf
        routines.step_resolve(world.db.conn, world.token, world.namespace, wf, "work", "done by hand", f"hand-{n}",
                              output={"done": True})
    assert {world.instance(wf)["status"] for wf in leased + expiring} == {"SUCCEEDED"}


@TARGETS
def test_R1_heartbeats_and_retried_failures_killed_in_their_statements_are_whole_or_not_at_all(world, orch, target):
    """Heartbeats, then failures that schedule a retry, every write of them a target (or every statement); each
    report is sent again until it answers (a report sent again answers as the first did). Each task then runs a
    second attempt, and only one."""
    world.publish(task_flow("retried", retry={"max_attempts": 2, "initial_backoff_ms": 1_000,
                                              "backoff_coefficient": 1.0, "max_backoff_ms": 1_000}))
    started = [world.start("retried") for _ in range(60)]
    claimed = pulse.task_claim(world.db.conn, "w-1", world.queue, limit=100)
    assert len(claimed) == 60
    with deciding_killed(world, target) as (deciding, kills):  # every one seen: these decisions are short
        for attempt in claimed:
            for _ in range(4):
                until_done(lambda a=attempt["attempt_id"]: pulse.attempt_heartbeat(deciding.get(), a, "w-1"))
            until_done(lambda a=attempt["attempt_id"]: pulse.attempt_fail(
                deciding.get(), a, "w-1", "the bank timed out", retryable=True))
    assert kills[0] > 0
    world.db.advance(1_000)
    again = pulse.task_claim(world.db.conn, "w-1", world.queue, limit=100)
    assert sorted(a["task_id"] for a in again) == sorted(a["task_id"] for a in claimed)
    for attempt in again:
        pulse.attempt_complete(world.db.conn, attempt["attempt_id"], "w-1", {"paid": True})
    assert {world.instance(wf)["status"] for wf in started} == {"SUCCEEDED"}
    assert world.db.scalar("SELECT COUNT(*) FROM pulse_attempts") == 120


@TARGETS
def test_R1_poll_rounds_killed_in_their_statements_are_whole_or_not_at_all(world, orch, target):
    """Three rounds of 40 polls: the reports (each consuming its answer, or leaving it in the inbox), the inbox's
    consumptions, the next rounds' starts and, after the last, the timer that follows, every write of them a target
    (or every statement). The claims are made on a session of their own (a claim whose answer is lost is another
    test)."""
    world.publish(POLL)
    started = [world.start("polling", {"id": f"p-{n}"}) for n in range(40)]
    deciding = Session(world)
    kills = 0
    try:
        for answer in ("PENDING", "PENDING", "DONE"):
            claimed = pulse.task_claim(world.db.conn, "w-1", world.queue, limit=100)
            assert len(claimed) == 40, answer
            with killing(world, deciding, target, every=2) as killed:
                for attempt in claimed:
                    until_done(lambda a=attempt["attempt_id"], status=answer: pulse.attempt_complete(
                        deciding.get(), a, "w-1", {"status": status}))
                world.db.advance(1_000)
                decide_due(world, deciding)
            kills += killed[0]
        world.db.advance(1_000)  # the timer after a poll whose last answer was consumed from the inbox
        decide_due(world, deciding)
    finally:
        deciding.close()
    assert kills > 0
    assert {world.instance(wf)["status"] for wf in started} == {"SUCCEEDED"}


@TARGETS
def test_R1_retention_windows_killed_in_their_statements_are_whole_or_not_at_all(world, orch, target):
    """History retention over settled instances with rows in every table an instance has, every write of its windows
    a target (or every statement); a window is asked again until it answers. Each instance goes once with every row
    of its own, and the windows' audit rows name each instance once."""
    from tests.sql.test_purge import RICH, TIMER, counted, rows_of, run_rich

    world.publish(RICH)
    world.publish(TIMER)
    rich = [run_rich(world, orch, f"o-{n}") for n in range(6)]
    timers = [world.start("wait") for _ in range(34)]
    world.db.advance(60_000)
    orch.drain()
    settled = rich + timers
    assert {world.instance(wf)["status"] for wf in settled} == {"SUCCEEDED"}
    counted(world)  # the rows folded into /metrics' sums, as a run folds before it purges
    cutoff = world.db.now()
    with deciding_killed(world, target, every=2) as (deciding, kills):
        after = None
        while True:
            window = until_done(lambda after=after: routines.instances_purge(
                deciding.get(), world.admin, world.namespace, cutoff, after=after, limit=2, reason="retention"))
            after = window["next_after"]
            if after is None:
                break
    assert kills[0] > 0
    for wf in settled:
        assert set(rows_of(world, wf).values()) == {0}, (wf, rows_of(world, wf))
    audits = world.db.rows("SELECT details FROM weave_audit WHERE action = 'instances.purge'")
    named = [wf for row in audits for wf in json.loads(row["details"])["workflow_ids"]]
    assert sorted(named) == sorted(settled)


@TARGETS
def test_R1_administrative_writes_killed_in_their_statements_are_whole_or_not_at_all(world, target):
    """Apps and queues put, credentials made, disabled and enabled, definitions published, console sessions opened
    and closed, every write of them a target (or every statement); each is asked again (with its key, where it takes
    one; a sign-in with a new session, as the console's is) until it answers. Each keyed action is written once with
    one audit row, each object holds what was last asked, and each console session has its one audit row."""
    import secrets

    from api.console.sessions import session_hash
    from procedures import definitions

    admin, ns = world.admin, world.namespace
    deciding = Session(world)
    hashes: list[str] = []

    def sign_in() -> dict:  # a new session for each try, as the console makes one for each sign-in
        hashes.append(session_hash(secrets.token_urlsafe(32)))
        return routines.console_session_open(deciding.get(), world.token, ns, hashes[-1], b"sealed", 3_600)

    try:
        with killing(world, deciding, target, every=2) as kills:
            for n in range(20):
                until_done(lambda n=n: routines.app_put(deciding.get(), admin, ns, f"app-{n}", 10 + n,
                                                        idempotency_key=f"app-{n}"))
                until_done(lambda n=n: routines.queue_put(deciding.get(), admin, ns, f"queue-{n}", 5 + n,
                                                          idempotency_key=f"queue-{n}"))
                made = until_done(lambda n=n: routines.credential_create(
                    deciding.get(), admin, ns, f"actor-{n}", ["workflows:read"], idempotency_key=f"cred-{n}"))
                until_done(lambda made=made: routines.credential_disable(deciding.get(), admin, ns,
                                                                         made["credential_id"]))
                if n % 2:
                    until_done(lambda made=made: routines.credential_enable(deciding.get(), admin, ns,
                                                                            made["credential_id"]))
                doc = {"name": f"def-{n}", "steps": [{"key": "wait", "type": "TIMER", "delay_ms": 1_000 + n}]}
                until_done(lambda doc=doc, n=n: routines.definition_publish(
                    deciding.get(), admin, ns, definitions.validate(doc), idempotency_key=f"pub-{n}"))
                until_done(sign_in)
                if n % 2 == 0:
                    until_done(lambda: routines.console_session_close(deciding.get(), hashes[-1]))
    finally:
        deciding.close()
    assert kills[0] > 0
    apps = world.db.rows("SELECT name, max_in_flight FROM weave_apps WHERE name LIKE 'app-%%'")
    assert {r["name"]: r["max_in_flight"] for r in apps} == {f"app-{n}": 10 + n for n in range(20)}
    queues = world.db.rows("SELECT name, capacity FROM weave_queues WHERE name LIKE 'queue-%%'")
    assert {r["name"]: r["capacity"] for r in queues} == {f"queue-{n}": 5 + n for n in range(20)}
    made = world.db.rows("SELECT actor, status FROM weave_credentials WHERE actor LIKE 'actor-%%'")
    assert sorted((r["actor"], r["status"]) for r in made) == sorted(
        (f"actor-{n}", "ACTIVE" if n % 2 else "DISABLED") for n in range(20))
    versions = world.db.rows("SELECT name, COUNT(*) AS n FROM weave_definitions WHERE name LIKE 'def-%%' "
                             "GROUP BY name")
    assert {r["name"]: r["n"] for r in versions} == {f"def-{n}": 1 for n in range(20)}
    audits = world.db.rows("SELECT action, COUNT(*) AS n FROM weave_audit WHERE idempotency_key RLIKE "
                           "'^(app|queue|cred|pub)-[0-9]+$' GROUP BY action")
    assert {r["action"]: r["n"] for r in audits} == {
        "app.put": 20, "queue.put": 20, "credential.create": 20, "definition.publish": 20}
    # A sign-in whose answer was lost leaves its session open, as a browser that never got its cookie does: it
    # expires. Each session there is has its one sign-in audited, and each closed one its sign-out.
    signed = {r["action"]: r["n"] for r in world.db.rows(
        "SELECT action, COUNT(*) AS n FROM weave_audit WHERE action LIKE 'console.%%' GROUP BY action")}
    assert signed["console.sign_in"] >= 20 and signed["console.sign_out"] == 10
    assert world.db.scalar("SELECT COUNT(*) FROM weave_console_sessions") == \
        signed["console.sign_in"] - signed["console.sign_out"]
