"""R-2 under a clock that is behind: stored times follow lock order, per instance, whatever the writer's clock says.

A writer's clock can be behind the one that wrote an instance's last decision: after a failover to a node whose
clock is behind, on a multi-writer cluster whose nodes differ by a few milliseconds, or after a clock step back.
Each decision reads the clock after the instance's lock; it never dates itself before the instance's last
decision, so events never go back (M-4.16) and a signal accepted later is never dated before the winner it lost to
(M-4.17). Here the test clock's offset is lowered by hand: the engine never moves it back, but a new writer's
clock can be behind."""

from __future__ import annotations

import contextlib

import pytest

from procedures import pulse, routines
from tests.sql.test_final_signal import FINAL, final
from tests.sql.test_polls import claim, poll_flow
from tests.support.signals import send, signal_flow

HOUR = 3_600_000


def clock_behind(world, ms: int) -> None:
    """The writer's clock from now on is ``ms`` behind the one that wrote so far."""
    world.db.execute("UPDATE weave_install SET clock_offset_us = clock_offset_us - %s WHERE id = 1", ms * 1000)


def times(world, wf: str) -> list:
    return [e["occurred_at"] for e in world.events(wf)]


def last_time(world, wf: str):
    return world.db.scalar("SELECT updated_at FROM weave_instances WHERE id = %s", world.internal_id(wf))


def test_R2_a_signal_accepted_by_a_writer_behind_is_not_dated_before_the_instance_s_last_decision(world, orch):
    world.publish(signal_flow())
    wf = world.start("approval-flow", {"order_id": "o-1"})
    orch.drain()
    before = last_time(world, wf)
    clock_behind(world, 10_000)
    receipt = send(world, wf)  # settles the open wait at once
    assert receipt["accepted_at"] >= routines.rfc3339(before)
    assert times(world, wf) == sorted(times(world, wf))  # M-4.16


def test_S11_a_later_signal_from_a_writer_behind_is_not_dated_before_the_winner(world, orch):
    world.publish(signal_flow())
    wf = world.start("approval-flow", {"order_id": "o-1"})
    orch.drain()
    winner = send(world, wf, "first")
    clock_behind(world, 10_000)
    later = send(world, wf, "second")  # the same match, after the wait settled: rejected, and dated after the winner
    assert later["status"] == "REJECTED" and later["accepted_at"] >= winner["accepted_at"]  # M-4.17


def test_R2_operator_actions_reports_and_timers_on_a_writer_behind_keep_the_instance_s_times_in_order(world, orch):
    world.publish({"name": "mixed", "steps": [
        {"key": "charge", "type": "TASK", "queue": "payments", "handler": "example.echo", "handler_version": "1",
         "input": {}},
        {"key": "cool", "type": "TIMER", "delay_ms": 60_000, "after": ["charge"]}]})
    wf = world.start("mixed", {})
    orch.drain()
    # Claimed first: a task created on a clock ahead is not claimable until the writer's clock reaches it.
    got = pulse.task_claim(world.db.conn, "w1", "payments", limit=1, lease_ms=HOUR)[0]
    clock_behind(world, 5_000)
    routines.instance_pause(world.db.conn, world.token, "acme", wf, "hold", "p1")  # an operator action
    clock_behind(world, 5_000)
    routines.instance_resume(world.db.conn, world.token, "acme", wf, "go on", "r1")
    clock_behind(world, 5_000)
    with world.held(attempt_id=got["attempt_id"]):  # the report leaves its outcome to the orchestrator
        pulse.attempt_complete(world.db.conn, got["attempt_id"], "w1", {"ok": True})
    # The outcome is dated after the instance's last decision, 15 s ahead of this writer, and is consumed when the
    # writer's clock reaches it: the TASK settles and the timer starts then, due 60 s later (scaling.md: a clock
    # behind makes what it dates wait by the difference).
    orch.drain()
    assert world.step(wf, "charge")["status"] == "ACTIVE"
    world.db.advance(15_000)
    orch.drain()
    assert world.step(wf, "charge")["status"] == "SUCCEEDED"
    world.db.advance(60_000)
    orch.drain()
    assert world.instance(wf)["status"] == "SUCCEEDED"
    assert times(world, wf) == sorted(times(world, wf))  # M-4.16, event by event


