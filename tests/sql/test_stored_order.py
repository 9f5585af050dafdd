"""An instance's facts are decided in the order of their stored times (R-13, F-9), whichever node or scan comes to
them first: served late (every runner down) and in any order, the outcome is the one the facts made when each was
served on time. Before, a timer served before an earlier wait deadline of its instance started its successor's task
in an instance whose gate that expiry closes."""

from __future__ import annotations

import pytest

from procedures import errors, pulse, routines
from tests.benchmarks.statements import counted
from tests.sql.test_polls import checkpoint

MINUTE = 60_000
SECOND = 1_000


def branches(first: dict) -> dict:
    """``first`` beside a five-minute TIMER whose successor charges (a TASK)."""
    return {"name": "charge-after-cooling", "steps": [
        first,
        {"key": "cool", "type": "TIMER", "delay_ms": 5 * MINUTE + 7 * SECOND},
        {"key": "charge", "type": "TASK", "queue": "payments", "handler": "pay.charge", "handler_version": "1",
         "after": ["cool"]}]}


def approval(timeout_ms: int) -> dict:
    return {"key": "approval", "type": "SIGNAL", "timeout_ms": timeout_ms, "correlation": "$.input.order_id",
            "signal": {"name": "approval.decided", "payload_version": "1"}}


def advance(world, wf: str, key: str) -> str:
    return world.db.one("weave_checkpoint_advance", checkpoint(world, wf, key)["id"])["outcome"]


def charges(world, wf: str) -> int:
    return world.db.scalar("SELECT COUNT(*) FROM pulse_tasks WHERE instance_id = %s AND step_key = 'charge'",
                           world.internal_id(wf))


def test_R13_F9_a_timer_served_before_an_earlier_wait_deadline_waits_for_it_and_starts_no_work(world):
    world.publish(branches(approval(2 * MINUTE + 7 * SECOND)))
    wf = world.start("charge-after-cooling", {"order_id": "o-1"})
    world.db.advance(7 * MINUTE)  # every runner down until now: the approval ran out at 2:07, the timer fell due 5:07

    assert advance(world, wf, "cool") == "EARLIER_FIRST"
    assert world.step(wf, "cool")["status"] == "ACTIVE" and charges(world, wf) == 0
    assert advance(world, wf, "approval") == "EXPIRED"
    assert advance(world, wf, "cool") == "SETTLED"

    instance = world.instance(wf)
    assert (instance["status"], instance["gate"]) == ("NEEDS_REVIEW", "CLOSED")
    assert [r["code"] for r in instance["review_reasons"]] == ["SIGNAL_TIMEOUT"]
    assert world.step(wf, "charge")["status"] == "PENDING" and charges(world, wf) == 0  # as when served on time


def test_R13_F9_a_later_wait_deadline_served_first_waits_for_the_earlier_timer(world):
    world.publish(branches(approval(6 * MINUTE + 7 * SECOND)))
    wf = world.start("charge-after-cooling", {"order_id": "o-1"})
    world.db.advance(7 * MINUTE)  # the timer fell due at 5:07, the approval ran out at 6:07

    assert advance(world, wf, "approval") == "EARLIER_FIRST"
    assert world.step(wf, "approval")["status"] == "ACTIVE"
    assert advance(world, wf, "cool") == "SETTLED"
    assert charges(world, wf) == 1  # started from an open gate, as at 5:07
    assert advance(world, wf, "approval") == "EXPIRED"
    assert world.instance(wf)["status"] == "NEEDS_REVIEW"


def risky() -> dict:
    return {"key": "risk", "type": "TASK", "queue": "payments", "handler": "risk.check", "handler_version": "1",
            "retry": {"max_attempts": 1}}


