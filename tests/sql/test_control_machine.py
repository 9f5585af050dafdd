"""Property: whatever happens to an instance, every operator action answers as the C-6 table says, a refused or
replayed action changes nothing, and nothing is left stalled (R-18).

Seeded random walks drive one instance each of a flow with every kind of wait (a TIMER; then a POLL with a final
signal beside a SIGNAL; then a TASK that reads both) through random histories. The clock moves; a worker claims
and answers PENDING, a success, a review value, a retryable or a final failure, or vanishes; signals come, right,
stale or repeated; a fault fails one of the instance's decisions three times in a row; an operator pauses, resumes,
cancels, moves the deadline, reactivates, continues and resolves steps, retries the instance's own failing
decisions, and repeats earlier actions under their keys. Before each action the test reads the state the action
meets and computes, from it alone, the answer of the C-6 table and of C-4's checks in their order: a refusal must
carry that code and change nothing, an acceptance must do what the action promises. The M-4 invariants hold
after every step, a final status never changes, and an instance is NEEDS_REVIEW exactly while a reason is open.
At the end each instance is driven to rest (resumed, every task answered, every wait given its time): it must end
SUCCEEDED, CANCELLED or NEEDS_REVIEW, never RUNNING or CANCELLING with nothing left to do; then an operator clears
every review, and the instance must finish, leaving no task, wait, signal, checkpoint or report open.

A failure names its walk and prints its history.
"""

from __future__ import annotations

import collections
import contextlib
import datetime as dt
import itertools
import json
import threading

from orchestrator.loop import Orchestrator
from procedures import db as dbmod
from procedures import errors, invariants, pulse, routines
from procedures.reviews import RETRY_CLOSES
from tests.support import walks
from tests.support.signals import send
from tests.support.world import World

LEASE_MS = 10_000
DEADLINE_MS = 150_000
FLOW = {"name": "ops", "steps": [
    {"key": "wait", "type": "TIMER", "delay_ms": 10_000},
    {"key": "check", "type": "POLL", "after": ["wait"], "queue": "payments", "handler": "example.poll",
     "handler_version": "1", "input": {"order_id": "$.input.order_id"}, "interval_ms": 10_000, "max_rounds": 4,
     "timeout_ms": 60_000, "task_timeout_ms": 600_000,
     "retry": {"max_attempts": 2, "initial_backoff_ms": 1_000, "backoff_coefficient": 1.0, "max_backoff_ms": 1_000},
     "result": {"pending": ["PENDING"], "success": ["DONE"], "review": ["MANUAL"]},
     "final_signal": {"name": "payment.final", "payload_version": "1", "correlation": "$.input.order_id"}},
    {"key": "approval", "type": "SIGNAL", "after": ["wait"],
     "signal": {"name": "approval.decided", "payload_version": "1", "payload_type": "object"},
     "correlation": "$.input.order_id", "timeout_ms": 40_000},
    {"key": "charge", "type": "TASK", "after": ["check", "approval"], "queue": "payments", "handler": "example.echo",
     "handler_version": "1", "input": {"paid": "$.steps.check.output", "ok": "$.steps.approval.output"},
     "retry": {"max_attempts": 2, "initial_backoff_ms": 0}}]}
STEPS = ["wait", "check", "approval", "charge"]
FINAL = frozenset({"SUCCEEDED", "CANCELLED"})
WALKS, STEPS_PER_WALK, RACING_WALKS = walks.seeds(60), 40, walks.seeds(20)


def code_of(call) -> str | None:
    """Runs an action; answers None when it was taken, else its error code."""
    try:
        call()
    except errors.ValidationFailed as exc:
        return exc.field_code
    except errors.WeaveError as exc:
        return exc.code
    return None


