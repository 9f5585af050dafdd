"""Work deferred for room waits in line (R-8, R-18).

A checkpoint deferred because its app's quota or its queue's capacity was full names what it waits for and keeps
its place, the time its deferral began. A task's end gives its slot back and makes the first in each line look
again at once; a creator that sees room leaves it to the work that waited before it, as many as there are free
slots. The tests move the test clock only where they say so: a task created "at once" was created with no time
passing.
"""

from __future__ import annotations

import pytest

from procedures import db as dbmod
from procedures import invariants, pulse, routines
from tests.benchmarks.statements import counted
from tests.sql.test_polls import poll_flow
from tests.sql.test_pulse import claim, task_flow

RESULT_PENDING = {"status": "PENDING"}


def claim_one(world, worker: str = "w1") -> dict:
    got, = claim(world, worker, lease_ms=60_000)
    return got


def finish_one(world) -> None:
    """A worker claims the oldest claimable task and completes it: its slot goes back."""
    pulse.attempt_complete(world.db.conn, claim_one(world)["attempt_id"], "w1", {"ok": True})


def root_of(world, wf: str) -> dict | None:
    return world.db.row("SELECT * FROM weave_pending_advances WHERE instance_id = %s AND step_key = ''",
                        world.internal_id(wf))


def due_now(world) -> list[int]:
    """The instances whose checkpoints are due at the test clock's now, in id order."""
    return [r["instance_id"] for r in world.db.rows(
        "SELECT instance_id FROM weave_pending_advances WHERE available_at <= %s ORDER BY instance_id",
        world.db.now())]


def active(world, wf: str, key: str = "work") -> bool:
    return world.step(wf, key)["status"] == "ACTIVE"


def line_of(world, owner: str) -> tuple[str, int]:
    """The line's reason and what it waits for: the app billing (QUOTA_FULL) or the queue payments (QUEUE_FULL)."""
    if owner == "app":
        return "QUOTA_FULL", world.db.scalar("SELECT id FROM weave_apps WHERE name = 'billing'")
    return "QUEUE_FULL", world.db.scalar("SELECT id FROM weave_queues WHERE name = 'payments'")


def one_slot(world, owner: str, limit: int = 1) -> None:
    """Room for ``limit`` tasks in flight (one by default): the app's quota, or the queue's capacity."""
    if owner == "app":
        routines.app_put(world.db.conn, world.admin, world.namespace, "billing", limit)
    else:
        routines.queue_put(world.db.conn, world.admin, world.namespace, "payments", limit)


def waiting_in(world, owner: str) -> int:
    """How many wait in the line of the app billing or the queue payments, as their listings say."""
    listed = (routines.app_list if owner == "app" else routines.queue_list)(world.db.conn, world.admin, world.namespace)
    return next(row["waiting"] for row in listed if row["name"] == ("billing" if owner == "app" else "payments"))


def line_up(world, prefix: str, n: int, **start) -> list[str]:
    """Starts n instances a tenth of a second apart (each deferred for room, in that order)."""
    started = []
    for k in range(n):
        world.db.advance(100)
        started.append(world.start("pay", {"order_id": f"{prefix}-{k}"}, **start))
    return started


@pytest.mark.parametrize("owner", ["app", "queue"])
def test_R8_work_deferred_for_room_gets_it_in_the_order_it_began_to_wait(world, orch, owner):
    """Four instances wait for one slot, deferred a tenth of a second apart; each task's end wakes the first in line
    at once (no time passes), and a start that comes while others wait goes behind them though it sees the slot
    free. The tasks are created in the order the instances began to wait."""
    one_slot(world, owner)
    world.publish(task_flow())
    holder = world.start("pay", {"order_id": "holder"})
    waiting = line_up(world, "w", 3)
    reason, waits_for = line_of(world, owner)
    for wf in waiting:
        root = root_of(world, wf)
        assert (root["deferred_reason"], root["deferred_for"]) == (reason, waits_for)
        assert root["available_at"] > world.db.now()
    assert active(world, holder) and not any(active(world, wf) for wf in waiting)
    assert waiting_in(world, owner) == 3  # what an operator sees of the line: `weave apps list`, `queues list`

    finish_one(world)  # the holder's task ends: the first in line is due at once, the others still wait
    assert due_now(world) == [world.internal_id(waiting[0])]
    late = world.start("pay", {"order_id": "late"})  # sees the slot free, but the first in line waited for it
    assert not active(world, late) and root_of(world, late)["deferred_reason"] == reason
    orch.drain()
    assert active(world, waiting[0]) and not active(world, late)

    created = [waiting[0]]
    for _ in range(3):
        finish_one(world)
        orch.drain()  # no time passes: the first in line was woken by the task's end
        now_active = [wf for wf in [*waiting, late] if active(world, wf) and wf not in created]
        assert len(now_active) == 1
        created += now_active
    assert created == [*waiting, late]
    assert world.db.in_flight(owner) == 1 and waiting_in(world, owner) == 0