def the_outcome_then_the_timer(world, wf: str) -> None:
    """The task's outcome, stored before the timer fell due, is applied first (the instance goes to review); the
    timer then settles and starts nothing, the gate that outcome closed staying closed."""
    inbox = world.db.scalar("SELECT id FROM pulse_inbox WHERE instance_id = %s", world.internal_id(wf))
    assert pulse.inbox_consume(world.db.conn, inbox) == "REVIEW"
    assert advance(world, wf, "cool") == "SETTLED"
    assert world.instance(wf)["gate"] == "CLOSED" and charges(world, wf) == 0


def test_R13_F9_a_task_failure_stored_before_the_timer_fell_due_is_decided_first(world):
    world.publish(branches(risky()))
    wf = world.start("charge-after-cooling", {"order_id": "o-1"})
    [claimed] = pulse.task_claim(world.db.conn, "w1", "payments", lease_ms=30 * MINUTE)
    world.db.advance(2 * MINUTE)
    with world.held(wf):  # the report meets a busy instance: its failure waits in the inbox
        pulse.attempt_fail(world.db.conn, claimed["attempt_id"], "w1", "declined", retryable=False)
    world.db.advance(5 * MINUTE)  # every runner down from the failure (2:00) past the timer's 5:07

    assert advance(world, wf, "cool") == "EARLIER_FIRST"
    the_outcome_then_the_timer(world, wf)


def test_R13_F9_a_lease_that_ran_out_before_the_timer_fell_due_is_decided_first(world):
    world.publish(branches(risky()))
    wf = world.start("charge-after-cooling", {"order_id": "o-1"})
    [claimed] = pulse.task_claim(world.db.conn, "w1", "payments", lease_ms=MINUTE)
    world.db.advance(7 * MINUTE)  # the worker died with its lease (1:00), every runner down past the timer's 5:07

    assert advance(world, wf, "cool") == "EARLIER_FIRST"
    assert pulse.lease_recover(world.db.conn, claimed["attempt_id"]) == "UNKNOWN"
    # The lease's outcome is stored now, at the lease's end: it is still the earlier fact.
    assert advance(world, wf, "cool") == "EARLIER_FIRST"
    the_outcome_then_the_timer(world, wf)


def test_R13_F9_a_report_made_after_an_earlier_deadline_leaves_its_outcome_to_be_decided_in_order(world):
    """Every orchestrator down, the workers up: the report comes at 7:00, after the approval ran out at 2:07.
    Consumed in the report, its step's successor (the charge) would start; left to the candidate path, it is
    decided after the expiry, which closed the gate."""
    world.publish({"name": "prepare-then-charge", "steps": [
        approval(2 * MINUTE + 7 * SECOND), {**risky(), "key": "prepare", "task_timeout_ms": 30 * MINUTE},
        {**charge(), "after": ["prepare"]}]})
    wf = world.start("prepare-then-charge", {"order_id": "o-1"})
    [claimed] = pulse.task_claim(world.db.conn, "w1", "payments", lease_ms=30 * MINUTE)
    world.db.advance(7 * MINUTE)
    pulse.attempt_complete(world.db.conn, claimed["attempt_id"], "w1", {"prepared": True})

    assert world.db.scalar("SELECT state FROM pulse_inbox") == "PENDING"  # not consumed in the report
    inbox = world.db.scalar("SELECT id FROM pulse_inbox")
    assert pulse.inbox_consume(world.db.conn, inbox) == "EARLIER_FIRST"
    assert advance(world, wf, "approval") == "EXPIRED"
    assert pulse.inbox_consume(world.db.conn, inbox) == "SUCCEEDED"
    assert world.step(wf, "prepare")["output"] == {"prepared": True}
    assert world.instance(wf)["gate"] == "CLOSED" and charges(world, wf) == 0


def test_R13_F9_facts_due_at_the_same_time_do_not_wait_for_each_other(world):
    world.publish(branches(approval(5 * MINUTE + 7 * SECOND)))  # the approval runs out as the timer falls due
    wf = world.start("charge-after-cooling", {"order_id": "o-1"})
    world.db.advance(7 * MINUTE)

    assert advance(world, wf, "cool") == "SETTLED"  # neither is before the other: served as they come
    assert charges(world, wf) == 1
    assert advance(world, wf, "approval") == "EXPIRED"


