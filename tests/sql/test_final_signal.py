"""The final-signal race of a POLL (05-signals, F-1..F-9): whichever final result happened first, by stored
times, settles the step — the round's own result time against the signal's accepted_at — never the order
in which scanners happen to look. Workers are driven through the Pulse routines, signals through Send, and
the clock is the database's test clock. The M-4 invariants (M-4.1, M-4.2 and M-4.12 on winners, M-4.6 on
permits) run after each test."""

from __future__ import annotations

import contextlib
import json
from collections import Counter

import pytest

from procedures import errors, invariants, pulse, routines, signals
from tests.sql.test_polls import INTERVAL, answer, checkpoint, claim, fail, poll_flow, poll_step, review_codes, tid
from tests.support.signals import send

FINAL = {"name": "payment.final", "payload_version": "1", "correlation": "$.input.order_id"}
PAID = {"status": "PAID", "output": {"receipt": "r-1", "amount": 12.5}}


def flow(**fields) -> dict:
    return poll_flow(final_signal=FINAL, then=True, **fields)


def started(world, orch, doc=None, **start) -> str:
    doc = doc or flow()
    if doc["name"] not in world.published:
        world.publish(doc)
    wf = world.start(doc["name"], {"order_id": "o-1"}, **start)
    orch.drain()
    return wf


def final(world, wf, payload=None, seq=1, raw: str | None = None, **fields) -> dict:
    """Send the POLL's final signal (a result object) for activation ``seq``."""
    text = raw if raw is not None else json.dumps(PAID if payload is None else payload)
    args = {"name": "payment.final", "payload_version": "1", "target_step_key": "check",
            "target_activation_sequence": seq, "correlation_key": "o-1", "payload": text, **fields}
    return send(world, wf, **args)


def answered_then_final(world, orch, wf, result, gap_ms: int) -> dict:
    """The query's answer stored first, the final signal accepted ``gap_ms`` later, and only then one drain."""
    answer(world, result)
    world.db.advance(gap_ms)
    receipt = final(world, wf)
    drain(orch)
    return receipt


def final_while_query_runs(world, orch, wf, lease_ms: int, *payload, **fields) -> tuple[dict, dict]:
    """A worker claims the query's round, the final signal is accepted while it runs, and one drain follows:
    (the claimed attempt, the signal's receipt)."""
    got = claim(world, lease_ms=lease_ms)
    receipt = final(world, wf, *payload, **fields)
    drain(orch)
    return got, receipt


def sig(world, receipt: dict) -> dict:
    return world.db.row("SELECT * FROM weave_signals WHERE id = %s", int(receipt["signal_id"].removeprefix("sig_")))


def wait_row(world, seq=1) -> dict:
    return world.db.row("SELECT * FROM weave_waits WHERE kind = 'POLL_FINAL' AND activation_seq = %s", seq)


def drain(orch) -> Counter:
    """One drain; the outcome counts of just this drain."""
    before = Counter(orch.stats)
    after = orch.drain()
    return after - before


def step(world, wf, key="check") -> dict:
    return world.step(wf, key)


def advance_checkpoint(world, wf) -> str:
    cp = checkpoint(world, wf)
    return world.db.one("weave_checkpoint_advance", cp["id"])["outcome"]


def consume_inbox(world) -> str:
    inbox_id = world.db.scalar("SELECT id FROM pulse_inbox WHERE state = 'PENDING' ORDER BY occurred_at, id LIMIT 1")
    return pulse.inbox_consume(world.db.conn, inbox_id)


def adopted(world, wf, payload=PAID) -> None:
    """The POLL was settled by its final signal: output = the signal's result object, successors follow."""
    inst = world.instance(wf)
    check, after = inst["steps"]
    assert check["status"] == "SUCCEEDED" and check["output"] == payload
    assert check["poll"]["state"] == "SETTLED" and check["poll"]["current_task_id"] is None
    assert after["status"] == "ACTIVE"
    assert json.loads(world.db.scalar("SELECT input FROM pulse_tasks WHERE step_key = 'after'")) == \
        {"paid": payload.get("output")}
    assert inst["review_reasons"] == [] and checkpoint(world, wf) is None
    settled = [e for e in world.events(wf) if e["type"] == "POLL_SUCCEEDED"]
    assert len(settled) == 1 and settled[0]["data"]["settled_by"] == "FINAL_SIGNAL"


def won(world, receipt) -> None:
    row = sig(world, receipt)
    wait = wait_row(world, row["target_activation_seq"])
    assert row["status"] == "CONSUMED" and row["disposition"] is None
    assert (wait["status"], wait["winner_signal_id"]) == ("SATISFIED", row["id"])


# --- F-1 the query's final result came first ----------------------------------------------------------------------
@pytest.mark.parametrize("looks_first", ["checkpoint", "inbox"])
def test_F1_query_final_result_before_the_signal_wins_and_the_signal_is_rejected_query_settled(world, orch,
                                                                                                looks_first):
    wf = started(world, orch)
    answer(world, {"status": "DONE", "output": {"by": "query"}})  # stored; every orchestrator is down
    world.db.advance(1_000)
    receipt = final(world, wf)  # a different final result, accepted after the query's
    assert receipt["status"] == "PENDING"
    if looks_first == "checkpoint":
        assert advance_checkpoint(world, wf) == "INBOX_FIRST"  # F-9: the stored outcome is compared first
        assert sig(world, receipt)["status"] == "PENDING"
    drain(orch)
    check = step(world, wf)
    assert check["status"] == "SUCCEEDED" and check["output"] == {"status": "DONE", "output": {"by": "query"}}
    assert check["poll"]["rounds"][0]["outcome"] == "DONE"
    row = sig(world, receipt)
    assert (row["status"], row["disposition"]) == ("REJECTED", "QUERY_SETTLED")
    wait = wait_row(world)
    assert (wait["status"], wait["winner_signal_id"]) == ("CANCELLED", None) and wait["settled_at"] is not None
    closed = next(e for e in world.events(wf) if e["type"] == "POLL_FINAL_WAIT_CLOSED")
    assert closed["data"]["decision"] == "QUERY_FIRST" and closed["data"]["first_signal_id"] == receipt["signal_id"]
    assert world.db.scalar("SELECT COUNT(*) FROM weave_audit WHERE action = 'poll.final_close'") == 1
    # The wait is closed: a later final signal is answered at once.
    late = final(world, wf)
    assert (late["status"], late["disposition"]) == ("REJECTED", "STEP_SETTLED")