def test_R8_a_step_behind_a_finished_task_takes_its_slot_at_once_when_nothing_waits_before_it(world):
    """A chain of steps at a quota of one: each report gives its slot back before it settles its step, so the
    successor takes that slot in the report's own transaction, ten steps without the clock moving."""
    routines.app_put(world.db.conn, world.admin, world.namespace, "billing", 1)
    steps = [{"key": f"s{n}", "type": "TASK", "queue": "payments", "handler": "example.echo",
              "handler_version": "1", "input": {}, **({"after": [f"s{n - 1}"]} if n else {})} for n in range(10)]
    world.publish({"name": "chain", "steps": steps})
    wf = world.start("chain")
    for _ in range(10):
        finish_one(world)
    assert world.instance(wf)["status"] == "SUCCEEDED"
    assert world.db.scalar("SELECT COUNT(*) FROM pulse_tasks WHERE status = 'SUCCEEDED'") == 10


def test_R8_a_POLL_round_deferred_for_room_waits_in_line_and_is_woken_by_a_task_s_end(world, orch):
    """The POLL checkpoint of a round deferred for room takes its place in line like a ROOT checkpoint: a task's
    end wakes it before a start that came after it, and its round is created at once."""
    routines.app_put(world.db.conn, world.admin, world.namespace, "billing", 1)
    world.publish(poll_flow(interval_ms=1_000))
    world.publish(task_flow("other"))
    poll = world.start("pay", {"order_id": "p"})
    orch.drain()
    pulse.attempt_complete(world.db.conn, claim_one(world)["attempt_id"], "w1", RESULT_PENDING)
    holder = world.start("other", {"order_id": "holder"})  # takes the slot round 1 gave back
    assert active(world, holder)
    world.db.advance(1_000)
    orch.drain()  # round 2 is due, and finds no room
    cp = world.db.row("SELECT * FROM weave_pending_advances WHERE instance_id = %s AND step_key = 'check'",
                      world.internal_id(poll))
    assert cp["deferred_reason"] == "QUOTA_FULL" and cp["available_at"] > world.db.now()
    world.db.advance(100)
    later = world.start("other", {"order_id": "later"})
    assert not active(world, later)

    finish_one(world)  # the holder's task ends
    orch.drain()
    assert world.db.scalar("SELECT rounds_used FROM weave_poll_states WHERE instance_id = %s",
                           world.internal_id(poll)) == 2
    assert not active(world, later)


def test_R8_work_started_while_its_app_was_disabled_takes_no_place_in_a_queue_shared_with_another_app(world, orch):
    """A review of the rule above found that work that had only waited for its app's enabling came back into a
    queue's line at the time its app was disabled, ahead of another app's work that had waited there for room
    since. The place kept across a disabling is in the app's own line; in a queue's line, which other apps share,
    such work comes after what already waits for room."""
    admin, ns = world.admin, world.namespace
    routines.queue_put(world.db.conn, admin, ns, "payments", 1)
    routines.app_put(world.db.conn, admin, ns, "other", 10)
    world.publish(task_flow())
    world.start("pay", {"order_id": "holder"})  # the queue's one slot
    routines.app_put(world.db.conn, admin, ns, "billing", 10, "DISABLED")
    world.db.advance(100)
    disabled = world.start("pay", {"order_id": "d"})  # billing's: waits for its app to be enabled
    assert root_of(world, disabled)["deferred_reason"] == "APP_DISABLED"
    world.db.advance(5_000)
    other = world.start("pay", {"order_id": "v"}, app="other")  # waits for the queue's room
    assert root_of(world, other)["deferred_reason"] == "QUEUE_FULL"
    routines.app_put(world.db.conn, admin, ns, "billing", 10, "ACTIVE")
    world.db.advance(100)
    orch.drain()  # billing's work looks again: the queue is full, and it joins the line behind the other app's
    assert root_of(world, disabled)["deferred_reason"] == "QUEUE_FULL"
    assert root_of(world, disabled)["deferred_since"] > root_of(world, other)["deferred_since"]
    finish_one(world)
    orch.drain()
    assert active(world, other) and not active(world, disabled)


