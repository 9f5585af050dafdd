"""Property: the final-signal race of a POLL ends as the stored times say, whoever looks first (F-9).

Hypothesis draws what the round's query does (answers PENDING, the signal's own result, another final result,
fails, loses its lease, or never starts), the signal's status class, which of the two was stored first, whether
the orchestrator looked in between, and the order in which the three candidates that can decide (the POLL
checkpoint, the inbox event, the signal) are advanced afterwards. The expected end is computed from the stored
order alone (the F table as a small model); the M-4 invariants are checked after every example.
"""

from __future__ import annotations

import json
from itertools import permutations

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from procedures import invariants, pulse, signals
from tests.support.db import reset
from tests.support.signals import send
from tests.support.world import World

LEASE_MS = 10_000
FLOW = {"name": "race", "steps": [{
    "key": "check", "type": "POLL", "queue": "payments", "handler": "example.poll", "handler_version": "1",
    "input": {"order_id": "$.input.order_id"}, "interval_ms": 30_000, "max_rounds": 3,
    "timeout_ms": 3_600_000, "task_timeout_ms": 600_000,
    "retry": {"max_attempts": 3, "initial_backoff_ms": 1_000, "backoff_coefficient": 1.0, "max_backoff_ms": 1_000},
    "result": {"pending": ["PENDING"], "success": ["PAID", "DONE"], "review": ["MANUAL_CHECK"]},
    "final_signal": {"name": "payment.final", "payload_version": "1", "correlation": "$.input.order_id"}}]}
OTHER = {"status": "DONE", "output": {"other": True}}

QUERIES = st.sampled_from(["PENDING", "SAME", "OTHER", "FAIL", "LOST", "NOT_STARTED"])
ORDERS = st.sampled_from(list(permutations(["checkpoint", "inbox", "signal"])))


def expected(query: str, signal_status: str, signal_first: bool) -> tuple[str, str | None, bool]:
    """(step status, review code, signal consumed?) by the F table, from the stored order alone."""
    adopt = ("SUCCEEDED", None, True) if signal_status == "PAID" else ("NEEDS_REVIEW", "POLL_REVIEW_VALUE", True)
    if query == "NOT_STARTED":
        return adopt  # F-3: the round is cancelled, its CANCELLED outcome collected, the signal adopted
    if signal_first:
        return {"PENDING": adopt, "SAME": adopt, "FAIL": adopt,  # F-5
                "OTHER": ("NEEDS_REVIEW", "FINAL_RESULT_CONFLICT", True),  # F-6
                "LOST": ("NEEDS_REVIEW", "POLL_UNKNOWN", True)}[query]
    return {"PENDING": adopt,  # F-2: when the signal came, no query was out
            "SAME": ("SUCCEEDED", None, False) if signal_status == "PAID"
            else ("NEEDS_REVIEW", "POLL_REVIEW_VALUE", False),  # F-1
            "OTHER": ("SUCCEEDED", None, False),  # F-1
            "FAIL": ("NEEDS_REVIEW", "POLL_FAILED", False),
            "LOST": ("NEEDS_REVIEW", "POLL_UNKNOWN", False)}[query]


def look(world: World, wf: str, signal_id: int, order: tuple[str, ...]) -> None:
    """Advance each deciding candidate once, in the drawn order (each checks its own due time and state)."""
    db = world.db
    iid = world.internal_id(wf)
    for what in order:
        if what == "checkpoint":
            cp = db.scalar("SELECT id FROM weave_pending_advances WHERE instance_id = %s AND step_key = 'check'", iid)
            if cp is not None:
                db.one("weave_checkpoint_advance", cp)
        elif what == "inbox":
            inbox = db.scalar("SELECT id FROM pulse_inbox WHERE state = 'PENDING' ORDER BY occurred_at, id LIMIT 1")
            if inbox is not None:
                pulse.inbox_consume(db.conn, inbox)
        elif signal_id and db.scalar("SELECT status FROM weave_signals WHERE id = %s", signal_id) == "PENDING":
            signals.process(db.conn, signal_id)