# --- a cancel decides after the facts that fell due before it (C-2, R-13) ------------------------------------------
def chain(first: dict, then: dict) -> dict:
    return {"name": "chain", "steps": [first, {**then, "after": [first["key"]]}]}


def charge(key: str = "charge") -> dict:
    return {"key": key, "type": "TASK", "queue": "payments", "handler": "pay.charge", "handler_version": "1"}


def cancel(world, wf: str) -> dict:
    return routines.instance_cancel(world.db.conn, world.token, "acme", wf, "customer withdrew", "c1")


def charged_while_every_runner_was_down(world, definition: dict) -> str:
    """The instance's first step, a charge, runs; its report meets a busy instance, so its outcome waits in the
    inbox; then nothing applies it (every runner down) until the cancel comes."""
    world.publish(definition)
    wf = world.start(definition["name"], {})
    [claimed] = pulse.task_claim(world.db.conn, "w1", "payments")
    with world.held(wf):
        pulse.attempt_complete(world.db.conn, claimed["attempt_id"], "w1", {"charged": 100})
    world.db.advance(MINUTE)
    return wf


def test_C2_R13_a_cancel_after_the_last_step_succeeded_unseen_is_refused_as_for_a_succeeded_instance(world):
    """Before, the cancel ended the instance CANCELLED, its charge's step CANCELLED with no output, while the task
    had succeeded: served on time, the instance had SUCCEEDED and the cancel was refused."""
    wf = charged_while_every_runner_was_down(world, {"name": "charge-only", "steps": [charge()]})
    with pytest.raises(errors.InvalidState):
        cancel(world, wf)
    instance = world.instance(wf)
    assert instance["status"] == "SUCCEEDED"
    assert world.step(wf, "charge")["output"] == {"charged": 100}


def test_C2_R13_a_cancel_keeps_the_outcome_of_a_task_that_ran_and_starts_no_work(world):
    wf = charged_while_every_runner_was_down(world, chain(charge(), charge("ship")))
    assert cancel(world, wf)["status"] == "CANCELLED"
    assert world.step(wf, "charge")["status"] == "SUCCEEDED"
    assert world.step(wf, "charge")["output"] == {"charged": 100}
    assert world.step(wf, "ship")["status"] == "CANCELLED"
    assert world.db.scalar("SELECT COUNT(*) FROM pulse_tasks WHERE step_key = 'ship'") == 0  # never created


def test_C2_R13_a_cancel_settles_a_timer_that_fell_due_and_starts_no_work(world):
    world.publish(chain({"key": "cool", "type": "TIMER", "delay_ms": 5 * MINUTE}, charge()))
    wf = world.start("chain", {})
    world.db.advance(7 * MINUTE)  # every runner down since the start
    assert cancel(world, wf)["status"] == "CANCELLED"
    assert world.step(wf, "cool")["status"] == "SUCCEEDED"
    assert world.step(wf, "cool")["wait"]["status"] == "SATISFIED"  # T-6: it was due in time
    assert charges(world, wf) == 0


def test_C2_R13_a_cancel_keeps_a_task_outcome_behind_another_step_s_lease_and_a_resumed_walk(world):
    """A fact of another step due before the outcome (a lease run out, the ROOT walk a resume made due) does not
    hold it back inside a cancel, which starts no work: their order changes nothing there."""
    world.publish({"name": "two-charges", "steps": [charge("first"), charge("second")]})
    wf = world.start("two-charges", {})
    routines.instance_pause(world.db.conn, world.token, "acme", wf, "hold", "p1")
    routines.instance_resume(world.db.conn, world.token, "acme", wf, "go on", "r1")  # its ROOT walk is due now
    first, second = pulse.task_claim(world.db.conn, "w1", "payments", limit=2, lease_ms=MINUTE)
    world.db.advance(2 * MINUTE)  # the first one's worker died with its lease (1:00)
    with world.held(wf):
        pulse.attempt_complete(world.db.conn, second["attempt_id"], "w1", {"charged": 100})
    world.db.advance(5 * MINUTE)
    assert cancel(world, wf)["status"] == "CANCELLING"  # the first task's end is still to come
    charged = [s for s in world.instance(wf)["steps"] if s["output"] == {"charged": 100}]
    assert [s["status"] for s in charged] == ["SUCCEEDED"]


