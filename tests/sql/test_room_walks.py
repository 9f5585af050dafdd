"""Property: work deferred for room is never forgotten (R-8, R-18, K-1).

Seeded random walks run several instances of a flow whose TASKs share mutex keys and whose POLL runs rounds, on
one queue and one app whose capacity, quota and status an administrator keeps changing (down to a single slot,
and the app disabled for a while), while a worker claims and answers, vanishes or fails, time moves, and an
operator pauses, resumes and cancels. The M-4 invariants (among them the task counters and slot stripes of M-4.6,
M-4.7 and M-4.7b) hold after every step. At the end the administrator gives room back and the instances are
driven to rest: every instance must end SUCCEEDED, CANCELLED or NEEDS_REVIEW with its reason, and one that met no
failure must have SUCCEEDED: an instance deferred for room must come back once there is room, whatever the order
in which slots were taken and given back.

A failure names its walk and prints its history.
"""

from __future__ import annotations

from procedures import errors, invariants, pulse, routines
from tests.support import walks
from tests.support.world import World

LEASE_MS = 10_000
FLOW = {"name": "busy", "steps": [
    {"key": "reserve", "type": "TASK", "queue": "payments", "handler": "example.echo", "handler_version": "1",
     "input": {"order": "$.input.order"}, "mutex_key": "$.input.account", "business_key": "$.input.order",
     "task_timeout_ms": 3_600_000, "retry": {"max_attempts": 3, "initial_backoff_ms": 500}},
    {"key": "settle", "type": "POLL", "after": ["reserve"], "queue": "payments", "handler": "example.poll",
     "handler_version": "1", "input": {"order": "$.input.order"}, "interval_ms": 2_000, "max_rounds": 4,
     "timeout_ms": 3_600_000, "task_timeout_ms": 3_600_000, "retry": {"max_attempts": 3, "initial_backoff_ms": 500},
     "result": {"pending": ["PENDING"], "success": ["DONE"]}},
    {"key": "notify", "type": "TASK", "after": ["settle"], "queue": "payments", "handler": "example.echo",
     "handler_version": "1", "input": {"order": "$.input.order"}, "mutex_key": "$.input.account",
     "task_timeout_ms": 3_600_000, "retry": {"max_attempts": 3, "initial_backoff_ms": 500}}]}
WALKS, STEPS_PER_WALK, INSTANCES = walks.seeds(30), 40, 6
# A walk's failures may send an instance to review; any other instance must finish. Tasks may wait an hour for
# room (K-6), longer than any walk lasts, so waiting for room never ends one.
FAILURES = ("FAIL", "VANISH")
MAX_ROUNDS = FLOW["steps"][1]["max_rounds"]


