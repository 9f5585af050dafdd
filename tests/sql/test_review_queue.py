"""The review queue (C-3, M-3): the instances waiting for a person, the one waiting longest first (since its earliest
open reason), each with its open reasons, and how many are in review, in one call."""

from __future__ import annotations

import pytest

from procedures import errors, routines
from tests.support import signals as signal_support

TWO_WAITS = {"name": "two-waits", "steps": [signal_support.signal_step("first", timeout_ms=1_000),
                                            signal_support.signal_step("second", timeout_ms=1_000)]}
ONE_WAIT = signal_support.signal_flow("one-wait", timeout_ms=1_000)


def queue(world, token: str | None = None, limit: int = 50) -> dict:
    return routines.review_queue(world.db.conn, token or world.token, world.namespace, limit=limit)


def test_C3_M3_the_longest_waiting_first_since_its_earliest_open_reason_each_with_its_reasons(world, orch):
    world.publish(TWO_WAITS)
    world.publish(ONE_WAIT)
    again = world.start("one-wait", {"order_id": "o-1"}, business_key="again")
    world.db.advance(2_000)
    orch.drain()  # `again` goes to review first
    two = world.start("two-waits", {"order_id": "o-2"}, business_key="two")
    world.db.advance(2_000)
    orch.drain()  # then `two`, with a reason for each of its steps
    later = world.start("one-wait", {"order_id": "o-3"})
    settled = world.start("one-wait", {"order_id": "o-4"})
    signal_support.send(world, settled, correlation_key="o-4")  # in time: never in review
    world.db.advance(2_000)
    orch.drain()  # then `later`
    assert world.instance(settled)["status"] == "SUCCEEDED"
    # `again` is started again and is back in review after the others: it waits the least now, though it came first
    routines.step_reactivate(world.db.conn, world.token, world.namespace, again, "approval", "once more", "r-1")
    orch.drain()
    world.db.advance(2_000)
    orch.drain()
    # `two` is paused while in review, its row changed last of all: it still waits the longest
    routines.instance_pause(world.db.conn, world.token, world.namespace, two, "hold while we look", "p-two")
    assert world.instance(two)["updated_at"] > world.instance(again)["updated_at"]

    got = queue(world)
    assert [i["workflow_id"] for i in got["items"]] == [two, later, again] and got["in_review"] == 3
    first = got["items"][0]
    assert first["definition"] == {"name": "two-waits", "version": 1} and first["business_key"] == "two"
    shown = world.instance(two)["review_reasons"]
    assert [(r["code"], r["step_key"], r["activation_sequence"], r["opened_at"]) for r in first["review_reasons"]] == [
        (r["code"], r["step_key"], r["activation_sequence"], r["opened_at"]) for r in shown]
    assert [r["step_key"] for r in first["review_reasons"]] == ["first", "second"]
    assert first["waiting_since"] == min(r["opened_at"] for r in shown)
    reopened = got["items"][2]["review_reasons"]
    assert [(r["code"], r["activation_sequence"]) for r in reopened] == [("SIGNAL_TIMEOUT", 2)]
    assert got["items"][2]["waiting_since"] == reopened[0]["opened_at"] > first["waiting_since"]

    page = queue(world, limit=2)  # a page of the longest waiting; the count is of them all
    assert [i["workflow_id"] for i in page["items"]] == [two, later] and page["in_review"] == 3
    for limit in (0, 501):
        with pytest.raises(errors.ValidationFailed, match="LIMIT_INVALID"):
            queue(world, limit=limit)


def test_C3_S2_a_credential_of_some_queues_sees_in_the_queue_and_its_count_only_what_it_may_read(world, orch):
    from tests.console.test_console_browser import in_review

    paying = in_review(world, orch, "o-1")  # a POLL on the payments queue
    world.publish(ONE_WAIT)
    waiting = world.start("one-wait", {"order_id": "o-2"})  # no queue: any credential of the namespace reads it
    world.db.advance(2_000)
    orch.drain()
    assert [i["workflow_id"] for i in queue(world)["items"]] == [paying, waiting]
    other = world.credential(["workflows:read"], queues=["other"])["token"]
    got = queue(world, other)
    assert [i["workflow_id"] for i in got["items"]] == [waiting] and got["in_review"] == 1
    with pytest.raises(errors.Forbidden):
        routines.instance_get(world.db.conn, other, world.namespace, paying)  # as its own read refuses it
    assert queue(world)["in_review"] == 2


def test_C3_nothing_in_review_is_an_empty_queue(world, orch):
    world.publish(ONE_WAIT)
    world.start("one-wait", {"order_id": "o-1"})
    orch.drain()
    assert queue(world) == {"items": [], "in_review": 0}


@pytest.mark.breaks_invariants("M-4.23")
def test_M3_M4_23_an_instance_in_review_without_an_open_reason_or_settled_with_one_is_caught(world, orch):
    """The queue finds what waits for a person by the instance's status, and shows each since its earliest open
    reason: a status and reasons that disagree would hide an instance from a person, or show one no one can act on."""
    from procedures import invariants

    world.publish(ONE_WAIT)
    held = world.start("one-wait", {"order_id": "o-1"})
    resolved = world.start("one-wait", {"order_id": "o-2"})
    world.db.advance(2_000)
    orch.drain()  # both time out into review
    routines.step_resolve(world.db.conn, world.token, world.namespace, resolved, "approval", "by hand", "res-1",
                          output_json='{"approved": true}')
    assert world.instance(resolved)["status"] == "SUCCEEDED"
    assert "M-4.23" not in invariants.violations(world.db.conn)
    world.db.execute("UPDATE weave_review_reasons SET closed_at = NULL WHERE instance_id = %s",
                     world.internal_id(resolved))
    world.db.execute("UPDATE weave_review_reasons SET closed_at = opened_at WHERE instance_id = %s",
                     world.internal_id(held))
    broken = invariants.violations(world.db.conn)
    assert broken == {"M-4.23": sorted([world.internal_id(held), world.internal_id(resolved)])}, broken
