"""C-4 recovery of POLL steps: continue after the round budget or the poll deadline, and reactivate."""

from __future__ import annotations

import pytest

from procedures import db as dbmod
from procedures import errors, pulse, routines
from tests.sql.test_polls import INTERVAL, answer, answer_rounds, claim, poll_flow, poll_of, review_codes, started


def exhaust(world, orch, rounds=2):
    world.publish(poll_flow(max_rounds=rounds))
    wf = started(world, orch)
    answer_rounds(world, orch, *["PENDING"] * rounds)
    assert review_codes(world, wf) == ["POLL_ROUNDS_EXHAUSTED"]
    return wf


def cont(world, wf, key="c1", **kw):
    return routines.step_continue(world.db.conn, world.token, "acme", wf, "check", "vendor is slow today", key, **kw)


def test_C4_continue_after_rounds_exhausted_creates_exactly_the_extra_rounds(world, orch):
    wf = exhaust(world, orch)
    frozen = world.db.scalar("SELECT input FROM pulse_tasks ORDER BY id LIMIT 1")
    with pytest.raises(errors.ValidationFailed, match="all 2 rounds are used: give extra_rounds"):
        cont(world, wf, key="c0", poll_deadline_ms=7_200_000)  # time alone: it would stop again at once
    result = cont(world, wf, extra_rounds=2)
    assert result["status"] == "RUNNING" and result["max_rounds"] == 4
    world.db.advance(INTERVAL)
    orch.drain()
    assert poll_of(world, wf)["rounds_used"] == 3
    answer_rounds(world, orch, "PENDING", "PENDING")
    world.db.advance(10 * INTERVAL)
    orch.drain()
    poll = poll_of(world, wf)
    assert (poll["rounds_used"], poll["max_rounds"], poll["state"]) == (4, 4, "STOPPED")
    assert world.db.scalar("SELECT COUNT(*) FROM pulse_tasks") == 4
    assert {world.db.scalar("SELECT COUNT(DISTINCT input) FROM pulse_tasks")} == {1}
    assert world.db.scalar("SELECT input FROM pulse_tasks ORDER BY id DESC LIMIT 1") == frozen  # same activation
    assert world.step(wf, "check")["activation_sequence"] == 1
    assert review_codes(world, wf) == ["POLL_ROUNDS_EXHAUSTED"]
    closed = world.db.rows("SELECT code, closed_by FROM weave_review_reasons WHERE closed_at IS NOT NULL")
    assert closed == [{"code": "POLL_ROUNDS_EXHAUSTED", "closed_by": "continue"}]


def test_C4_continue_after_the_poll_deadline_with_a_later_deadline(world, orch):
    world.publish(poll_flow(max_rounds=10, timeout_ms=2 * INTERVAL))
    wf = started(world, orch)
    answer_rounds(world, orch, "PENDING", "PENDING")
    world.db.advance(2 * INTERVAL)
    orch.drain()
    assert review_codes(world, wf) == ["POLL_DEADLINE"]
    with pytest.raises(errors.ValidationFailed, match=r"the poll deadline \(.*\) has passed: give poll_deadline_ms"):
        cont(world, wf, extra_rounds=1)  # the deadline has passed: rounds alone would stop it again at once
    result = cont(world, wf, key="c2", poll_deadline_ms=10 * INTERVAL)
    assert result["status"] == "RUNNING"
    orch.drain()
    assert poll_of(world, wf)["rounds_used"] == 3
    answer(world, "DONE")
    orch.drain()
    assert world.instance(wf)["status"] == "SUCCEEDED"


def test_C4_continue_is_refused_for_other_review_reasons(world, orch):
    world.publish(poll_flow())
    wf = started(world, orch)
    answer(world, {"status": "WHATEVER"})
    orch.drain()
    assert review_codes(world, wf) == ["POLL_INVALID_RESULT"]
    with pytest.raises(errors.InvalidState):
        cont(world, wf, extra_rounds=1)
    result = routines.step_reactivate(world.db.conn, world.token, "acme", wf, "check", "vendor fixed", "r1")
    assert result["activation_sequence"] == 2
    orch.drain()
    poll = poll_of(world, wf)
    assert (poll["rounds_used"], poll["max_rounds"]) == (1, 3)  # fresh budgets (C-4)
    assert world.step(wf, "check")["activation_sequence"] == 2


@pytest.mark.parametrize("poll_deadline_ms", [2**62, 315_360_000_000_000], ids=["product-overflows", "sum-overflows"])
def test_C4_continue_with_a_poll_deadline_past_any_time_is_DEADLINE_INVALID(world, orch, poll_deadline_ms):
    wf = exhaust(world, orch)
    before = world.db.table_counts()
    with pytest.raises(errors.ValidationFailed) as info:
        cont(world, wf, poll_deadline_ms=poll_deadline_ms)
    assert info.value.field_code == "DEADLINE_INVALID"
    assert world.db.table_counts() == before
    # The bound itself is unchanged: up to the instance deadline, and not a microsecond past it.
    room = world.db.scalar("SELECT TIMESTAMPDIFF(MICROSECOND, %s, deadline_at) DIV 1000 FROM weave_instances",
                           world.db.now())
    with pytest.raises(errors.ValidationFailed):
        cont(world, wf, key="c2", extra_rounds=1, poll_deadline_ms=room + 1)
    assert cont(world, wf, key="c3", extra_rounds=1, poll_deadline_ms=room - 60_000)["status"] == "RUNNING"