class Walk(walks.Walk):
    def __init__(self, db, orch, seed: int):
        super().__init__(db, orch, seed)
        self.world = World.create(db, quota=3, capacity=2)
        self.world.publish(FLOW)
        self.ids = [self.world.start("busy", {"order": f"o-{n}", "account": f"acct-{n % 2}"}) for n in range(INSTANCES)]
        self.failed: set[str] = set()  # instances a failure or a cancel touched
        self.keys = 0
        self.drain()

    def owner(self, attempt: dict) -> str:
        return "wf_" + str(self.db.scalar("SELECT t.instance_id FROM pulse_attempts a JOIN pulse_tasks t "
                                          "ON t.id = a.task_id WHERE a.id = %s", attempt["attempt_id"]))

    # What happens

    def time_passes(self) -> None:
        self.db.advance(self.draw([500, 2_000, 10_000, 30_000]))
        self.drain()

    def a_worker_answers(self) -> None:
        for attempt in pulse.task_claim(self.db.conn, "w1", "payments", limit=self.draw([1, 2, 3]),
                                        lease_ms=LEASE_MS):
            answer = self.draw(["DONE", "DONE", "PENDING", "RETRY", "FAIL", "VANISH"])
            self.history.append(f"  {self.owner(attempt)} {attempt.get('step_key')}: {answer}")
            if answer in FAILURES or (answer == "PENDING" and attempt["round_no"] == MAX_ROUNDS):
                self.failed.add(self.owner(attempt))  # a PENDING last round is a review too (P-9)
            if answer in ("DONE", "PENDING"):
                pulse.attempt_complete(self.db.conn, attempt["attempt_id"], "w1", {"status": answer})
            elif answer in ("RETRY", "FAIL"):
                pulse.attempt_fail(self.db.conn, attempt["attempt_id"], "w1", "upstream said no",
                                   retryable=answer == "RETRY")
                if self.db.scalar("SELECT t.status FROM pulse_attempts a JOIN pulse_tasks t ON t.id = a.task_id "
                                  "WHERE a.id = %s", attempt["attempt_id"]) != "QUEUED":
                    self.failed.add(self.owner(attempt))  # its last attempt: no retry is left
        self.drain()

    def room_changes(self) -> None:
        admin, ns = self.world.admin, self.world.namespace
        what = self.draw(["capacity", "quota", "status"])
        if what == "capacity":
            routines.queue_put(self.db.conn, admin, ns, "payments", self.draw([1, 1, 2, 5]))
        elif what == "quota":
            routines.app_put(self.db.conn, admin, ns, "billing", self.draw([1, 1, 3, 10]))
        else:
            routines.app_put(self.db.conn, admin, ns, "billing", self.db.scalar(
                "SELECT max_in_flight FROM weave_apps WHERE name = 'billing'"), self.draw(["ACTIVE", "DISABLED"]))
        self.drain()

    def operator_acts(self) -> None:
        wf = self.draw(self.ids)
        action = self.draw([routines.instance_pause, routines.instance_resume, routines.instance_resume,
                            routines.instance_cancel])
        self.keys += 1
        try:
            action(self.db.conn, self.world.token, self.world.namespace, wf, "as drawn", f"op-{self.keys}")
        except errors.InvalidState:
            return
        if action is routines.instance_cancel:
            self.failed.add(wf)
        self.drain()

    WEIGHTS = {"time_passes": 3, "a_worker_answers": 5, "room_changes": 2, "operator_acts": 1}

    def step(self) -> None:
        (what,) = self.rng.choices(list(self.WEIGHTS), list(self.WEIGHTS.values()))
        self.history.append(what)
        getattr(self, what)()
        invariants.check(self.db.conn)

    def rest(self) -> dict[str, str]:
        """Room given back, every instance resumed, every task answered DONE: where does each end?"""
        admin, ns = self.world.admin, self.world.namespace
        routines.queue_put(self.db.conn, admin, ns, "payments", 10)
        routines.app_put(self.db.conn, admin, ns, "billing", 10, "ACTIVE")
        for wf in self.ids:
            self.keys += 1
            try:
                routines.instance_resume(self.db.conn, self.world.token, ns, wf, "at rest", f"op-{self.keys}")
            except errors.InvalidState:
                pass
        for _ in range(20):
            for attempt in pulse.task_claim(self.db.conn, "w1", "payments", limit=10, lease_ms=LEASE_MS):
                pulse.attempt_complete(self.db.conn, attempt["attempt_id"], "w1", {"status": "DONE"})
            self.db.advance(30_000)
            self.drain()
        invariants.check(self.db.conn)
        ends = {wf: self.world.instance(wf)["status"] for wf in self.ids}
        for wf, status in ends.items():
            assert status in ("SUCCEEDED", "CANCELLED", "NEEDS_REVIEW"), (wf, status, self.world.instance(wf))
            if wf not in self.failed:
                assert status == "SUCCEEDED", (wf, status, self.world.instance(wf)["review_reasons"])
        assert self.db.scalar("SELECT COUNT(*) FROM pulse_tasks WHERE status IN ('QUEUED', 'RUNNING')") == 0
        return ends


def test_R8_R18_work_deferred_for_room_always_comes_back(db, orch):
    ends: dict[str, int] = {}
    deferred = 0
    for seed in WALKS:
        walk = Walk(db, orch, seed)
        with walks.told(seed, walk):
            for _ in range(STEPS_PER_WALK):
                walk.step()
                deferred += db.scalar("SELECT COUNT(*) FROM weave_pending_advances WHERE deferred_reason IS NOT NULL")
            for status in walk.rest().values():
                ends[status] = ends.get(status, 0) + 1
    # The walks met what they are about: deferrals for room, and more than one end.
    assert deferred > 0 and ends.get("SUCCEEDED", 0) > 0 and len(ends) > 1, (deferred, ends)