class Walk(walks.Walk):
    """One instance's history, drawn from ``seed``."""

    def __init__(self, db, orch, seed: int, tally: collections.Counter):
        super().__init__(db, orch, seed)
        self.tally = tally
        self.world = World.create(self.db)
        self.world.publish(FLOW)
        self.wf = self.world.start("ops", {"order_id": "o-1"}, deadline_ms=DEADLINE_MS)
        self.iid = self.world.internal_id(self.wf)
        self.keys = itertools.count(1)
        self.done: list[tuple] = []  # actions taken: (routine, args), for replays
        self.seen_final: str | None = None
        # Some walks meet a system that answers every kind of thing, others one that keeps saying "not yet", whose
        # POLL runs out of rounds or time.
        self.answers = self.draw([["PENDING", "DONE", "MANUAL", "RETRY", "FAIL", "VANISH"],
                                  ["PENDING"] * 8 + ["DONE", "VANISH"]])
        # and in some, signals are rare: the SIGNAL times out while the POLL still works.
        self.signals = self.draw([3, 3, 0.2])
        self.drain()

    # What an action meets, and what it leaves

    def instance_row(self) -> dict:
        return self.db.row("SELECT status, control, gate, deadline_at, version, event_seq FROM weave_instances "
                           "WHERE id = %s", self.iid)

    def fingerprint(self) -> tuple:
        return (self.instance_row(),
                self.db.rows("SELECT step_key, status, activation_seq FROM weave_steps WHERE instance_id = %s "
                             "ORDER BY step_key", self.iid),
                self.db.scalar("SELECT COUNT(*) FROM weave_audit WHERE instance_id = %s", self.iid),
                self.db.scalar("SELECT COUNT(*) FROM weave_review_reasons WHERE closed_at IS NULL"))

    def step_status(self, key: str) -> str:
        return self.db.scalar("SELECT status FROM weave_steps WHERE instance_id = %s AND step_key = %s", self.iid, key)

    def unsettled(self) -> int:
        return (self.db.scalar("SELECT COUNT(*) FROM pulse_tasks WHERE instance_id = %s AND status IN "
                               "('QUEUED', 'RUNNING')", self.iid)
                + self.db.scalar("SELECT COUNT(*) FROM pulse_inbox WHERE instance_id = %s AND state = 'PENDING'",
                                 self.iid))

    def act(self, routine, *args, expected: str | None, **kwargs) -> bool:
        """Runs an operator action under a new key; a refusal must carry ``expected`` and change nothing."""
        before = self.fingerprint()
        key = f"op-{next(self.keys)}"
        got = code_of(lambda: routine(self.db.conn, self.world.token, self.world.namespace, self.wf, *args,
                                      "as drawn", key, **kwargs))
        assert got == expected, (routine.__name__, args, kwargs, before[0], before[1])
        self.tally[routine.__name__, got or "taken"] += 1
        self.history.append(f"{routine.__name__} {args} -> {got or 'taken'}")
        if got is None:
            self.done.append((routine, args, kwargs, key))
        else:
            assert self.fingerprint() == before, f"{routine.__name__} was refused {got} but changed the instance"
        return got is None

    def recovery_refusal(self, key: str) -> str | None:
        """C-4's checks in their order: the instance in review, no task unsettled, the step in review."""
        if self.instance_row()["status"] != "NEEDS_REVIEW":
            return "INVALID_STATE"
        if self.unsettled():
            return "TASK_IN_FLIGHT"
        if self.step_status(key) != "NEEDS_REVIEW":
            return "INVALID_STATE"
        return None

    # The world moves

    def time_passes(self) -> None:
        ms = self.draw([1_000, 5_000, 12_000, 40_000])
        self.db.advance(ms)
        self.drain()

    def a_worker_answers(self) -> None:
        answer = self.draw(self.answers)
        got = pulse.task_claim(self.db.conn, "w1", "payments", limit=1, lease_ms=LEASE_MS)
        if not got:
            return
        attempt = got[0]["attempt_id"]
        # The report is consumed at once, or, while the engine holds the instance, left in the inbox for it.
        with self.world.held(self.wf) if self.draw([False, False, True]) else contextlib.nullcontext():
            if answer in ("PENDING", "DONE", "MANUAL"):
                pulse.attempt_complete(self.db.conn, attempt, "w1", {"status": answer, "output": {"answer": answer}})
            elif answer in ("RETRY", "FAIL"):
                pulse.attempt_fail(self.db.conn, attempt, "w1", "upstream said no", retryable=answer == "RETRY")
        self.drain()  # VANISH: the lease runs out as the clock moves (K-4)

    def a_signal_comes(self) -> None:
        final, stale = self.draw([False, False, True]), self.draw([False, False, False, True])
        status = self.draw(["DONE", "MANUAL"])
        step = "check" if final else "approval"
        seq = self.db.scalar("SELECT GREATEST(activation_seq, 1) FROM weave_steps WHERE instance_id = %s "
                             "AND step_key = %s", self.iid, step)
        fields = ({"name": "payment.final", "payload": json.dumps({"status": status, "output": {"by": "signal"}})}
                  if final else {"name": "approval.decided", "payload": '{"approved": true}'})
        try:
            # Settled at acceptance, or accepted inside a caller's transaction and left to a runner (S-16).
            send(self.world, self.wf, target_step_key=step, target_activation_sequence=max(seq - stale, 1),
                 queued=self.draw([False, False, True]), **fields)
        except errors.WeaveError as exc:  # a refusal at acceptance is a documented answer, never a server error
            assert exc.http_status < 500, exc
        self.drain()

    def a_decision_keeps_failing(self) -> None:
        """A fault (a routine from another build, a server setting) fails one of the instance's due decisions three
        times in a row the same way, as the orchestrator books them (R-12): it goes to review as CANDIDATE_FAILING,
        on its step while that step is active, else on the instance itself (R-18). The decisions made after it run
        on the build's own routines again, as after a fix."""
        found = self.db.rows(
            "SELECT 'CHECKPOINT' AS class, id FROM weave_pending_advances WHERE instance_id = %s UNION ALL "
            "SELECT 'SIGNAL', id FROM weave_signals WHERE instance_id = %s AND status = 'PENDING' UNION ALL "
            "SELECT 'INBOX', id FROM pulse_inbox WHERE instance_id = %s AND state = 'PENDING' ORDER BY 1, 2",
            self.iid, self.iid, self.iid)
        if not found:
            return
        pick = self.draw(found)
        table = {"CHECKPOINT": "weave_pending_advances", "SIGNAL": "weave_signals", "INBOX": "pulse_inbox"}
        for _ in range(3):
            version = self.db.scalar(f"SELECT version FROM {table[pick['class']]} WHERE id = %s", pick["id"])
            if version is None:
                return
            dbmod.call(self.db.conn, "weave_candidate_fail", pick["class"], pick["id"], version,
                          "INVALID_STATE: a fault of the walk")
        self.history.append(f"{pick['class']} {pick['id']} failed three times")

    # The operator acts

    def pause_or_resume(self) -> None:
        pause = self.draw([False, True])
        status = self.instance_row()["status"]
        expected = None if status in ("RUNNING", "NEEDS_REVIEW") else "INVALID_STATE"
        routine = routines.instance_pause if pause else routines.instance_resume
        if self.act(routine, expected=expected):
            assert self.instance_row()["control"] == ("PAUSED" if pause else "ACTIVE")
        self.drain()

    def cancel(self) -> None:
        status = self.instance_row()["status"]
        if self.act(routines.instance_cancel, expected="INVALID_STATE" if status == "SUCCEEDED" else None):
            after = self.instance_row()
            assert after["status"] in ("CANCELLING", "CANCELLED") and after["gate"] == "CLOSED"
            assert (after["status"] == "CANCELLED") == (status == "CANCELLED" or self.unsettled() == 0), after
        self.drain()

    def deadline(self) -> None:
        later = self.draw([False, True])
        row = self.instance_row()
        if row["status"] not in ("RUNNING", "NEEDS_REVIEW"):
            expected = "INVALID_STATE"
        else:
            expected = None if later else "DEADLINE_INVALID"  # later only
        moved = row["deadline_at"] + dt.timedelta(hours=1 if later else -1)
        if self.act(routines.instance_deadline, expected=expected, deadline_at=moved):
            assert self.instance_row()["deadline_at"] == moved
        self.drain()

    def a_step(self) -> str:
        """Mostly a step in review, as an operator would pick; sometimes any step."""
        in_review = [r["step_key"] for r in self.db.rows(
            "SELECT step_key FROM weave_steps WHERE instance_id = %s AND status = 'NEEDS_REVIEW' ORDER BY step_key",
            self.iid)]
        pick = in_review and self.draw([True, True, True, False])
        return self.draw(in_review if pick else STEPS)

    def reactivate(self) -> None:
        key = self.a_step()
        before = self.db.scalar("SELECT activation_seq FROM weave_steps WHERE instance_id = %s AND step_key = %s",
                                self.iid, key)
        expected = self.recovery_refusal(key)
        if expected is None and self.db.now() >= self.instance_row()["deadline_at"]:
            expected = "INVALID_STATE"  # new work past the instance deadline: move the deadline first
        if self.act(routines.step_reactivate, key, expected=expected):
            after = self.db.row("SELECT status, activation_seq FROM weave_steps WHERE instance_id = %s "
                                "AND step_key = %s", self.iid, key)
            assert after["activation_seq"] == before + 1 and after["status"] in ("PENDING", "ACTIVE"), after
        self.drain()

    def resolve(self) -> None:
        key = self.a_step()
        if self.act(routines.step_resolve, key, expected=self.recovery_refusal(key), output={"by": "operator"}):
            assert self.step_status(key) == "SUCCEEDED"
        self.drain()

    def continue_the_poll(self) -> None:
        expected = self.recovery_refusal("check")
        if expected is None:
            poll = self.db.row("SELECT p.state, p.stop_reason, r.outcome FROM weave_steps s "
                               "JOIN weave_poll_states p ON p.activation_id = s.activation_id "
                               "LEFT JOIN weave_poll_rounds r ON r.activation_id = p.activation_id "
                               "AND r.round_no = p.rounds_used WHERE s.instance_id = %s AND s.step_key = 'check'",
                               self.iid)
            if (poll is None or poll["state"] != "STOPPED" or poll["outcome"] != "POLL_PENDING"
                    or poll["stop_reason"] not in ("POLL_ROUNDS_EXHAUSTED", "POLL_DEADLINE",
                                                   "POLL_DEADLINE_IN_FLIGHT")):
                expected = "INVALID_STATE"
            elif self.db.now() + dt.timedelta(seconds=30) > self.instance_row()["deadline_at"]:
                expected = "DEADLINE_INVALID"  # the poll deadline must fall within the instance's
        if self.act(routines.step_continue, "check", expected=expected, extra_rounds=1, poll_deadline_ms=30_000):
            assert self.step_status("check") == "ACTIVE"
        self.drain()

    def instance_failing(self) -> int:
        """The reasons open that retry closes: the instance's own, and those of a step in review for a failing decision
        alone that can go on in its activation (what it waits for is still there: its task, its open wait, its poll
        not stopped, or stopped by a PENDING answer recorded in review, with rounds and time left)."""
        return len(self.retry_closes())

    def retry_closes(self) -> list[str]:
        """The step keys ('' for the instance itself) of the open reasons retry closes."""
        return [r["step_key"] for r in self.db.rows(
            "SELECT r.step_key FROM weave_review_reasons r LEFT JOIN weave_steps s ON s.instance_id = r.instance_id "
            "AND s.step_key = r.step_key LEFT JOIN weave_activations a ON a.id = s.activation_id "
            "WHERE r.instance_id = %s AND r.closed_at IS NULL AND r.code IN %s AND (r.step_key = '' OR ("
            " r.code = 'CANDIDATE_FAILING' AND s.status = 'NEEDS_REVIEW' AND a.ended_at IS NULL"
            " AND NOT EXISTS (SELECT 1 FROM weave_review_reasons o WHERE o.instance_id = r.instance_id"
            "   AND o.step_key = r.step_key AND o.closed_at IS NULL AND o.code <> 'CANDIDATE_FAILING')"
            " AND (EXISTS (SELECT 1 FROM pulse_tasks t WHERE t.activation_id = a.id AND s.type = 'TASK')"
            "   OR EXISTS (SELECT 1 FROM weave_waits w WHERE w.activation_id = a.id AND w.kind = s.type"
            "              AND w.status = 'WAITING')"
            "   OR EXISTS (SELECT 1 FROM weave_poll_states p WHERE p.activation_id = a.id"
            "              AND (p.state IN ('WAITING', 'IN_FLIGHT')"
            "                   OR (p.state = 'STOPPED' AND p.stop_reason IS NULL AND p.rounds_used < p.max_rounds"
            "                       AND EXISTS (SELECT 1 FROM weave_poll_rounds n WHERE n.activation_id = a.id"
            "                                   AND n.round_no = p.rounds_used AND n.outcome = 'POLL_PENDING'"
            "                                   AND n.result_at < p.poll_deadline)))))))", self.iid, RETRY_CLOSES)]

    def retry(self) -> None:
        status = self.instance_row()["status"]
        closes = self.retry_closes()
        steps = sorted({key for key in closes if key})
        expected = None if status == "NEEDS_REVIEW" and closes else "INVALID_STATE"
        if self.act(routines.instance_retry, expected=expected):
            assert self.instance_failing() == 0
            # Each step it closed a reason of goes on in the activation it had.
            assert [self.step_status(key) for key in steps] == ["ACTIVE"] * len(steps), steps
            self.tally["instance_retry", "a step went on"] += len(steps)
        self.drain()

    def an_action_is_repeated(self) -> None:
        if not self.done:
            return
        routine, args, kwargs, key = self.draw(self.done)
        before = self.fingerprint()
        answer = routine(self.db.conn, self.world.token, self.world.namespace, self.wf, *args, "as drawn", key,
                         **kwargs)
        assert answer["replayed"] == 1 and self.fingerprint() == before, routine.__name__

    # Which happens next: the world moves more often than an operator acts, an operator acts mostly on an instance
    # in review, and a cancel, which ends the story, is the rarest.
    WEIGHTS = {"time_passes": 4, "a_worker_answers": 5, "a_signal_comes": 3, "pause_or_resume": 1, "deadline": 1,
               "an_action_is_repeated": 1, "cancel": 0.1, "reactivate": 1, "resolve": 1, "continue_the_poll": 1,
               "a_decision_keeps_failing": 0.3, "retry": 0.5}
    IN_REVIEW = {**WEIGHTS, "deadline": 3, "reactivate": 6, "resolve": 4, "continue_the_poll": 6, "retry": 3}

    def step(self) -> None:
        weights = {**(self.IN_REVIEW if self.instance_row()["status"] == "NEEDS_REVIEW" else self.WEIGHTS),
                   "a_signal_comes": self.signals}
        (what,) = self.rng.choices(list(weights), list(weights.values()))
        self.history.append(what)
        getattr(self, what)()
        self.the_engine_promises_hold()

    # What always holds

    def the_engine_promises_hold(self) -> None:
        invariants.check(self.db.conn)
        status = self.instance_row()["status"]
        if self.seen_final:
            assert status == self.seen_final, f"{self.seen_final} became {status}"
        if status in FINAL:
            self.seen_final = status
        steps = {r["step_key"]: r["status"] for r in self.db.rows(
            "SELECT step_key, status FROM weave_steps WHERE instance_id = %s", self.iid)}
        if status == "SUCCEEDED":
            assert set(steps.values()) == {"SUCCEEDED"}, steps
        now = self.db.row("SELECT status, (SELECT COUNT(*) FROM weave_review_reasons r WHERE r.instance_id = i.id "
                          "AND r.closed_at IS NULL) AS reasons FROM weave_instances i WHERE i.id = %s", self.iid)
        # A reason opened while the cancel runs (a decision it waits for keeps failing) is kept with the instance,
        # which is not in review (M-4.23).
        if now["status"] not in ("CANCELLING", "CANCELLED"):
            assert (now["status"] == "NEEDS_REVIEW") == (now["reasons"] > 0), now

    def settle(self) -> str:
        """Drives the instance to rest: resumed, every task answered DONE, every wait given its time."""
        row = self.instance_row()
        if row["control"] == "PAUSED" and row["status"] in ("RUNNING", "NEEDS_REVIEW"):
            routines.instance_resume(self.db.conn, self.world.token, self.world.namespace, self.wf, "at rest",
                                     f"op-{next(self.keys)}")
        for _ in range(12):
            for got in pulse.task_claim(self.db.conn, "w1", "payments", limit=5, lease_ms=LEASE_MS):
                pulse.attempt_complete(self.db.conn, got["attempt_id"], "w1", {"status": "DONE"})
            self.db.advance(40_000)
            self.drain()
        status = self.instance_row()["status"]
        assert status in ("SUCCEEDED", "CANCELLED", "NEEDS_REVIEW"), f"left {status} with nothing to do"
        return status

    def rest(self) -> str:
        """Settles the instance, then has an operator clear every review: whatever the history, a person can
        always finish the instance. Answers where the walk itself had left it."""
        status = self.settle()
        for _ in range(6):
            if self.instance_row()["status"] != "NEEDS_REVIEW":
                break
            if self.db.now() >= self.instance_row()["deadline_at"] or self.db.scalar(
                    "SELECT COUNT(*) FROM weave_review_reasons WHERE instance_id = %s AND closed_at IS NULL "
                    "AND code = 'INSTANCE_DEADLINE'", self.iid):
                moved = self.instance_row()["deadline_at"] + dt.timedelta(hours=1)
                self.act(routines.instance_deadline, expected=None, deadline_at=moved)
            if self.instance_failing():
                self.act(routines.instance_retry, expected=None)
            for key in STEPS:
                if self.step_status(key) == "NEEDS_REVIEW":
                    self.act(routines.step_resolve, key, expected=self.recovery_refusal(key), output={"by": "rest"})
            self.settle()
        final = self.instance_row()["status"]
        assert final in FINAL, f"an operator could not finish the instance: {final}"
        if final == "SUCCEEDED":
            assert status != "CANCELLED"
        # A settled instance leaves nothing open: no task, wait, signal, checkpoint or report.
        left = self.db.row(
            "SELECT (SELECT COUNT(*) FROM pulse_tasks WHERE instance_id = %s AND status IN ('QUEUED', 'RUNNING'))"
            " AS tasks, (SELECT COUNT(*) FROM weave_waits WHERE instance_id = %s AND status = 'WAITING') AS waits,"
            " (SELECT COUNT(*) FROM weave_signals WHERE instance_id = %s AND status = 'PENDING') AS signals,"
            " (SELECT COUNT(*) FROM weave_pending_advances WHERE instance_id = %s) AS checkpoints,"
            " (SELECT COUNT(*) FROM pulse_inbox WHERE instance_id = %s AND state = 'PENDING') AS inbox",
            *[self.iid] * 5)
        assert set(left.values()) == {0}, (final, left)
        # The table's right-hand columns: what each action answers once the instance has settled.
        for action in ("cancel", "pause_or_resume", "deadline", "resolve", "retry"):
            getattr(self, action)()
            self.the_engine_promises_hold()
        invariants.check(self.db.conn)
        return status