def test_F1_equal_times_the_query_wins(world, orch):
    wf = started(world, orch)
    answer(world, {"status": "DONE", "output": {"by": "query"}})
    receipt = final(world, wf)
    # The same microsecond, as two writers on one server can store it (the test clock keeps running).
    world.db.execute("UPDATE pulse_inbox SET occurred_at = %s", sig(world, receipt)["accepted_at"])
    drain(orch)
    assert step(world, wf)["output"] == {"status": "DONE", "output": {"by": "query"}}
    assert (sig(world, receipt)["status"], sig(world, receipt)["disposition"]) == ("REJECTED", "QUERY_SETTLED")


def test_F1_a_review_value_answered_first_wins_too_and_its_review_stays(world, orch):
    wf = started(world, orch)
    receipt = answered_then_final(world, orch, wf, {"status": "MANUAL_CHECK"}, 1)
    assert review_codes(world, wf) == ["POLL_REVIEW_VALUE"]
    assert sig(world, receipt)["disposition"] == "QUERY_SETTLED" and wait_row(world)["status"] == "CANCELLED"


def test_F1_without_any_signal_the_query_closes_the_wait(world, orch):
    wf = started(world, orch)
    answer(world, "DONE")
    drain(orch)
    assert step(world, wf)["status"] == "SUCCEEDED" and wait_row(world)["status"] == "CANCELLED"


def test_F1_an_unknown_effect_stored_first_is_never_overridden_by_a_later_signal(world, orch):
    wf = started(world, orch)
    claim(world, lease_ms=5_000)
    world.db.advance(5_001)
    assert pulse.lease_recover(world.db.conn, world.db.scalar("SELECT id FROM pulse_attempts")) == "UNKNOWN"
    world.db.advance(1_000)
    receipt = final(world, wf)  # after the lease was lost, before anyone consumed it
    drain(orch)
    assert review_codes(world, wf) == ["POLL_UNKNOWN"]
    assert (sig(world, receipt)["status"], sig(world, receipt)["disposition"]) == ("REJECTED", "QUERY_SETTLED")
    assert wait_row(world)["status"] == "CANCELLED"
    closed = next(e for e in world.events(wf) if e["type"] == "POLL_FINAL_WAIT_CLOSED")
    assert closed["data"]["decision"] == "QUERY_STOPPED_FIRST"


def test_F1_a_review_that_can_be_continued_keeps_the_wait_open(world, orch):
    """Rounds exhausted (P-9) may be continued (C-4) in the same activation, so its final wait stays open."""
    wf = started(world, orch, flow(max_rounds=1, name="one-round"))
    receipt = answered_then_final(world, orch, wf, "PENDING", 1_000)
    assert review_codes(world, wf) == ["POLL_ROUNDS_EXHAUSTED"]
    assert sig(world, receipt)["status"] == "PENDING" and wait_row(world)["status"] == "WAITING"


# --- F-2 no query in flight ---------------------------------------------------------------------------------------
def test_F2_a_final_signal_between_rounds_settles_the_poll_and_no_round_follows(world, orch):
    wf = started(world, orch)
    answer(world, "PENDING")
    drain(orch)
    assert step(world, wf)["poll"]["state"] == "WAITING"
    world.db.advance(5_000)
    receipt = final(world, wf)
    outcomes = drain(orch)
    assert outcomes["SIGNAL:ADOPTED"] + outcomes["CHECKPOINT:ADOPTED"] == 1
    adopted(world, wf)
    won(world, receipt)
    world.db.advance(10 * INTERVAL)
    drain(orch)
    poll = step(world, wf)["poll"]
    assert poll["rounds_used"] == 1 and [r["outcome"] for r in poll["rounds"]] == ["POLL_PENDING"]
    assert world.db.scalar("SELECT COUNT(*) FROM pulse_tasks WHERE step_key = 'check'") == 1
    consumed = next(e for e in world.events(wf) if e["type"] == "SIGNAL_CONSUMED")
    assert consumed["data"]["decision"] == "SIGNAL_BETWEEN_ROUNDS"
    assert world.db.scalar("SELECT COUNT(*) FROM weave_audit WHERE action = 'signal.consume'") == 1
    assert world.db.scalar("SELECT COUNT(*) FROM weave_audit WHERE action = 'poll.settle'") == 1


def test_F2_a_review_status_signal_sends_the_step_to_review_POLL_REVIEW_VALUE(world, orch):
    wf = started(world, orch)
    answer(world, "PENDING")
    drain(orch)
    receipt = final(world, wf, {"status": "MANUAL_CHECK", "output": {"why": "amount differs"}})
    drain(orch)
    inst = world.instance(wf)
    assert inst["status"] == "NEEDS_REVIEW" and inst["gate"] == "CLOSED"
    assert inst["steps"][0]["status"] == "NEEDS_REVIEW" and inst["steps"][1]["status"] == "PENDING"
    reason, = inst["review_reasons"]
    assert reason["code"] == "POLL_REVIEW_VALUE" and reason["detail"]["signal_id"] == receipt["signal_id"]
    assert reason["detail"]["signal_payload"] == {"status": "MANUAL_CHECK", "output": {"why": "amount differs"}}
    assert inst["steps"][0]["poll"]["state"] == "STOPPED"
    won(world, receipt)  # the signal was adopted: its value is what the person looks at