def test_R18_a_deadline_met_while_waiting_for_room_says_what_the_work_waited_for(world, orch):
    """Work that waited for room until a deadline went to review with nothing to say so: INSTANCE_DEADLINE's help
    says to extend the deadline and the instance goes on, which it does not while the quota is still full, and a
    POLL_DEADLINE read as a vendor still pending when its rounds had never run. Each review now carries the deferral
    it met: its reason, since when, and its detail."""
    admin, ns = world.admin, world.namespace
    routines.app_put(world.db.conn, admin, ns, "billing", 0)
    world.publish(task_flow())
    starved = world.start("pay", {"order_id": "starved"}, deadline_ms=5_000)
    world.db.advance(5_001)
    orch.drain()
    (reason,) = world.instance(starved)["review_reasons"]
    assert reason["code"] == "INSTANCE_DEADLINE" and reason["detail"]["deferred"]["reason"] == "QUOTA_FULL"
    assert "max_in_flight 0" in reason["detail"]["deferred"]["detail"]

    routines.app_put(world.db.conn, admin, ns, "billing", 1)
    world.publish(poll_flow("polled", interval_ms=1_000, timeout_ms=10_000))
    poll = world.start("polled", {"order_id": "p"})
    orch.drain()
    pulse.attempt_complete(world.db.conn, claim_one(world)["attempt_id"], "w1", RESULT_PENDING)
    world.start("pay", {"order_id": "holder"})  # takes the slot round 1 gave back
    for _ in range(10):
        world.db.advance(1_000)
        orch.drain()  # round 2 is due, and finds no room
    world.db.advance(1_000)
    orch.drain()
    (reason,) = world.instance(poll)["review_reasons"]
    assert reason["code"] == "POLL_DEADLINE" and reason["detail"]["rounds_used"] == 1
    assert reason["detail"]["deferred"]["reason"] == "QUOTA_FULL"


def test_R8_a_task_s_end_never_waits_for_a_checkpoint_another_transaction_holds(world, orch):
    """The wake passes over the first in line while another transaction holds its checkpoint (it is being looked at
    already) and wakes the next: the report never waits for another instance's decision. The first keeps its place:
    the one woken in its stead, held back by it with the slot free, wakes it, and it takes the slot."""
    routines.app_put(world.db.conn, world.admin, world.namespace, "billing", 1)
    world.publish(task_flow())
    world.start("pay", {"order_id": "holder"})
    world.db.advance(100)
    first = world.start("pay", {"order_id": "first"})
    world.db.advance(100)
    second = world.start("pay", {"order_id": "second"})
    looking = world.db.connect()
    try:
        with looking.cursor() as cur:
            cur.execute("START TRANSACTION")
            cur.execute("SELECT id FROM weave_pending_advances WHERE instance_id = %s FOR UPDATE",
                        (world.internal_id(first),))
        world.db.execute("SET SESSION innodb_lock_wait_timeout = 1")
        finish_one(world)  # would fail with a lock wait (1205) if the wake waited for the held checkpoint
        assert due_now(world) == [world.internal_id(second)]
    finally:
        looking.rollback()
        looking.close()
    # The one woken finds the first in line before it and the slot free, which no one is looking at now: it wakes the
    # first, which takes the slot, and waits on.
    orch.drain()
    assert active(world, first) and not active(world, second)
    assert root_of(world, second)["deferred_reason"] == "QUOTA_FULL"


def test_R8_R18_a_failing_look_leaves_the_line_without_holding_it_up_and_keeps_its_place(world, orch):
    """A checkpoint whose look keeps failing backs off (R-12) and leaves its line meanwhile, so that the work behind
    it is not held up for its back-off; once its look succeeds and defers again it is back in its old place."""
    routines.app_put(world.db.conn, world.admin, world.namespace, "billing", 1)
    world.publish(task_flow())
    world.start("pay", {"order_id": "holder"})
    world.db.advance(100)
    failing = world.start("pay", {"order_id": "failing"})
    since = root_of(world, failing)["deferred_since"]
    cp = root_of(world, failing)
    dbmod.call(world.db.conn, "weave_candidate_fail", "CHECKPOINT", cp["id"], cp["version"],
               "connection lost")
    assert root_of(world, failing)["deferred_for"] is None and root_of(world, failing)["attempts"] == 1
    world.db.advance(100)
    behind = world.start("pay", {"order_id": "behind"})
    finish_one(world)
    orch.drain()  # the one behind is woken and takes the slot: the failing one is backing off
    assert active(world, behind) and not active(world, failing)
    world.db.advance(1_000)
    orch.drain()  # its back-off is over: its look succeeds now, and defers: back in line, in its old place
    root = root_of(world, failing)
    assert (root["deferred_reason"], root["deferred_since"]) == ("QUOTA_FULL", since)
    assert root["deferred_for"] is not None
    world.db.advance(100)
    last = world.start("pay", {"order_id": "last"})
    finish_one(world)
    orch.drain()
    assert active(world, failing) and not active(world, last)