class RacingWalk(Walk):
    """A walk whose instance two orchestrators advance in threads of their own while the walk acts: an action
    meets the state under its locks, not the state read before it, so only what holds whatever the interleaving
    is checked: a refusal is one an action may answer, never a server error or a lock conflict (R-3's order
    leaves none to retry), and the invariants, the final statuses and the end at rest are as in every walk."""

    REFUSALS = frozenset({"INVALID_STATE", "TASK_IN_FLIGHT", "DEADLINE_INVALID", "INVALID_ARGUMENT"})

    def __init__(self, db, orch, seed: int, tally: collections.Counter, database):
        super().__init__(db, orch, seed, tally)
        self.runners = [Orchestrator(database, concurrency=2, idle_max_ms=20) for _ in range(2)]
        self.threads = [threading.Thread(target=runner.run, daemon=True) for runner in self.runners]
        for thread in self.threads:
            thread.start()

    def act(self, routine, *args, expected: str | None, **kwargs) -> bool:
        key = f"op-{next(self.keys)}"
        got = code_of(lambda: routine(self.db.conn, self.world.token, self.world.namespace, self.wf, *args,
                                      "as drawn", key, **kwargs))
        assert got is None or got in self.REFUSALS, (routine.__name__, args, got)
        self.tally[routine.__name__, got or "taken"] += 1
        self.history.append(f"{routine.__name__} {args} -> {got or 'taken'}")
        if got is None:
            self.done.append((routine, args, kwargs, key))
        return False  # the runners may have moved on already: what it did is checked by the invariants

    def drain(self) -> None:
        if hasattr(self, "runners") and not self.runners[0].stopping.is_set():
            return  # the runners advance what is due, as it comes
        super().drain()

    def an_action_is_repeated(self) -> None:
        if self.done:
            routine, args, kwargs, key = self.draw(self.done)
            answer = routine(self.db.conn, self.world.token, self.world.namespace, self.wf, *args, "as drawn", key,
                             **kwargs)
            assert answer["replayed"] == 1, routine.__name__

    def stop(self) -> None:
        alive = [thread.is_alive() for thread in self.threads]
        for runner in self.runners:
            runner.stop()
        for thread in self.threads:
            thread.join()
        for runner in self.runners:
            runner.close()
        assert all(alive), "an orchestrator stopped by itself"
        for runner in self.runners:
            assert not {k: v for k, v in runner.stats.items() if k.endswith("FAILED") and v}, runner.stats
            self.tally.update({("runner", k): v for k, v in runner.stats.items()})