@pytest.mark.breaks_invariants("M-4.11")
def test_C2_R12_a_fact_whose_decision_fails_is_left_to_the_orchestrator_and_the_cancel_goes_on(world):
    world.publish(chain({"key": "cool", "type": "TIMER", "delay_ms": MINUTE}, charge()))
    wf = world.start("chain", {})
    world.db.execute("UPDATE weave_waits SET due_at = due_at - INTERVAL 30 SECOND")  # facts that do not verify
    world.db.advance(2 * MINUTE)
    assert cancel(world, wf)["status"] == "CANCELLED"
    assert world.db.scalar("SELECT @weave_facts_only") is None  # the session decides new work again


# --- the order's read does not grow with the instance's other work (R-13, F-9) ------------------------------------
WIDE = 40  # steps beside the deciding one, each with a fact later than its decision's own time
SLACK = 8  # rows a reopened table's statistics may add; a read of the other steps' facts adds 40 to 80


def wide(name: str, beside: dict) -> dict:
    """A ten-second timer with a successor, beside ``WIDE`` copies of ``beside``: the steps are the same whatever
    ``beside`` is, so a decision reads the same rows of them."""
    return {"name": name, "steps": [
        {"key": "tick", "type": "TIMER", "delay_ms": 10 * SECOND},
        {"key": "then", "type": "TIMER", "delay_ms": 60 * MINUTE, "after": ["tick"]}] + [
        {**beside, "key": f"b{i}"} for i in range(WIDE)]}