@settings(max_examples=150, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=QUERIES, signal_status=st.sampled_from(["PAID", "MANUAL_CHECK"]), signal_first=st.booleans(),
       look_between=st.booleans(), order=ORDERS)
def test_F9_the_end_depends_on_stored_times_only(db, orch, query, signal_status, signal_first, look_between, order):
    reset(db.conn)
    world = World.create(db)
    world.publish(FLOW)
    wf = world.start("race", {"order_id": "o-1"})
    orch.drain()
    payload = {"status": signal_status, "output": {"receipt": "r-1", "amount": 12.5}}
    attempt = None
    if query != "NOT_STARTED":
        attempt = pulse.task_claim(db.conn, "w", "payments", limit=1, lease_ms=LEASE_MS)[0]["attempt_id"]
    db.advance(1_000)
    signal_id = 0

    def send_signal() -> None:
        nonlocal signal_id
        receipt = send(world, wf, name="payment.final", payload_version="1", target_step_key="check",
                       correlation_key="o-1", payload=json.dumps(payload))
        signal_id = int(receipt["signal_id"].removeprefix("sig_"))

    def query_ends() -> None:
        if query in ("PENDING", "SAME", "OTHER"):
            result = {"PENDING": {"status": "PENDING"}, "SAME": payload, "OTHER": OTHER}[query]
            pulse.attempt_complete(db.conn, attempt, "w", result)
        elif query == "FAIL":
            pulse.attempt_fail(db.conn, attempt, "w", "upstream said 400", retryable=False)
        elif query == "LOST":
            db.advance(LEASE_MS + 1)
            pulse.lease_recover(db.conn, attempt)

    first, second = (send_signal, query_ends) if signal_first else (query_ends, send_signal)
    first()
    if look_between:
        look(world, wf, signal_id, order)
    db.advance(1_000)
    second()
    db.advance(1_000)
    look(world, wf, signal_id, order)
    for _ in range(3):  # whatever was deferred or left for its own candidate class
        db.advance(2_000)
        orch.drain()

    status, code, consumed = expected(query, signal_status, signal_first or query == "NOT_STARTED")
    event(f"{query} {signal_status} {'signal' if signal_first else 'query'} first: {code or status}")
    inst = world.instance(wf)
    step = inst["steps"][0]
    codes = [r["code"] for r in inst["review_reasons"]]
    case = (query, signal_status, signal_first, look_between, order)
    assert (step["status"], codes) == (status, [code] if code else []), case
    sig = db.row("SELECT status, disposition FROM weave_signals WHERE id = %s", signal_id)
    wait = db.row("SELECT status, winner_signal_id FROM weave_waits WHERE kind = 'POLL_FINAL'")
    if consumed:
        assert sig["status"] == "CONSUMED" and wait == {"status": "SATISFIED", "winner_signal_id": signal_id}, case
        if status == "SUCCEEDED":
            assert step["output"] == payload, case
    else:
        # The label says what was known when the signal was looked at: a step or instance already settled
        # answers at acceptance; a query result stored first but not yet consumed answers QUERY_SETTLED.
        assert sig["status"] == "REJECTED", case
        assert sig["disposition"] in ("QUERY_SETTLED", "STEP_SETTLED", "INSTANCE_SETTLED"), case
        assert wait["winner_signal_id"] is None, case
        if status == "SUCCEEDED":
            assert step["output"] == (payload if query == "SAME" else OTHER), case
    assert step["poll"]["rounds_used"] == 1 and step["poll"]["current_task_id"] is None, case
    assert db.scalar("SELECT COUNT(*) FROM pulse_tasks WHERE status IN ('QUEUED', 'RUNNING')") == 0, case
    invariants.check(db.conn)