def test_R8_a_look_for_room_backs_off_but_no_later_than_a_second_for_each_one_before_it_in_line(world, orch):
    """R-8's bounded backoff for room: the task's end wakes the line, so a waiter looks again after one more second
    for each look in a row that found no room, up to ten, but no later than a second for each one before it in line:
    the first looks every second (its look finds a wake that was missed), the second every two. None looks past
    its deadline."""
    routines.app_put(world.db.conn, world.admin, world.namespace, "billing", 1)
    world.publish(task_flow(task_timeout_ms=3_600_000))
    world.start("pay", {"order_id": "holder"})
    claim(world, lease_ms=3_600_000)  # its task runs on
    line = []
    for n in range(12):
        world.db.advance(100)
        line.append(world.start("pay", {"order_id": f"w-{n}"}, deadline_ms=70_000 if n == 11 else 86_400_000))
    watched = {"first": line[0], "second": line[1], "last": line[11]}
    gaps: dict[str, list[int]] = {name: [] for name in watched}  # each look's wait until the next, in seconds
    seen = {name: root_of(world, wf)["deferrals"] for name, wf in watched.items()}  # each has deferred once
    for _ in range(600):
        now = world.db.now()
        for name, wf in watched.items():
            root = root_of(world, wf)
            if root and root["deferrals"] != seen[name]:  # it has looked (and deferred) since the last round
                seen[name] = root["deferrals"]
                gaps[name].append(round((root["available_at"] - now).total_seconds()))
        if world.instance(line[11])["status"] != "RUNNING":
            break
        world.db.advance_to(min(root_of(world, wf)["available_at"] for wf in line))
        orch.drain()
    assert set(gaps["first"]) == {1}, gaps
    assert set(gaps["second"]) == {2}, gaps
    assert gaps["last"][:9] == [2, 3, 4, 5, 6, 7, 8, 9, 10] and max(gaps["last"]) == 10, gaps
    assert world.instance(line[11])["review_reasons"][0]["code"] == "INSTANCE_DEADLINE"  # looked at on time


def test_R8_a_waiter_that_moves_from_the_app_s_line_to_the_queue_s_keeps_its_place(world, orch):
    """The place is the time work began to wait for room, in either line: one that waited for the app and then
    finds the queue full goes into the queue's line in that place, not at its end."""
    admin, ns = world.admin, world.namespace
    routines.app_put(world.db.conn, admin, ns, "billing", 1)
    world.publish(task_flow())
    world.start("pay", {"order_id": "holder"})
    world.db.advance(100)
    moving = world.start("pay", {"order_id": "moving"})
    since = root_of(world, moving)["deferred_since"]
    routines.queue_put(world.db.conn, admin, ns, "payments", 1)
    routines.app_put(world.db.conn, admin, ns, "billing", 10)
    world.db.advance(100)
    later = world.start("pay", {"order_id": "later"})  # the queue is full: it waits in the queue's line
    world.db.advance(1_000)
    orch.drain()
    root = root_of(world, moving)
    _, queue = line_of(world, "queue")
    assert (root["deferred_reason"], root["deferred_for"], root["deferred_since"]) == ("QUEUE_FULL", queue, since)
    assert root_of(world, later)["deferred_since"] > since
    finish_one(world)
    orch.drain()
    assert active(world, moving) and not active(world, later)


