"""A long poll's rounds (R-11, P-5): the instance read carries the latest 50 rounds of each current activation, and
weave_step_rounds pages through all of them, of the latest activation or of an earlier one, reading a page as
cheaply after round 50 as after round 0. Rounds are driven through the Pulse routines and the orchestrator; the
clock is the database's test clock."""

from __future__ import annotations

import pytest

from api import client as sdk
from procedures import errors, pulse, routines
from tests.benchmarks.bench_reads import reads_of
from tests.sql.test_polls import INTERVAL, claim, poll_flow, started

ROUNDS = 55  # more than the instance read shows


def pending_rounds(world, orch, wf: str, rounds: int) -> None:
    """``rounds`` rounds answered PENDING one after another, the first already in flight; each report consumes
    its answer at once, and the next round falls due an interval later."""
    for n in range(rounds):
        if n:
            world.db.advance(INTERVAL)
            orch.drain()
        got = claim(world)
        pulse.attempt_complete(world.db.conn, got["attempt_id"], "w1", {"status": "PENDING", "output": {"n": n + 1}})


def page(world, wf: str, key: str = "check", **kw) -> dict:
    return routines.step_rounds(world.db.conn, world.token, world.namespace, wf, key, **kw)


@pytest.fixture
def long_poll(world, orch) -> str:
    world.publish(poll_flow(max_rounds=100))
    wf = started(world, orch)
    pending_rounds(world, orch, wf, ROUNDS)
    return wf


def test_R11_an_instance_read_shows_the_latest_50_rounds_of_a_long_poll(world, orch, long_poll):
    poll = world.step(long_poll, "check")["poll"]
    assert poll["rounds_used"] == ROUNDS
    assert [r["number"] for r in poll["rounds"]] == list(range(ROUNDS - 49, ROUNDS + 1))
    assert [r["result"]["output"]["n"] for r in poll["rounds"]] == list(range(ROUNDS - 49, ROUNDS + 1))


def test_R11_an_instance_read_reads_no_round_it_does_not_show(world, orch):
    """Each round beyond the 50 shown adds the read of its key (its poll state's lookup is the previous row's), not
    of its row or its step."""
    world.publish(poll_flow(max_rounds=100))
    wf = started(world, orch)
    pending_rounds(world, orch, wf, 50)

    def read() -> object:
        return routines.instance_get(world.db.conn, world.token, world.namespace, wf)

    at_50 = reads_of(world.db.conn, read)
    world.db.advance(INTERVAL)
    orch.drain()
    pending_rounds(world, orch, wf, 10)
    assert reads_of(world.db.conn, read) - at_50 <= 10  # 30 when every round was read whole with its step


def test_R11_P5_rounds_page_through_every_round_in_order_without_gaps(world, orch, long_poll):
    seen, after = [], 0
    while True:
        got = page(world, long_poll, after=after, limit=20)
        assert got["activation_sequence"] == 1 and got["rounds_used"] == ROUNDS and got["max_rounds"] == 100
        if not got["rounds"]:
            break
        seen += got["rounds"]
        after = got["next_after"]
    assert [r["number"] for r in seen] == list(range(1, ROUNDS + 1))
    assert [r["result"]["output"]["n"] for r in seen] == list(range(1, ROUNDS + 1))
    assert all(r["outcome"] == "POLL_PENDING" and r["task_id"].startswith("tsk_") for r in seen[:-1])
    assert seen[-1]["outcome"] == "POLL_PENDING" and got["next_after"] == after


def test_R11_a_rounds_page_reads_as_much_after_round_50_as_after_round_0(world, orch, long_poll):
    conn, token, ns = world.db.conn, world.token, world.namespace

    def reads_after(after: int) -> int:
        return reads_of(conn, lambda: routines.step_rounds(conn, token, ns, long_poll, "check", after=after, limit=5))

    assert reads_after(50) == reads_after(0)


def test_P5_an_earlier_activation_keeps_its_rounds_after_a_reactivation(world, orch):
    world.publish(poll_flow(max_rounds=2))
    wf = started(world, orch)
    pending_rounds(world, orch, wf, 2)  # the budget spent: the step is in review (P-9)
    routines.step_reactivate(world.db.conn, world.token, world.namespace, wf, "check", "try again", "again-1")
    orch.drain()
    latest = page(world, wf)
    assert latest["activation_sequence"] == 2 and [r["number"] for r in latest["rounds"]] == [1]
    assert latest["rounds"][0]["outcome"] == "IN_FLIGHT" and latest["poll_state"] == "IN_FLIGHT"
    first = page(world, wf, activation_sequence=1)
    assert first["activation_sequence"] == 1 and first["poll_state"] == "STOPPED"
    assert first["latest_activation_sequence"] == latest["latest_activation_sequence"] == 2  # the same read says
    assert [(r["number"], r["result"]["output"]["n"]) for r in first["rounds"]] == [(1, 1), (2, 2)]
    # The instance read shows the current activation's rounds only.
    assert [r["outcome"] for r in world.step(wf, "check")["poll"]["rounds"]] == ["IN_FLIGHT"]