def test_R13_F9_the_order_s_read_reads_no_fact_later_than_the_decision_whatever_the_instance_has_in_flight(world):
    """A decision reads the earliest of its instance's other facts still to be decided that came before its own
    time, through indexes in the order of the facts' times. It read every open wait, every task in flight, every
    attempt running and every outcome waiting of its instance: in a wide fan-out each decision as much again."""
    conn = world.db.conn
    work = {"type": "TASK", "handler": "fan.work", "handler_version": "1", "task_timeout_ms": 120 * MINUTE}
    for queue in ("running", "queued", "waiting", "done"):
        routines.queue_put(conn, world.admin, world.namespace, queue, 1000)
        world.publish(wide(f"fan-{queue}", {**work, "queue": queue}))
    world.publish(wide("fan-timers", {"type": "TIMER", "delay_ms": 60 * MINUTE}))

    def start(name: str) -> str:
        """Started, every step that can start activated: a walk activates 31 steps at most, its ROOT checkpoint
        the rest."""
        wf = world.start(name)
        while world.db.scalar("SELECT COUNT(*) FROM weave_pending_advances WHERE instance_id = %s AND kind = 'ROOT'",
                              world.internal_id(wf)):
            assert advance(world, wf, "") == "ACTIVATED"
        return wf

    def report(attempt: int, worker: str) -> dict:
        with counted(conn) as n:
            pulse.attempt_complete(conn, attempt, worker, {"ok": True})
        return n

    done = start("fan-done")  # every task beside the timer answered, consumed in its report: no fact left
    finished = pulse.task_claim(conn, "w", "done", limit=WIDE, lease_ms=60 * MINUTE)
    for claimed in finished[:-1]:
        report(claimed["attempt_id"], "w")
    last_report = report(finished[-1]["attempt_id"], "w")
    running = start("fan-running")  # every task running, leases an hour long
    in_flight = pulse.task_claim(conn, "w", "running", limit=WIDE, lease_ms=60 * MINUTE)
    first_report = report(in_flight[0]["attempt_id"], "w")  # 39 others running
    queued = start("fan-queued")  # every task queued, deadlines two hours off
    timers = start("fan-timers")  # every wait an hour long
    waiting = start("fan-waiting")  # every task answered at 15 s while the instance was held
    answered = pulse.task_claim(conn, "w", "waiting", limit=WIDE, lease_ms=60 * MINUTE)
    assert len(finished) == len(in_flight) == len(answered) == WIDE
    world.db.advance(15 * SECOND)
    with world.held(waiting):
        for claimed in answered:
            pulse.attempt_complete(conn, claimed["attempt_id"], "w", {"ok": True})
    world.db.advance(5 * SECOND)

    assert first_report["statements"] == last_report["statements"]
    assert first_report["rows_read"] <= last_report["rows_read"] + SLACK, (first_report, last_report)
    settled = {}
    for wf in (done, running, queued, timers, waiting):
        with counted(conn) as n:
            assert advance(world, wf, "tick") == "SETTLED"  # nothing of the instance came before it
        settled[wf] = n
    for wf in (running, queued, timers, waiting):
        assert settled[wf]["statements"] == settled[done]["statements"]
        assert settled[wf]["rows_read"] <= settled[done]["rows_read"] + SLACK, (settled[wf], settled[done])

    # The outcomes waiting, each decided on the candidate path: the first, with 39 later ones beside it, reads what
    # the last reads.
    outcomes = [r["id"] for r in world.db.rows("SELECT id FROM pulse_inbox WHERE instance_id = %s AND state = "
                                               "'PENDING' ORDER BY occurred_at", world.internal_id(waiting))]
    assert len(outcomes) == WIDE
    consumed = []
    for inbox in outcomes:
        with counted(conn) as n:
            assert pulse.inbox_consume(conn, inbox) == "SUCCEEDED"
        consumed.append(n)
    assert consumed[0]["statements"] == consumed[-1]["statements"]
    assert consumed[0]["rows_read"] <= consumed[-1]["rows_read"] + SLACK, (consumed[0], consumed[-1])


def test_R13_R3_the_order_s_read_waits_on_no_row_a_worker_holds(world):
    """The facts are read as they have committed, without a lock: a timer's decision does not wait behind a
    worker's report that holds its task, its attempt and its outcome, though it reads all three."""
    world.publish({"name": "cool-beside-work", "steps": [
        {"key": "cool", "type": "TIMER", "delay_ms": MINUTE},
        {**risky(), "key": "work", "task_timeout_ms": 30 * MINUTE},
        {**risky(), "key": "wait", "task_timeout_ms": 30 * MINUTE}]})
    wf = world.start("cool-beside-work", {})
    [claimed] = pulse.task_claim(world.db.conn, "w1", "payments", lease_ms=30 * MINUTE)  # one running, one queued
    with world.held(wf):
        pulse.attempt_complete(world.db.conn, claimed["attempt_id"], "w1", {"done": True})  # an outcome waiting
    world.db.advance(2 * MINUTE)  # the timer due, before each of them
    holder = world.db.connect()
    try:
        holder.begin()
        with holder.cursor() as cur:
            for table in ("pulse_tasks", "pulse_attempts", "pulse_inbox"):
                cur.execute(f"SELECT id FROM {table} WHERE instance_id = %s FOR UPDATE", (world.internal_id(wf),))
        world.db.execute("SET SESSION innodb_lock_wait_timeout = 1")
        assert advance(world, wf, "cool") == "EARLIER_FIRST"  # the outcome came first (read, not waited for)
    finally:
        world.db.execute("SET SESSION innodb_lock_wait_timeout = DEFAULT")
        holder.rollback()
        holder.close()