def test_F2_a_pending_answer_stored_before_the_signal_means_no_query_was_out(world, orch):
    """Both stored while nobody looked: PENDING first, then the signal — the poll was between rounds."""
    wf = started(world, orch)
    receipt = answered_then_final(world, orch, wf, "PENDING", 1_000)
    adopted(world, wf)
    won(world, receipt)
    assert next(e for e in world.events(wf) if e["type"] == "SIGNAL_CONSUMED")["data"]["decision"] == \
        "SIGNAL_AFTER_PENDING"


def test_F2_after_reactivate_a_signal_for_activation_1_is_stale_and_one_for_activation_2_wins(world, orch):
    """C-4: reactivate moves the final-signal generation; S-8: older signals never follow it."""
    wf = started(world, orch)
    fail(world, retryable=False)
    drain(orch)
    assert review_codes(world, wf) == ["POLL_FAILED"]
    routines.step_reactivate(world.db.conn, world.token, world.namespace, wf, "check", "remote fixed", "re-1")
    drain(orch)
    check = step(world, wf)
    assert check["activation_sequence"] == 2 and check["status"] == "ACTIVE"
    assert wait_row(world, 2)["status"] == "WAITING"
    stale = final(world, wf, seq=1)
    assert (stale["status"], stale["disposition"]) == ("REJECTED", "STALE_ACTIVATION")
    fresh = final(world, wf, seq=2)
    assert fresh["status"] == "PENDING"
    drain(orch)
    adopted(world, wf)
    won(world, fresh)
    assert sig(world, stale)["status"] == "REJECTED"
    assert [r["round_no"] for r in world.db.rows(
        "SELECT r.round_no FROM weave_poll_rounds r JOIN weave_activations a ON a.id = r.activation_id "
        "WHERE a.seq = 2")] == [1]


# --- F-3 the round has not started --------------------------------------------------------------------------------
def test_F3_signal_first_while_the_round_is_queued_cancels_it_and_adopts_once_the_cancel_is_collected(world, orch):
    wf = started(world, orch)
    task = world.db.row("SELECT * FROM pulse_tasks WHERE step_key = 'check'")
    assert task["status"] == "QUEUED"
    receipt = final(world, wf)
    assert advance_checkpoint(world, wf) == "SIGNAL_FIRST"
    won(world, receipt)
    # F-8: the wait adopted the signal; the step waits for Pulse's CANCELLED outcome.
    assert world.db.scalar("SELECT status FROM pulse_tasks WHERE id = %s", task["id"]) == "CANCELLED"
    inbox = world.db.row("SELECT * FROM pulse_inbox")
    assert (inbox["kind"], inbox["state"]) == ("CANCELLED", "PENDING")
    assert step(world, wf)["status"] == "ACTIVE" and checkpoint(world, wf) is None
    assert drain(orch)["INBOX:ADOPTED"] == 1
    adopted(world, wf)
    poll = step(world, wf)["poll"]
    assert [r["outcome"] for r in poll["rounds"]] == ["CANCELLED"] and poll["rounds_used"] == 1
    assert world.db.scalar("SELECT COUNT(*) FROM pulse_attempts") == 0  # it never ran
    assert world.db.scalar("SELECT COUNT(*) FROM pulse_tasks WHERE step_key = 'check'") == 1


def test_F3_an_early_final_signal_wins_as_soon_as_the_poll_activates(world, orch):
    """S-10: a signal sent before the POLL is active is looked at when it activates, not at the poll deadline."""
    doc = {"name": "later", "steps": [{"key": "cool_off", "type": "TIMER", "delay_ms": 60_000},
                                      *flow(after=["cool_off"])["steps"]]}
    doc["steps"][1]["after"] = ["cool_off"]
    wf = started(world, orch, doc)
    early = final(world, wf)
    wrong = final(world, wf, correlation_key="o-2")
    assert early["status"] == wrong["status"] == "PENDING"
    world.db.advance(60_000)
    drain(orch)
    inst = world.instance(wf)
    check = next(s for s in inst["steps"] if s["key"] == "check")
    assert check["status"] == "SUCCEEDED" and check["output"] == PAID
    won(world, early)
    assert (sig(world, wrong)["status"], sig(world, wrong)["disposition"]) == ("REJECTED", "CORRELATION_MISMATCH")
    assert world.db.scalar("SELECT status FROM pulse_tasks WHERE step_key = 'check'") == "CANCELLED"
    # after the early acceptances, the activation's event comes first, before what the wait's opening did with
    # those signals (its facts are complete only once the wait is open, but its number is taken with the step's).
    history = [e["type"] for e in world.events(wf) if e.get("step_key") == "check"]
    assert history == ["SIGNAL_ACCEPTED", "SIGNAL_ACCEPTED", "STEP_ACTIVATED", "SIGNALS_SETTLED", "SIGNAL_CONSUMED",
                       "POLL_SUCCEEDED"]