def test_R8_a_waiter_keeps_its_place_while_its_app_is_disabled_and_enabled_again(world, orch):
    """An app disabled for a minute during an incident, then enabled: its waiters had been moved to the end of the
    line, behind instances started while it was disabled, and their wait (the console's 'since', the oldest
    deferral's age) began again. A checkpoint deferred without a break, for room or for its app or identity, keeps
    the time it began to wait."""
    admin, ns = world.admin, world.namespace
    one_slot(world, "app")
    world.publish(task_flow())
    world.start("pay", {"order_id": "holder"})
    waiting = line_up(world, "w", 2)
    since = [root_of(world, wf)["deferred_since"] for wf in waiting]
    routines.app_put(world.db.conn, admin, ns, "billing", 1, "DISABLED")
    world.db.advance(10_000)
    orch.drain()
    assert [root_of(world, wf)["deferred_reason"] for wf in waiting] == ["APP_DISABLED", "APP_DISABLED"]
    assert waiting_in(world, "app") == 2  # waiting for the app, in its line or for it to be enabled
    world.db.advance(100)
    during = world.start("pay", {"order_id": "during"})  # started while the app is disabled
    assert root_of(world, during)["deferred_reason"] == "APP_DISABLED"
    routines.app_put(world.db.conn, admin, ns, "billing", 1, "ACTIVE")
    world.db.advance(10_000)
    orch.drain()
    assert [root_of(world, wf)["deferred_since"] for wf in waiting] == since
    assert root_of(world, during)["deferred_since"] > since[1]
    created = []
    for _ in range(3):
        finish_one(world)
        orch.drain()
        created += [wf for wf in [*waiting, during] if active(world, wf) and wf not in created]
    assert created == [*waiting, during]


def test_R8_a_creator_held_back_by_a_line_with_the_slot_free_wakes_its_first(world, orch):
    """A slot that came back without a wake (a cancelled task writes on, and wakes no one) is found by the next
    creator: held back by the line with the slot free, it wakes the first in line, which takes the slot at once."""
    routines.app_put(world.db.conn, world.admin, world.namespace, "billing", 1)
    world.publish(task_flow())
    holder = world.start("pay", {"order_id": "holder"})
    world.db.advance(100)
    first = world.start("pay", {"order_id": "first"})
    routines.instance_cancel(world.db.conn, world.token, world.namespace, holder, "not needed", "cancel-1")
    orch.drain()  # the cancel finishes; the first in line was not woken
    assert world.instance(holder)["status"] == "CANCELLED" and not active(world, first)
    assert due_now(world) == [] and world.db.in_flight() == 0
    late = world.start("pay", {"order_id": "late"})  # held back, with the slot free
    assert due_now(world) == [world.internal_id(first)]
    orch.drain()
    assert active(world, first) and not active(world, late)


def test_R8_waiters_in_the_app_s_line_and_the_queue_s_are_in_one_order_and_never_hold_each_other_back(world, orch):
    """Two wait for the app's quota, then two for the queue's capacity (the limits changed between); one task's end
    frees a slot of each. Each waiter's place, the time it began to wait for room, holds in both lines: the first of
    all takes the room, and the drain ends. (With a place in its own line only, each first in one line counted the
    whole other line before it, moved to that line's end and woke its first, which did the same: the looks went
    round for ever.)"""
    admin, ns = world.admin, world.namespace
    routines.app_put(world.db.conn, admin, ns, "billing", 1)
    world.publish(task_flow())
    holder = world.start("pay", {"order_id": "holder"})
    in_app_line = line_up(world, "a", 2)
    routines.app_put(world.db.conn, admin, ns, "billing", 10)
    routines.queue_put(world.db.conn, admin, ns, "payments", 1)
    in_queue_line = line_up(world, "q", 2)
    routines.app_put(world.db.conn, admin, ns, "billing", 1)
    assert [root_of(world, wf)["deferred_reason"] for wf in in_app_line + in_queue_line] == \
        ["QUOTA_FULL"] * 2 + ["QUEUE_FULL"] * 2
    assert active(world, holder)

    finish_one(world)  # one slot of the app and one of the queue come back
    orch.drain(max_rounds=20)
    assert due_now(world) == []  # the looks came to rest
    assert active(world, in_app_line[0])
    assert not any(active(world, wf) for wf in in_app_line[1:] + in_queue_line)


@pytest.mark.parametrize("owner", ["app", "queue"])
def test_R8_a_raised_quota_or_capacity_wakes_as_many_of_the_line_as_it_adds_slots(world, orch, owner):
    """Room that an operator adds comes with no task's end to wake the line: raising the limit by n makes the first
    n waiting for it due at once, in order, and a lowered limit wakes no one."""
    one_slot(world, owner)
    world.publish(task_flow())
    world.start("pay", {"order_id": "holder"})
    waiting = line_up(world, "w", 5)

    one_slot(world, owner, 3)  # two more slots
    assert due_now(world) == [world.internal_id(wf) for wf in waiting[:2]]
    orch.drain()
    assert [active(world, wf) for wf in waiting] == [True, True, False, False, False]
    one_slot(world, owner, 2)  # lowered below what is in flight: no one is woken
    assert due_now(world) == []