def test_C6_R18_every_action_answers_as_the_table_says_and_nothing_stalls(db, orch):
    tally: collections.Counter = collections.Counter()
    ends = collections.Counter()
    for seed in WALKS:
        walk = Walk(db, orch, seed, tally)
        with walks.told(seed, walk):
            for _ in range(STEPS_PER_WALK):
                walk.step()
            ends[walk.rest()] += 1
    # The walks went where the table has something to say: each action taken, and refused for each reason.
    for routine in ("instance_pause", "instance_resume", "instance_cancel", "instance_deadline", "step_reactivate",
                    "step_resolve", "step_continue", "instance_retry"):
        assert tally[routine, "taken"] and tally[routine, "INVALID_STATE"], (routine, tally)
    assert sum(tally[routine, "TASK_IN_FLIGHT"] for routine in ("step_reactivate", "step_resolve", "step_continue"))
    assert tally["instance_retry", "a step went on"], tally
    assert len(ends) > 1, ends


def test_C6_R3_actions_racing_two_orchestrators_keep_every_promise(db, orch, database):
    tally: collections.Counter = collections.Counter()
    for seed in RACING_WALKS:
        walk = RacingWalk(db, orch, 1000 + seed, tally, database)  # draws apart from the walks above
        with walks.told(seed, walk):
            try:
                for _ in range(STEPS_PER_WALK):
                    walk.step()
            finally:
                walk.stop()
            walk.rest()
    # The runners did the work, racing each other (BUSY) and the walk's actions.
    assert tally["step_reactivate", "taken"] and tally["instance_pause", "taken"], tally
    assert tally["runner", "CHECKPOINT:SETTLED"] and tally["runner", "CHECKPOINT:BUSY"], tally
