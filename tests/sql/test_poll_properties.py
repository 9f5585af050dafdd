"""Property: whatever a POLL's handler answers and however the clock moves, the budgets of the P-3 table hold.

Hypothesis draws sequences of handler outcomes (PENDING, consumed in time or only after its interval, a
success status, a retryable failure, a non-retryable failure, a lost lease) and clock moves. The test
computes the expected end state from the sequence alone (a small model of P-2, P-3, P-8, P-9 and the
poll deadline), drives the real routines with the test clock, and checks the end state and the M-4
invariants (M-4.3 rounds in flight and rounds used, M-4.4 gap-free rounds, M-4.5 attempts within the
frozen budget) after every example.

Clock moves are chosen so that only the "long" move can reach the poll deadline: the poll deadline is
1,500 s after activation, one long move is 1,000 s and everything else in a sequence adds at most ~400 s,
so the deadline is crossed exactly when two long moves happened, whatever real time passes meanwhile.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from procedures import invariants, pulse
from tests.support.db import reset
from tests.support.world import World

MAX_ROUNDS = 3
MAX_ATTEMPTS = 2
INTERVAL_MS = 1_000
LEASE_MS = 10_000
LONG_MS = 1_000_000
FLOW = {"name": "prop", "steps": [{
    "key": "check", "type": "POLL", "queue": "payments", "handler": "example.poll", "handler_version": "1",
    "input": {"order_id": "$.input.order_id"}, "interval_ms": INTERVAL_MS, "max_rounds": MAX_ROUNDS,
    "timeout_ms": 1_500_000, "task_timeout_ms": 3_600_000,
    "retry": {"max_attempts": MAX_ATTEMPTS, "initial_backoff_ms": 1_000, "backoff_coefficient": 1.0,
              "max_backoff_ms": 1_000},
    "result": {"pending": ["PENDING"], "success": ["DONE"]}}]}

# Weighted so that sequences often live long enough to use up rounds and reach the deadline.
HANDLER = st.sampled_from(["PENDING", "PENDING", "PENDING", "PENDING_LATE", "RETRY", "RETRY", "DONE", "FAIL",
                           "LOST"])
MOVE = st.sampled_from([1_000, 30_000, LONG_MS, LONG_MS]).map(lambda ms: ("MOVE", ms))
SEQUENCES = st.lists(st.one_of(HANDLER, MOVE), min_size=1, max_size=12)


@dataclass
class Model:
    """What the P-3 table says should have happened, from the sequence alone."""

    rounds: int = 1
    attempts: int = 0  # of the current round's task
    total_attempts: int = 0
    waiting: bool = False  # last round answered PENDING; the next one comes after the interval
    long_moves: int = 0
    end: str | None = None  # SUCCEEDED or the review code

    def next_round(self) -> None:
        if self.waiting:
            self.rounds, self.attempts, self.waiting = self.rounds + 1, 0, False

    def move(self, ms: int) -> None:
        self.long_moves += ms == LONG_MS
        if self.long_moves >= 2:
            self.end = "POLL_DEADLINE"  # waiting between rounds, or a round that never started (P-9, P-11)
        else:
            self.next_round()  # every move is at least the interval

    def handler(self, action: str) -> None:
        self.next_round()
        self.attempts += 1
        self.total_attempts += 1
        if action in ("PENDING", "PENDING_LATE"):
            if self.rounds == MAX_ROUNDS:
                self.end = "POLL_ROUNDS_EXHAUSTED"
            else:
                self.waiting = True
                if action == "PENDING_LATE":
                    self.next_round()  # consumed after its interval: the next round starts at once
        elif action == "DONE":
            self.end = "SUCCEEDED"
        elif action == "RETRY":
            if self.attempts == MAX_ATTEMPTS:
                self.end = "POLL_FAILED"  # attempts exhausted: no new round bypasses the budget
        elif action == "FAIL":
            self.end = "POLL_FAILED"
        elif action == "LOST":
            self.end = "POLL_UNKNOWN"


def make_claimable(world: World, orch) -> None:
    """Bring the clock to the next round (after the interval) or the next attempt (after the backoff)."""
    db = world.db
    state = db.row("SELECT state, next_poll_at FROM weave_poll_states")
    if state["state"] == "WAITING":
        db.advance_to(state["next_poll_at"])
        orch.drain()
    task = db.row("SELECT status, available_at FROM pulse_tasks ORDER BY id DESC LIMIT 1")
    if task["status"] == "QUEUED" and task["available_at"] > db.now():
        db.advance_to(task["available_at"])


def run_handler(world: World, orch, action: str) -> None:
    make_claimable(world, orch)
    got = pulse.task_claim(world.db.conn, "prop-worker", "payments", limit=1, lease_ms=LEASE_MS)
    assert len(got) == 1, "the model expects a claimable round task"
    attempt = got[0]["attempt_id"]
    if action in ("PENDING", "DONE"):
        pulse.attempt_complete(world.db.conn, attempt, "prop-worker", {"status": action})
    elif action == "PENDING_LATE":  # the answer waits in the inbox until its interval is over
        pulse.attempt_complete(world.db.conn, attempt, "prop-worker", {"status": "PENDING"})
        world.db.advance(INTERVAL_MS)
    elif action in ("RETRY", "FAIL"):
        pulse.attempt_fail(world.db.conn, attempt, "prop-worker", "upstream 503", retryable=action == "RETRY")
    else:  # LOST: the worker vanishes; its lease runs out (K-4)
        world.db.advance(LEASE_MS + 1)
    orch.drain()


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sequence=SEQUENCES)
def test_P3_random_outcomes_and_clock_moves_end_where_the_budget_table_says(db, orch, sequence):
    reset(db.conn)
    world = World.create(db)
    world.publish(FLOW)
    wf = world.start("prop", {"order_id": "o-1"})
    orch.drain()
    model = Model()
    for action in sequence:
        if model.end:
            break
        if isinstance(action, tuple):
            db.advance(action[1])
            orch.drain()
            model.move(action[1])
        else:
            run_handler(world, orch, action)
            model.handler(action)

    event(f"end: {model.end or 'still polling'}, rounds {model.rounds}")
    inst = world.instance(wf)
    step = inst["steps"][0]
    poll = step["poll"]
    codes = [r["code"] for r in inst["review_reasons"]]
    tasks = db.rows("SELECT round_no, attempts_used, max_attempts, input FROM pulse_tasks ORDER BY round_no")
    assert poll["rounds_used"] == model.rounds, (sequence, model)
    assert [t["round_no"] for t in tasks] == list(range(1, model.rounds + 1))
    assert len({t["input"] for t in tasks}) == 1  # every round runs round 1's frozen input (P-4)
    assert sum(t["attempts_used"] for t in tasks) == model.total_attempts
    assert tasks[-1]["attempts_used"] == model.attempts
    if model.end is None:
        assert (inst["status"], step["status"], codes) == ("RUNNING", "ACTIVE", [])
        assert poll["state"] == ("WAITING" if model.waiting else "IN_FLIGHT")
    elif model.end == "SUCCEEDED":
        assert (inst["status"], step["status"], poll["state"]) == ("SUCCEEDED", "SUCCEEDED", "SETTLED")
        assert step["output"] == {"status": "DONE"}
    else:
        assert (inst["status"], step["status"], codes) == ("NEEDS_REVIEW", "NEEDS_REVIEW", [model.end])
        assert poll["state"] == "STOPPED" and poll["current_task_id"] is None
    assert all(r["outcome"] != "IN_FLIGHT" for r in poll["rounds"][:-1])
    invariants.check(db.conn)