def test_R13_F9_a_decision_whose_other_steps_are_pending_waits_for_an_earlier_root_walk(world):
    """The other open steps all PENDING hold no facts of their own, and only the instance's ROOT checkpoint (the walk
    that activates them) is looked up: a walk due before the decision is still decided first."""
    world.publish({"name": "walk-first", "steps": [
        {"key": "x", "type": "TIMER", "delay_ms": SECOND},
        {"key": "y", "type": "TIMER", "delay_ms": 5 * MINUTE},
        {"key": "z", "type": "TIMER", "delay_ms": SECOND, "after": ["x"]}]})
    wf = world.start("walk-first")
    conn, token, ns = world.db.conn, world.token, world.namespace
    routines.instance_pause(conn, token, ns, wf, "hold", "p-1")
    world.db.advance(2 * SECOND)
    assert advance(world, wf, "x") == "SETTLED"  # its successor deferred: the instance is paused
    routines.instance_resume(conn, token, ns, wf, "go on", "r-1")  # the walk due now
    assert world.step(wf, "z")["status"] == "PENDING"
    world.db.advance(7 * MINUTE)  # every runner down until now: the walk fell due at 0:02, y at 5:00

    assert advance(world, wf, "y") == "EARLIER_FIRST"
    assert advance(world, wf, "") == "ACTIVATED"
    assert advance(world, wf, "y") == "SETTLED"
    assert [world.step(wf, key)["status"] for key in ("x", "y", "z")] == ["SUCCEEDED", "SUCCEEDED", "ACTIVE"]


def test_R13_F9_the_facts_of_other_steps_are_read_only_where_a_step_not_pending_may_hold_some(world):
    """Four index reads (checkpoints, outcomes, queued tasks, running attempts) when another step is open and not
    PENDING; the ROOT checkpoint's key alone when the others are PENDING; none for the instance's own walk then.
    Counted as the session's index lookups (Handler_read_key) beside those of a call that reads nothing."""
    conn = world.db.conn
    at = world.db.now()

    def lookups(step_key: str, open_steps: int, pending: int) -> int:
        with conn.cursor() as cur:
            cur.execute("FLUSH STATUS")
            cur.execute("SELECT _weave_facts_before(1, %s, %s, %s, %s)", (step_key, at, open_steps, pending))
            cur.execute("SHOW SESSION STATUS LIKE 'Handler_read_key'")
            return int(cur.fetchone()["Value"])

    lookups("tick", 2, 0)  # the tables opened once
    nothing = lookups("", 2, 2)  # the walk of an instance whose open steps are all PENDING
    assert lookups("tick", 1, 0) == nothing  # as for a step alone in its instance (its callers skip the call)
    assert lookups("tick", 2, 0) == nothing + 4  # another step ACTIVE
    assert lookups("tick", 3, 1) == nothing + 4
    assert lookups("", 2, 1) == nothing + 4  # the walk of an instance with a step ACTIVE
    assert lookups("tick", 2, 1) == nothing + 1  # its successor PENDING: the ROOT checkpoint only
    assert lookups("tick", 5, 4) == nothing + 1


@pytest.mark.breaks_invariants("M-4.9c")
def test_R13_M4_9c_a_pending_count_that_disagrees_with_the_steps_is_caught(world):
    """One too low, and a decision would take a step that holds facts for a PENDING one and skip its facts."""
    from procedures import invariants

    world.publish({"name": "chain-of-two", "steps": [
        {"key": "x", "type": "TIMER", "delay_ms": SECOND},
        {"key": "y", "type": "TIMER", "delay_ms": SECOND, "after": ["x"]}]})
    wf = world.start("chain-of-two")
    iid = world.internal_id(wf)
    assert world.db.scalar("SELECT pending_steps FROM weave_instances WHERE id = %s", iid) == 1
    assert "M-4.9c" not in invariants.violations(world.db.conn)
    world.db.execute("UPDATE weave_instances SET pending_steps = 0 WHERE id = %s", iid)
    broken = invariants.violations(world.db.conn)
    assert broken == {"M-4.9c": [iid]}, broken