PAD = "x" * (900 * 1024)  # a round's result of about 900 KiB: nine make a page of 8 MiB


def answer_rounds(world, orch, first: int, last: int) -> None:
    """Rounds ``first``..``last`` answered PENDING with a result of PAD each, each next round started in turn."""
    for n in range(first, last + 1):
        if n > 1:
            world.db.advance(INTERVAL)
            orch.drain()
        got = claim(world)
        pulse.attempt_complete(world.db.conn, got["attempt_id"], "w1",
                               {"status": "PENDING", "output": {"n": n, "pad": PAD}})


def round_pages(world, wf: str) -> list[list[int]]:
    """The round numbers of each page, as a reader paging with the largest limit reads them."""
    pages, after = [], 0
    while True:
        got = page(world, wf, after=after, limit=1000)
        pages.append([r["number"] for r in got["rounds"]])
        after = got["next_after"]
        if not got["more"]:
            return pages


def sdk_over_sql(world, wf: str) -> sdk.WeaveClient:
    """The SDK's paging of a step's rounds, its requests answered by the routine itself."""

    class OverSql(sdk.WeaveClient):
        def __init__(self) -> None:
            pass

        def _call(self, method, path, body=None, *, params=None, **kw):
            return routines.step_rounds(world.db.conn, world.token, world.namespace, wf, "check",
                                        activation_sequence=params["activation"], after=params["after"],
                                        limit=params["limit"])

    return OverSql()


def test_P5_the_sdk_reads_one_activation_to_its_end_when_the_step_is_reactivated_between_pages(world, orch):
    """Each page asked again for the step's latest activation, so a reactivation between two pages went on with the
    new activation's rounds after the old one's number, one sequence of rounds from two activations."""
    world.publish(poll_flow(max_rounds=2))
    wf = started(world, orch)
    pending_rounds(world, orch, wf, 2)

    first_activation = [r["task_id"] for r in page(world, wf)["rounds"]]
    rounds = sdk_over_sql(world, wf).rounds(wf, "check", page=1)
    got = [next(rounds)["task_id"]]
    routines.step_reactivate(world.db.conn, world.token, world.namespace, wf, "check", "again", "again-1")
    orch.drain()
    pending_rounds(world, orch, wf, 2)
    got += [r["task_id"] for r in rounds]
    assert got == first_activation and len(got) == 2


def test_R11_rounds_refuse_what_has_none_and_limits_out_of_range(world, orch):
    world.publish({"name": "mixed", "steps": [
        {"key": "wait", "type": "TIMER", "delay_ms": 60_000},
        {**poll_flow()["steps"][0], "after": ["wait"]}]})
    wf = started(world, orch, "mixed")
    never = page(world, wf)  # the POLL step was never activated: no activation, no rounds
    assert never["activation_sequence"] is None and never["rounds"] == [] and never["rounds_used"] is None
    assert page(world, wf, "check ")["step_key"] == "check"  # found as the server compares, answered as kept
    for key, kw, code in (("wait", {}, "NOT_FOUND"), ("nope", {}, "NOT_FOUND"),
                          ("check", {"activation_sequence": 1}, "NOT_FOUND"),
                          ("check", {"activation_sequence": 0}, "LIMIT_INVALID"),
                          ("check", {"limit": 0}, "LIMIT_INVALID"), ("check", {"limit": 1001}, "LIMIT_INVALID"),
                          ("check", {"after": -1}, "LIMIT_INVALID")):
        with pytest.raises(errors.WeaveError) as refused:
            page(world, wf, key, **kw)
        assert getattr(refused.value, "field_code", refused.value.code) == code, (key, kw)
    with pytest.raises(errors.WeaveError) as refused:
        page(world, wf, "wait")
    assert "TIMER step" in str(refused.value)


def test_P5_a_rounds_page_ends_once_its_results_pass_8_mib_and_the_next_goes_on_from_there(world, orch):
    """A page held up to 1,000 rounds whatever their results weighed: 150 rounds of 1 MiB were one answer of 150 MiB,
    built whole by the server, the API and the client. A page now ends once its results pass 8 MiB, always holding
    one round; its next_after and more lead on, and paging reads every round once, in order."""
    world.publish(poll_flow(max_rounds=20))
    wf = started(world, orch)
    answer_rounds(world, orch, 1, 12)
    assert round_pages(world, wf) == [list(range(1, 11)), [11, 12]]  # 9 results: 8,100 KiB; the 10th passes 8 MiB
    assert [r["result"]["output"]["n"] for r in page(world, wf, after=9, limit=2)["rounds"]] == [10, 11]
    one = page(world, wf, after=10, limit=1000)
    assert one["rounds"][0]["number"] == 11 and one["rounds"][0]["result"]["output"]["pad"] == PAD

    assert [r["number"] for r in sdk_over_sql(world, wf).rounds(wf, "check", page=1000)] == list(range(1, 13))