# --- F-4 the query is running -------------------------------------------------------------------------------------
def test_F4_signal_first_while_query_runs_saves_winner_and_waits_for_pulse(world, orch):
    wf = started(world, orch)
    got = claim(world, lease_ms=120_000)
    world.db.advance(1_000)
    receipt = final(world, wf)
    drain(orch)
    won(world, receipt)
    task = world.db.row("SELECT * FROM pulse_tasks WHERE id = %s", tid(got["task_id"]))
    assert (task["status"], task["cancel_requested"]) == ("RUNNING", 1)
    permit = world.db.row("SELECT * FROM pulse_permits WHERE attempt_id = %s", got["attempt_id"])
    assert permit["released_at"] is None  # the permit stays with the attempt until Pulse reports
    check = step(world, wf)
    assert check["status"] == "ACTIVE" and check["poll"]["current_task_id"] == got["task_id"]
    assert check["poll"]["rounds"][0]["outcome"] == "IN_FLIGHT" and checkpoint(world, wf) is None
    assert pulse.attempt_heartbeat(world.db.conn, got["attempt_id"], "w1")["cancel_requested"] == 1
    consumed = next(e for e in world.events(wf) if e["type"] == "SIGNAL_CONSUMED")
    assert consumed["data"]["task_cancel"] == "REQUESTED" and consumed["data"]["decision"] == "SIGNAL_FIRST_RUNNING"
    world.db.advance(5_000)
    with world.held(attempt_id=got["attempt_id"]):
        pulse.attempt_complete(world.db.conn, got["attempt_id"], "w1", {"status": "PENDING"})
    assert world.db.scalar("SELECT released_at FROM pulse_permits WHERE attempt_id = %s", got["attempt_id"])
    assert drain(orch)["INBOX:ADOPTED"] == 1
    adopted(world, wf)


# --- F-5 the query then returns something the signal can follow ---------------------------------------------------
@pytest.mark.parametrize("consumer", ["orchestrator", "report"])
@pytest.mark.parametrize("how", ["pending", "same_final_result", "known_failure", "cancelled"])
def test_F5_the_in_flight_query_ends_and_the_signal_is_adopted_without_a_new_round(world, orch, how, consumer):
    """The same decision whether the orchestrator consumes the query's outcome or the worker's report does."""
    wf = started(world, orch)
    got, receipt = final_while_query_runs(world, orch, wf, 120_000,
                                          raw='{"status": "PAID", "output": {"amount": 12.5, "receipt": "r-1"}}')
    world.db.advance(2_000)
    with world.held(attempt_id=got["attempt_id"]) if consumer == "orchestrator" else contextlib.nullcontext():
        if how == "pending":
            pulse.attempt_complete(world.db.conn, got["attempt_id"], "w1", {"status": "PENDING"})
        elif how == "same_final_result":
            # Equal as JSON values: key order, whitespace and the spelling of numbers do not matter.
            pulse.attempt_complete(world.db.conn, got["attempt_id"], "w1",
                                   result_json='{"output":{"receipt":"r-1","amount":1.25e1},"status":"PAID"}')
        elif how == "known_failure":
            pulse.attempt_fail(world.db.conn, got["attempt_id"], "w1", "upstream said 400", retryable=False)
        else:
            # The worker saw the cancel intent and stopped: a retryable failure is not retried (K-5).
            pulse.attempt_fail(world.db.conn, got["attempt_id"], "w1", "stopped on request", retryable=True)
    if consumer == "report":
        assert world.db.scalar("SELECT state FROM pulse_inbox") == "CONSUMED"
        assert "INBOX:ADOPTED" not in drain(orch)
    else:
        assert drain(orch)["INBOX:ADOPTED"] == 1
    adopted(world, wf)
    won(world, receipt)
    poll = step(world, wf)["poll"]
    expected = {"pending": "POLL_PENDING", "same_final_result": "DONE", "known_failure": "FAILED",
                "cancelled": "CANCELLED"}[how]
    assert [r["outcome"] for r in poll["rounds"]] == [expected] and poll["rounds_used"] == 1
    world.db.advance(10 * INTERVAL)
    drain(orch)
    assert world.db.scalar("SELECT COUNT(*) FROM pulse_tasks WHERE step_key = 'check'") == 1


def test_F5_a_review_status_signal_adopted_after_the_query_goes_to_review(world, orch):
    wf = started(world, orch)
    got = claim(world)
    receipt = final(world, wf, {"status": "MANUAL_CHECK"})
    drain(orch)
    with world.held(attempt_id=got["attempt_id"]):
        pulse.attempt_complete(world.db.conn, got["attempt_id"], "w1", {"status": "PENDING"})
    drain(orch)
    assert review_codes(world, wf) == ["POLL_REVIEW_VALUE"] and step(world, wf)["status"] == "NEEDS_REVIEW"
    won(world, receipt)


def test_F5_the_same_final_result_with_its_strings_escaped_otherwise_is_adopted(world, orch):
    """Encoders spell one string differently (Python's json.dumps writes \\u escapes by default, PHP's json_encode
    also escapes "/"): the sender's escapes and the worker's plain characters are one final result."""
    wf = started(world, orch)
    got, receipt = final_while_query_runs(
        world, orch, wf, 120_000,
        raw=r'{"status": "PAID", "output": {"name": "Zo\u00EB \ud83d\ude00", "url": "https:\/\/pay.example\/r-1",'
            r' "note": "line\u000a\u0022q\u0022 \\u00e9"}}')
    same = {"status": "PAID", "output": {"name": "Zoë 😀", "url": "https://pay.example/r-1",
                                         "note": 'line\n"q" \\u00e9'}}
    with world.held(attempt_id=got["attempt_id"]):
        pulse.attempt_complete(world.db.conn, got["attempt_id"], "w1", same)
    assert drain(orch)["INBOX:ADOPTED"] == 1
    adopted(world, wf, json.loads(sig(world, receipt)["payload"]))
    won(world, receipt)
    assert step(world, wf)["poll"]["rounds"][0]["outcome"] == "DONE"