def test_R8_room_left_over_after_the_line_goes_to_a_creator_that_did_not_wait(world, orch):
    """The line holds back only as many creators as it has work waiting: with two slots free and one waiting, a
    start that did not wait takes the other at once."""
    routines.app_put(world.db.conn, world.admin, world.namespace, "billing", 1)
    world.publish(task_flow())
    world.start("pay", {"order_id": "holder"})
    world.db.advance(100)
    waiting = world.start("pay", {"order_id": "waiting"})
    routines.app_put(world.db.conn, world.admin, world.namespace, "billing", 3)  # two free, one waiting
    fresh = world.start("pay", {"order_id": "fresh"})
    assert active(world, fresh) and not active(world, waiting)
    world.db.advance(1_000)
    orch.drain()
    assert active(world, waiting)
    assert world.db.in_flight() == 3


def test_R8_no_statement_for_the_line_when_nothing_waits(world):
    """A report and a start of an app that nothing waits for run the same statements with lines as without: the
    look at the lines is part of reads they make anyway. With work waiting, a report runs the wake."""
    world.publish(task_flow())

    def statements(call) -> int:
        with counted(world.db.conn) as delta:
            call()
        return delta["statements"]

    world.start("pay", {"order_id": "warm"})
    finish_one(world)  # the routines loaded
    world.start("pay", {"order_id": "a"})
    got = claim_one(world)
    quiet = statements(lambda: pulse.attempt_complete(world.db.conn, got["attempt_id"], "w1", {}))
    routines.app_put(world.db.conn, world.admin, world.namespace, "billing", 1)
    world.start("pay", {"order_id": "b"})
    world.db.advance(100)
    world.start("pay", {"order_id": "c"})  # waits in line
    got = claim_one(world)
    woke = statements(lambda: pulse.attempt_complete(world.db.conn, got["attempt_id"], "w1", {}))
    assert woke == quiet + 5  # the wake: its call, the first of each line, the update, and its count of them


@pytest.mark.breaks_invariants("M-4.7c")
def test_M4_7c_a_checkpoint_in_a_line_it_has_nothing_to_do_with_is_a_broken_invariant(world):
    """A checkpoint in another app's line would hold that app's creators back and never be woken by its own app's
    releases."""
    routines.app_put(world.db.conn, world.admin, world.namespace, "billing", 1)
    world.publish(task_flow())
    world.start("pay", {"order_id": "holder"})
    waiting = world.internal_id(world.start("pay", {"order_id": "waiting"}))
    assert invariants.violations(world.db.conn) == {}
    cp = world.db.scalar("SELECT id FROM weave_pending_advances WHERE instance_id = %s", waiting)
    world.db.execute("UPDATE weave_pending_advances SET deferred_for = deferred_for + 1000 WHERE id = %s", cp)
    assert invariants.violations(world.db.conn) == {"M-4.7c": [cp]}
    world.db.execute("UPDATE weave_pending_advances SET deferred_reason = 'PAUSED' WHERE id = %s", cp)
    assert invariants.violations(world.db.conn) == {"M-4.7c": [cp]}  # in a line, though not deferred for room


def test_R8_a_capacity_raised_wakes_a_long_line_under_a_sessions_small_list_cap(world, orch):
    """The wake lists the line's first checkpoints, up to a thousand ids: under MySQL's 1024-byte cap, which a
    caller's session may keep, the list was cut mid-value and the queue's put failed (4038), so no capacity could
    be raised from such a session. The put raises the cap for its own statements and gives the session its own."""
    one_slot(world, "queue", 0)
    world.publish(task_flow())
    waiting = [world.start("pay", {"order_id": f"w-{k}"}) for k in range(260)]
    assert {root_of(world, wf)["deferred_reason"] for wf in waiting} == {"QUEUE_FULL"}
    world.db.execute("SET SESSION group_concat_max_len = 1024")
    try:
        routines.queue_put(world.db.conn, world.admin, world.namespace, "payments", 1000)
        now = world.db.now()
        assert all(root_of(world, wf)["available_at"] <= now for wf in waiting)  # every one looks again now
        assert world.db.scalar("SELECT @@group_concat_max_len") == 1024
    finally:
        world.db.execute("SET SESSION group_concat_max_len = DEFAULT")