@pytest.mark.parametrize("held", [False, True], ids=["report-holds-the-instance", "instance-held-by-another"])
def test_F9_a_query_answer_reported_after_a_final_signal_on_a_writer_behind_is_not_dated_before_it(world, orch,
                                                                                                   held):
    """The final signal is accepted first, and the worker's different final answer is reported after it on a
    writer whose clock is 2 s behind. The report was dated the signal's own time when it took the instance's lock
    (equal times: the query wins, F-1), or its raw clock time when another transaction held the instance, and
    either way the answer won and the signal was REJECTED QUERY_SETTLED, with no review: which of the two
    happened first depended on the clocks, not on the order of the facts. A report is dated after the instance's
    last committed decision now, so the signal stays first and the two facts go to review (F-6)."""
    world.publish(poll_flow(final_signal=FINAL, then=True))
    wf = world.start("pay", {"order_id": "o-1"})
    orch.drain()
    got = claim(world, lease_ms=HOUR)
    receipt = final(world, wf, payload={"status": "PAID", "output": {"receipt": "r-1"}})
    clock_behind(world, 2_000)
    with world.held(attempt_id=got["attempt_id"]) if held else contextlib.nullcontext():
        pulse.attempt_complete(world.db.conn, got["attempt_id"], "w1", {"status": "PAID", "output": {"receipt": "r-2"}})
    world.db.advance(2_000)  # a held report's outcome waits until this writer's clock reaches its time
    orch.drain()
    accepted = world.db.scalar("SELECT accepted_at FROM weave_signals WHERE id = %s",
                               int(receipt["signal_id"].removeprefix("sig_")))
    assert world.db.scalar("SELECT result_at FROM weave_poll_rounds") > accepted
    inst = world.instance(wf)
    assert inst["status"] == "NEEDS_REVIEW"
    assert [r["code"] for r in inst["review_reasons"]] == ["FINAL_RESULT_CONFLICT"]
    assert times(world, wf) == sorted(times(world, wf))  # M-4.16


def test_K2_a_heartbeat_on_a_writer_behind_never_moves_the_lease_earlier(world, orch):
    """A heartbeat set the lease to its own now + lease: on a writer an hour behind the one that granted a 30 s lease,
    that was an hour before it, and the next recovery on a writer with the right time found the lease run out and
    recorded the live worker's task as lost (TASK_UNKNOWN, a review) while it kept beating."""
    world.publish({"name": "charge", "steps": [
        {"key": "charge", "type": "TASK", "queue": "payments", "handler": "example.echo", "handler_version": "1",
         "input": {}}]})
    wf = world.start("charge", {})
    orch.drain()
    got = pulse.task_claim(world.db.conn, "w1", "payments", limit=1, lease_ms=30_000)[0]
    granted = world.db.scalar("SELECT lease_expires_at FROM pulse_attempts WHERE id = %s", got["attempt_id"])
    clock_behind(world, HOUR)
    beat = pulse.attempt_heartbeat(world.db.conn, got["attempt_id"], "w1", 30_000)
    assert beat["lease_expires_at"] == granted
    world.db.execute("UPDATE weave_install SET clock_offset_us = clock_offset_us + %s WHERE id = 1", HOUR * 1000)
    world.db.advance(20_000)  # the right time again, within the lease as granted
    orch.drain()
    assert world.instance(wf)["status"] == "RUNNING" and world.step(wf, "charge")["status"] == "ACTIVE"
    later = pulse.attempt_heartbeat(world.db.conn, got["attempt_id"], "w1", 30_000)  # and it extends as before
    assert later["lease_expires_at"] > granted