@pytest.mark.parametrize("a, b, same", [
    (r'"Zo\u00eb"', '"Zoë"', 1),
    (r'"Zo\u00EB"', r'"Zo\u00eb"', 1),
    (r'"a\/b"', '"a/b"', 1),
    (r'"\ud83d\ude00"', '"😀"', 1),
    (r'"\u000a\u0009\u0022\u005c"', r'"\n\t\"\\"', 1),
    (r'"\u001f"', r'"\u001F"', 1),
    (r'{"\u006bey": [1, "\u00e9"]}', '{"key": [1.0, "é"]}', 1),
    (r'"\\u00e9"', '"é"', 0),  # an escaped backslash, then the letters u00e9
    (r'"\u00e9"', '"e"', 0),
    (r'"\ud83d"', r'"\ud83e"', 0),
    (r'["\u00e9", 1]', '["é", 2]', 0),
])
def test_F5_F6_the_same_final_result_compares_strings_by_their_characters_whatever_their_escapes(world, a, b, same):
    world.db.execute("CALL _weave_json_equal(%s, %s, @same)", a, b)
    assert world.db.scalar("SELECT @same") == same
    world.db.execute("CALL _weave_json_equal(%s, %s, @same)", b, a)
    assert world.db.scalar("SELECT @same") == same


# --- F-6 the query's answer cannot agree --------------------------------------------------------------------------
@pytest.mark.parametrize("how, code, outcome", [
    ("lease_lost", "POLL_UNKNOWN", "UNKNOWN"),
    ("invalid", "POLL_INVALID_RESULT", "INVALID"),
    ("other_status", "FINAL_RESULT_CONFLICT", "DONE"),
    ("other_output", "FINAL_RESULT_CONFLICT", "DONE"),
    ("output_absent", "FINAL_RESULT_CONFLICT", "DONE"),
])
def test_F6_unknown_invalid_or_different_result_keeps_both_facts_and_goes_to_review(world, orch, how, code, outcome):
    wf = started(world, orch)
    got, receipt = final_while_query_runs(world, orch, wf, 10_000)
    world.db.advance(1_000)
    result = None
    if how == "lease_lost":
        world.db.advance(10_000)  # the worker vanished: its lease runs out (K-4)
    elif how == "invalid":
        result = {"status": "SHIPPED"}
    elif how == "other_status":
        result = {"status": "DONE", "output": PAID["output"]}
    elif how == "other_output":
        result = {"status": "PAID", "output": {"receipt": "r-2", "amount": 12.5}}
    else:
        result = {"status": "PAID"}
    if result is not None:
        with world.held(attempt_id=got["attempt_id"]):
            pulse.attempt_complete(world.db.conn, got["attempt_id"], "w1", result)
    drain(orch)
    inst = world.instance(wf)
    assert inst["status"] == "NEEDS_REVIEW" and inst["gate"] == "CLOSED"
    check, after = inst["steps"]
    assert check["status"] == "NEEDS_REVIEW" and check["output"] is None and after["status"] == "PENDING"
    reason, = inst["review_reasons"]
    assert reason["code"] == code
    # Both facts are kept: the round's real answer and the adopted signal.
    assert reason["detail"]["round_outcome"] == outcome and check["poll"]["rounds"][0]["outcome"] == outcome
    if result is not None:
        assert reason["detail"]["round_result"] == result
    assert reason["detail"]["signal_id"] == receipt["signal_id"] and reason["detail"]["signal_payload"] == PAID
    won(world, receipt)
    assert world.db.scalar("SELECT released_at FROM pulse_permits") is not None


# --- F-7 the poll deadline with the query out ---------------------------------------------------------------------
def test_F7_deadline_with_the_query_in_flight_closes_the_gate_and_a_later_result_never_clears_the_review(world, orch):
    wf = started(world, orch, flow(timeout_ms=60_000))
    got = claim(world, lease_ms=120_000)
    world.db.advance(60_000)
    drain(orch)
    inst = world.instance(wf)
    assert inst["gate"] == "CLOSED" and review_codes(world, wf) == ["POLL_DEADLINE_IN_FLIGHT"]
    assert step(world, wf)["status"] == "ACTIVE"
    assert world.db.scalar("SELECT status FROM pulse_tasks WHERE step_key = 'check'") == "RUNNING"
    late = final(world, wf)  # at or after the poll deadline: late (S-9)
    assert (late["status"], late["disposition"]) == ("REJECTED", "LATE")
    with world.held(attempt_id=got["attempt_id"]):
        pulse.attempt_complete(world.db.conn, got["attempt_id"], "w1", PAID)
    drain(orch)
    inst = world.instance(wf)
    assert review_codes(world, wf) == ["POLL_DEADLINE_IN_FLIGHT"] and inst["steps"][0]["status"] == "NEEDS_REVIEW"
    assert inst["steps"][0]["output"] is None and inst["steps"][1]["status"] == "PENDING"
    assert inst["steps"][0]["poll"]["rounds"][0]["outcome"] == "DONE"
    assert wait_row(world)["winner_signal_id"] is None


def test_F7_a_signal_accepted_before_the_deadline_and_found_after_it_still_wins(world, orch):
    """S-13 for the final wait: the deadline handler looks at on-time signals first."""
    wf = started(world, orch, flow(timeout_ms=60_000))
    got = claim(world, lease_ms=120_000)
    world.db.advance(59_000)
    receipt = final(world, wf)  # every orchestrator is down
    world.db.advance(5_000)
    drain(orch)
    won(world, receipt)
    assert review_codes(world, wf) == [] and step(world, wf)["status"] == "ACTIVE"
    with world.held(attempt_id=got["attempt_id"]):
        pulse.attempt_complete(world.db.conn, got["attempt_id"], "w1", {"status": "PENDING"})
    drain(orch)
    adopted(world, wf)