def test_C4_continue_never_makes_the_poll_deadline_earlier(world, orch):
    """continue gives a POLL a later poll deadline (C-4): one stopped on its rounds with time left is refused an
    earlier deadline, with nothing changed, and the refusal names the deadline in force."""
    wf = exhaust(world, orch)
    current = poll_of(world, wf)["poll_deadline"]
    left_ms = world.db.scalar("SELECT TIMESTAMPDIFF(MICROSECOND, %s, poll_deadline) DIV 1000 FROM weave_poll_states",
                              world.db.now())
    before = world.db.table_counts()
    for shorter in (1_000, left_ms - 1_000):  # the engine clock runs on meanwhile: a second short of the deadline
        with pytest.raises(errors.ValidationFailed, match=current) as info:
            cont(world, wf, extra_rounds=5, poll_deadline_ms=shorter)
        assert (info.value.field_code, info.value.field) == ("DEADLINE_INVALID", "poll_deadline_ms")
    assert world.db.table_counts() == before and poll_of(world, wf)["poll_deadline"] == current
    result = cont(world, wf, key="c2", extra_rounds=5, poll_deadline_ms=left_ms + 1_000)
    assert result["status"] == "RUNNING" and poll_of(world, wf)["poll_deadline"] > current


def test_C4_P11_continue_after_a_round_in_flight_at_the_deadline_answered_pending(world, orch):
    """A round still in flight at the poll deadline sends the POLL to review (P-11); recovery waits for it
    (TASK_IN_FLIGHT). Once it answered PENDING, the POLL stopped on its deadline after PENDING, as C-4's continue
    asks: continue with a later poll deadline goes on in the same activation."""
    world.publish(poll_flow(max_rounds=5, timeout_ms=2 * INTERVAL))
    wf = started(world, orch)
    got = claim(world, lease_ms=10 * INTERVAL)
    world.db.advance(2 * INTERVAL)
    orch.drain()
    assert review_codes(world, wf) == ["POLL_DEADLINE_IN_FLIGHT"]
    with pytest.raises(errors.TaskInFlight):
        cont(world, wf, poll_deadline_ms=10 * INTERVAL)
    pulse.attempt_complete(world.db.conn, got["attempt_id"], "w1", {"status": "PENDING"})
    orch.drain()
    assert world.step(wf, "check")["status"] == "NEEDS_REVIEW"
    result = cont(world, wf, key="c2", extra_rounds=1, poll_deadline_ms=10 * INTERVAL)
    assert result["status"] == "RUNNING" and world.step(wf, "check")["activation_sequence"] == 1
    orch.drain()
    assert poll_of(world, wf)["rounds_used"] == 2
    answer(world, "DONE")
    orch.drain()
    assert world.instance(wf)["status"] == "SUCCEEDED"


def test_C4_C6_continue_is_refused_for_a_poll_stopped_by_a_review_that_is_not_its_rounds_or_deadline(world, orch):
    """A poll whose checkpoint failed three times the same way goes to review as CANDIDATE_FAILING while its round is
    in flight; the round then answers PENDING, and the poll stops with no stop reason of its own. Continue checked
    the stop reason with NOT IN, which no reason (NULL) passed: it went on with the poll, which C-6 refuses (a seeded
    control walk found it). Reactivate or resolve apply."""
    world.publish(poll_flow(max_rounds=3))
    wf = started(world, orch)  # round 1's task queued, the poll's checkpoint waiting for its deadline
    for _ in range(3):
        cp = world.db.row("SELECT id, version FROM weave_pending_advances WHERE step_key = 'check'")
        dbmod.call(world.db.conn, "weave_candidate_fail", "CHECKPOINT", cp["id"], cp["version"], "INVALID_STATE: x")
    answer(world, "PENDING")
    orch.drain()  # the round's answer, consumed with its step in review: the poll stops there
    stopped = "SELECT state, stop_reason, max_rounds, poll_deadline FROM weave_poll_states"
    before = world.db.row(stopped)
    assert (before["state"], before["stop_reason"]) == ("STOPPED", None)
    assert review_codes(world, wf) == ["CANDIDATE_FAILING"]
    with pytest.raises(errors.InvalidState, match="continue needs a POLL stopped on rounds or deadline"):
        cont(world, wf, extra_rounds=1, poll_deadline_ms=7_200_000)
    assert world.db.row(stopped) == before and world.step(wf, "check")["status"] == "NEEDS_REVIEW"