# --- F-8 CONSUMED is not success ----------------------------------------------------------------------------------
def test_F8_consumed_means_adopted_and_the_step_stays_active_until_pulse_confirms(world, orch):
    wf = started(world, orch)
    got, receipt = final_while_query_runs(world, orch, wf, 30_000)
    got_signal = routines_signal(world, wf, receipt)
    assert got_signal["status"] == "CONSUMED"
    inst = world.instance(wf)
    assert inst["status"] == "RUNNING" and inst["steps"][0]["status"] == "ACTIVE"
    assert inst["steps"][0]["final_wait"]["status"] == "SATISFIED"
    # Only Pulse releases the permit: nothing the engine does before the report touches it.
    world.db.advance(20_000)
    drain(orch)
    assert world.db.scalar("SELECT released_at FROM pulse_permits WHERE attempt_id = %s", got["attempt_id"]) is None
    assert step(world, wf)["status"] == "ACTIVE"
    world.db.advance(10_001)  # lease lost: UNKNOWN (K-4), and a signal never overrides an unknown fact
    drain(orch)
    assert world.db.scalar("SELECT released_at FROM pulse_permits WHERE attempt_id = %s", got["attempt_id"])
    assert review_codes(world, wf) == ["POLL_UNKNOWN"]


def routines_signal(world, wf, receipt) -> dict:
    from procedures import signals

    return signals.get(world.db.conn, world.token, world.namespace, wf, receipt["signal_id"])


# --- F-9 stored times, not scan order -----------------------------------------------------------------------------
@pytest.mark.parametrize("looks_first", ["checkpoint", "inbox", "signal"])
@pytest.mark.parametrize("signal_first", [True, False])
def test_F9_the_race_is_decided_by_stored_times_never_by_which_scanner_ran_first(world, orch, looks_first,
                                                                                 signal_first):
    """Every orchestrator is down while the signal is accepted and the round fails; after the restart the
    candidate that looks first does not matter: a signal accepted before the failure wins (F-5), a failure
    stored before the signal goes to review (P-8) and the signal is answered QUERY_SETTLED."""
    wf = started(world, orch)
    got = claim(world)
    world.db.advance(1_000)
    if signal_first:
        receipt = final(world, wf)
        world.db.advance(1_000)
        with world.held(attempt_id=got["attempt_id"]):
            pulse.attempt_fail(world.db.conn, got["attempt_id"], "w1", "upstream said 400", retryable=False)
    else:
        with world.held(attempt_id=got["attempt_id"]):
            pulse.attempt_fail(world.db.conn, got["attempt_id"], "w1", "upstream said 400", retryable=False)
        world.db.advance(1_000)
        receipt = final(world, wf)
    world.db.advance(3_000)
    if looks_first == "checkpoint":
        assert advance_checkpoint(world, wf) == "INBOX_FIRST"
        cp = checkpoint(world, wf)
        assert cp["available_at"] > world.db.now() and "inbox" in cp["last_error"]
    elif looks_first == "signal":
        from procedures import signals

        assert signals.process(world.db.conn, int(receipt["signal_id"].removeprefix("sig_"))) == "INBOX_FIRST"
    else:
        assert consume_inbox(world) == ("ADOPTED" if signal_first else "REVIEW")
    world.db.advance(1_000)
    drain(orch)
    if signal_first:
        adopted(world, wf)
        won(world, receipt)
        assert step(world, wf)["poll"]["rounds"][0]["outcome"] == "FAILED"
    else:
        assert review_codes(world, wf) == ["POLL_FAILED"]
        row = sig(world, receipt)
        assert (row["status"], row["disposition"]) == ("REJECTED", "QUERY_SETTLED")
        assert (wait_row(world)["status"], wait_row(world)["winner_signal_id"]) == ("CANCELLED", None)
        # The activation can never take a signal again: a new one is answered at once.
        assert final(world, wf)["disposition"] == "STEP_SETTLED"


def test_F9_a_signal_accepted_while_everyone_was_down_before_the_querys_stored_result_wins_after_restart(world, orch):
    wf = started(world, orch)
    got = claim(world)
    world.db.advance(1_000)
    receipt = final(world, wf)  # accepted first ...
    world.db.advance(1_000)
    with world.held(attempt_id=got["attempt_id"]):
        pulse.attempt_complete(world.db.conn, got["attempt_id"], "w1", {"status": "PENDING"})  # ... the query after
    world.db.advance(60_000)  # orchestrators come back much later
    from orchestrator.loop import Orchestrator

    fresh = Orchestrator(world.db.dsn, concurrency=1, spread=False)
    try:
        fresh.drain()
    finally:
        fresh.close()
    adopted(world, wf)
    won(world, receipt)


def test_F9_a_stored_winner_is_never_chosen_again(world, orch):
    wf = started(world, orch)
    got, first = final_while_query_runs(world, orch, wf, 120_000)
    won(world, first)
    second = final(world, wf, {"status": "DONE"})
    assert (second["status"], second["disposition"]) == ("REJECTED", "STEP_SETTLED")
    # A restart and a stray checkpoint change nothing: the stored winner is only followed.
    world.db.execute("CALL _weave_now(@now)")
    act = world.db.scalar("SELECT activation_id FROM weave_steps WHERE step_key = 'check'")
    world.db.execute("CALL _weave_checkpoint_set(%s, %s, 'check', 'POLL', %s, @now, @now)",
                     world.db.scalar("SELECT namespace_id FROM weave_instances"), world.internal_id(wf), act)
    assert advance_checkpoint(world, wf) == "SIGNAL_FIRST"
    won(world, first)
    with world.held(attempt_id=got["attempt_id"]):
        pulse.attempt_complete(world.db.conn, got["attempt_id"], "w1", {"status": "PAID", "output": PAID["output"]})
    drain(orch)
    adopted(world, wf)
    won(world, first)
    assert wait_row(world)["winner_signal_id"] == int(first["signal_id"].removeprefix("sig_"))


# --- S-12 for the final wait --------------------------------------------------------------------------------------
@pytest.mark.breaks_invariants("M-4.10", "M-4.19b")  # a payload changed by hand: proof and kept size no longer match
def test_S12_a_final_signal_changed_after_acceptance_never_wins_and_the_round_is_still_collected(world, orch):
    wf = started(world, orch)
    got = claim(world)
    receipt = final(world, wf)
    world.db.execute("UPDATE weave_signals SET payload = %s WHERE id = %s", '{"status": "DONE"}',
                     int(receipt["signal_id"].removeprefix("sig_")))
    drain(orch)
    row = sig(world, receipt)
    assert (row["status"], row["disposition"]) == ("REJECTED", "ACCEPTANCE_PROOF_MISMATCH")
    assert review_codes(world, wf) == ["ACCEPTANCE_PROOF_MISMATCH"]
    assert step(world, wf)["status"] == "ACTIVE"  # the query is out: collected as at a deadline
    assert world.db.scalar("SELECT cancel_requested FROM pulse_tasks WHERE step_key = 'check'") == 0
    with world.held(attempt_id=got["attempt_id"]):
        pulse.attempt_complete(world.db.conn, got["attempt_id"], "w1", {"status": "DONE"})
    drain(orch)
    assert step(world, wf)["status"] == "NEEDS_REVIEW" and review_codes(world, wf) == ["ACCEPTANCE_PROOF_MISMATCH"]
    assert wait_row(world)["winner_signal_id"] is None


def test_S7_a_final_signal_with_a_pending_status_is_refused(world, orch):
    wf = started(world, orch)
    with pytest.raises(errors.ValidationFailed):
        final(world, wf, {"status": "PENDING"})


def test_S7_F2_a_final_status_written_with_escapes_is_the_declared_status(world, orch):
    """An encoder that keeps to ASCII writes a status outside it as \\u escapes: it is still the declared status,
    accepted and adopted as the same status a worker's answer would be classified by."""
    doc = flow(name="es", result={"pending": ["PENDING"], "success": ["ÉXITO"], "review": ["REVISIÓN"]})
    wf = started(world, orch, doc)
    with pytest.raises(errors.ValidationFailed):
        final(world, wf, raw=r'{"status": "\u00c9XIT"}')
    receipt = final(world, wf, raw=r'{"status": "\u00c9XITO", "output": {"n": 1}}')
    assert receipt["status"] == "PENDING"
    drain(orch)
    won(world, receipt)
    check = step(world, wf)
    assert check["status"] == "SUCCEEDED" and check["output"] == {"status": "ÉXITO", "output": {"n": 1}}


def test_C4_reactivate_closes_the_old_final_wait_and_answers_its_pending_signals_stale(world, orch):
    wf = started(world, orch, doc=flow(max_rounds=1))
    answer(world, "PENDING")
    drain(orch)
    assert review_codes(world, wf) == ["POLL_ROUNDS_EXHAUSTED"]
    assert wait_row(world, 1)["status"] == "WAITING"  # open: continue could still go on with it
    pending = final(world, wf)  # accepted for activation 1, not looked at yet
    routines.step_reactivate(world.db.conn, world.token, world.namespace, wf, "check", "start over", "re-1")
    assert wait_row(world, 1)["status"] == "CANCELLED"
    assert (sig(world, pending)["status"], sig(world, pending)["disposition"]) == ("REJECTED", "STALE_ACTIVATION")



def test_C4_S9_M4_a_signal_late_for_the_poll_deadline_stays_rejected_after_continue_and_a_later_one_wins(world, orch):
    """Continue moves the final wait's deadline with the poll deadline; a signal rejected LATE before it never comes
    back (C-5), and the winner after it is still the first on-time match (M-4.17)."""
    wf = started(world, orch, flow(timeout_ms=60_000, name="short"))
    answer(world, "PENDING")
    drain(orch)
    world.db.advance(60_000)
    drain(orch)
    assert review_codes(world, wf) == ["POLL_DEADLINE"] and wait_row(world)["status"] == "WAITING"
    late = final(world, wf)
    assert (late["status"], late["disposition"]) == ("REJECTED", "LATE")
    routines.step_continue(world.db.conn, world.token, world.namespace, wf, "check", "more time", "c-1",
                           poll_deadline_ms=600_000)
    assert wait_row(world)["deadline_at"] > sig(world, late)["accepted_at"]
    drain(orch)
    receipt = final(world, wf)
    drain(orch)
    won(world, receipt)
    adopted(world, wf)
    assert (sig(world, late)["status"], sig(world, late)["disposition"]) == ("REJECTED", "LATE")
    assert invariants.violations(world.db.conn) == {}


def test_C4_F2_a_signal_accepted_while_the_rounds_ran_out_settles_the_poll_as_soon_as_it_is_continued(world, orch):
    """Rounds exhausted (P-9) leave the final wait open; a signal accepted in that review came with no query out
    (F-2): continue adopts it at once, though the next round would only be due an interval after the last answer."""
    wf = started(world, orch, flow(max_rounds=1, name="one-round"))
    answer(world, "PENDING")
    drain(orch)
    assert review_codes(world, wf) == ["POLL_ROUNDS_EXHAUSTED"]
    world.db.advance(1_000)
    receipt = final(world, wf)
    drain(orch)
    assert sig(world, receipt)["status"] == "PENDING"
    routines.step_continue(world.db.conn, world.token, world.namespace, wf, "check", "more rounds", "c-1",
                           extra_rounds=2)
    assert step(world, wf)["poll"]["next_poll_at"] > world.db.now().strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    drain(orch)
    adopted(world, wf)
    won(world, receipt)
    assert step(world, wf)["poll"]["rounds_used"] == 1
    assert next(e for e in world.events(wf) if e["type"] == "SIGNAL_CONSUMED")["data"]["decision"] == \
        "SIGNAL_BETWEEN_ROUNDS"


def test_C4_S11_resolve_closes_the_open_final_wait_and_answers_its_pending_signals_step_settled(world, orch):
    """A review that could be continued leaves the final wait open; resolving the step settles it instead, so the
    wait closes with it: its PENDING signals are answered now and a later one is STEP_SETTLED at acceptance (S-9),
    none left PENDING on a step that has ended."""
    wf = started(world, orch, doc=flow(max_rounds=1))
    answer(world, "PENDING")
    drain(orch)
    assert review_codes(world, wf) == ["POLL_ROUNDS_EXHAUSTED"] and wait_row(world, 1)["status"] == "WAITING"
    pending = final(world, wf)  # accepted for activation 1, not looked at yet
    routines.step_resolve(world.db.conn, world.token, world.namespace, wf, "check", "checked by hand", "rs-1",
                          output=PAID)
    assert step(world, wf)["status"] == "SUCCEEDED" and wait_row(world, 1)["status"] == "CANCELLED"
    assert (sig(world, pending)["status"], sig(world, pending)["disposition"]) == ("REJECTED", "STEP_SETTLED")
    later = final(world, wf)
    assert (later["status"], later["disposition"]) == ("REJECTED", "STEP_SETTLED")
    drain(orch)
    assert world.db.scalar("SELECT COUNT(*) FROM weave_signals WHERE status = 'PENDING'") == 0


def test_S14_F9_an_early_final_signal_expired_before_the_poll_started_never_wins(world, orch):
    """As for a SIGNAL wait: a final signal accepted before its POLL started expires at the instance deadline in
    force then; a step started after that time by a later deadline (C-4) never takes it, though nobody looked at
    its expiry before the POLL started."""
    world.publish({"name": "later-poll", "steps": [{"key": "wait", "type": "TIMER", "delay_ms": 7_200_000},
                                                   poll_step(final_signal=FINAL, after=["wait"])]})
    wf = world.start("later-poll", {"order_id": "o-1"}, deadline_ms=3_600_000)
    early = final(world, wf)
    world.db.advance(3_600_000)
    cp = world.db.scalar("SELECT id FROM weave_pending_advances WHERE step_key = 'wait'")
    assert world.db.one("weave_checkpoint_advance", cp)["outcome"] == "TRUNCATED"  # the only runner that looked
    routines.instance_deadline(world.db.conn, world.token, world.namespace, wf, "more time", "d-1",
                               extend_ms=3_600_000)
    routines.step_resolve(world.db.conn, world.token, world.namespace, wf, "wait", "waited", "rs-1", output=None)
    drain(orch)
    assert (sig(world, early)["status"], sig(world, early)["disposition"]) == ("EXPIRED", "EXPIRED_UNMATCHED")
    assert step(world, wf)["status"] == "ACTIVE" and step(world, wf)["poll"]["state"] == "IN_FLIGHT"
    assert (wait_row(world)["status"], wait_row(world)["winner_signal_id"]) == ("WAITING", None)
    assert review_codes(world, wf) == []
    # One accepted while the POLL is active wins, and it is the first match that could (M-4.17).
    fresh = final(world, wf)
    drain(orch)
    won(world, fresh)
    assert invariants.violations(world.db.conn) == {}

@pytest.mark.parametrize("looks_first", ["signal", "checkpoint", "inbox"])
def test_F9_S14_a_final_signal_found_after_the_instance_deadline_beside_a_stored_outcome_is_never_expired(
        world, orch, looks_first):
    """A final signal carries the instance deadline as expires_at (S-10), but one accepted for an active wait is
    not an unmatched early signal: found after that deadline beside a round outcome still in the inbox, it waits
    for the inbox's consumer, which decides by the two stored times (F-9) — the signal, accepted first, wins
    whichever candidate looks first."""
    doc = poll_flow(name="pay-short", final_signal=FINAL)  # its poll deadline is the instance deadline
    wf = started(world, orch, doc, deadline_ms=10_000)
    got = claim(world)
    world.db.advance(1_000)
    receipt = final(world, wf)  # every orchestrator is down: accepted, not looked at
    world.db.advance(1_000)
    with world.held(attempt_id=got["attempt_id"]):
        pulse.attempt_fail(world.db.conn, got["attempt_id"], "w1", "upstream said 400", retryable=False)
    world.db.advance(10_000)  # they come back after the instance deadline, the signal's expires_at
    if looks_first == "signal":
        from procedures import signals

        assert signals.process(world.db.conn, int(receipt["signal_id"].removeprefix("sig_"))) == "INBOX_FIRST"
        assert sig(world, receipt)["status"] == "PENDING"
    elif looks_first == "checkpoint":
        assert advance_checkpoint(world, wf) == "INBOX_FIRST"
    else:
        assert consume_inbox(world) == "ADOPTED"
    world.db.advance(1_000)
    drain(orch)
    won(world, receipt)
    assert step(world, wf)["status"] == "SUCCEEDED" and step(world, wf)["output"] == PAID
    assert world.instance(wf)["status"] == "SUCCEEDED"


def test_F9_R13_a_final_signal_that_came_after_its_round_expired_unrecorded_waits_for_that_expiry(world, orch):
    """Every runner down: the round's task, never claimed, passed its deadline at 3:07; the final signal came at
    4:00, queued. Served first, the signal cancelled the task and won (F-3), where the expiry, served first, ended the
    round before it; the stored times say the expiry came first."""
    wf = started(world, orch, flow(task_timeout_ms=3 * 60_000 + 7_000))
    world.db.advance(4 * 60_000)
    receipt = final(world, wf, queued=True)
    world.db.advance(6 * 60_000)
    signal_id = int(receipt["signal_id"].removeprefix("sig_"))
    assert signals.process(world.db.conn, signal_id) == "INBOX_FIRST"  # the task's end comes first
    task = world.db.scalar("SELECT id FROM pulse_tasks")
    assert pulse.task_expire(world.db.conn, task) == "EXPIRED"
    drain(orch)
    assert sig(world, receipt)["status"] == "REJECTED"
    assert world.db.scalar("SELECT outcome FROM weave_poll_rounds") == "FAILED"  # the expiry ended it
