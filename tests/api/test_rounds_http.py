"""A POLL step's rounds over HTTP (P-5, R-11): the same page as from SQL, each result as kept, and the refusals of the
API's conventions."""

from __future__ import annotations

from api import client as sdk
from procedures import pulse, routines
from tests.api.conftest import auth
from tests.api.test_explain_http import POLL
from tests.support import json_only


def rounds_path(world, wf: str, step: str = "check") -> str:
    return f"/v1/namespaces/{world.namespace}/workflows/{wf}/steps/{step}/rounds"


def pending_round(world, orch, result: str) -> None:
    (task,) = pulse.task_claim(world.db.conn, "w1", "payments", limit=1)
    pulse.attempt_complete(world.db.conn, task["attempt_id"], "w1", result_json=result)
    world.db.advance(1_000)
    orch.drain()


def test_P5_R11_rounds_over_http_are_the_sql_page_with_each_result_as_kept(world, orch, client):
    world.publish(POLL)
    wf = world.start("poll-flow")
    orch.drain()
    kept = '{"status": "PENDING", "amount": 12345678901234567890.10}'
    pending_round(world, orch, kept)
    pending_round(world, orch, '{"status": "PENDING"}')
    first = client.simulate_get(rounds_path(world, wf), params={"limit": 2}, headers=auth(world.token))
    assert first.status_code == 200
    page = json_only(first.text)
    assert f'"result": {kept}' in first.text
    sql = routines.step_rounds(world.db.conn, world.token, world.namespace, wf, "check", limit=2)
    assert [r["number"] for r in page["rounds"]] == [r["number"] for r in sql["rounds"]] == [1, 2]
    assert page["next_after"] == 2 and page["activation_sequence"] == 1 and page["rounds_used"] == 3
    assert page["more"] is True  # round 3 follows: the rounds are numbered 1..rounds_used
    rest = client.simulate_get(rounds_path(world, wf), params={"after": 2}, headers=auth(world.token)).json
    assert [(r["number"], r["outcome"], r["result"]) for r in rest["rounds"]] == [(3, "IN_FLIGHT", None)]
    assert rest["more"] is False  # the last: no empty page to ask for
    assert client.simulate_get(rounds_path(world, wf), params={"after": 3},
                               headers=auth(world.token)).json["next_after"] == 3


def test_R11_rounds_over_http_refuse_bad_pages_and_steps_without_rounds(world, orch, client):
    world.publish({"name": "cool", "steps": [{"key": "cool", "type": "TIMER", "delay_ms": 60_000}]})
    wf = world.start("cool")
    orch.drain()
    assert client.simulate_get(rounds_path(world, wf, "cool")).status_code == 401
    timer = client.simulate_get(rounds_path(world, wf, "cool"), headers=auth(world.token))
    assert timer.status_code == 404 and "TIMER step" in timer.json["detail"]
    for params in ({"limit": 0}, {"after": -1}, {"activation": 0}, {"after": "x"}):
        bad = client.simulate_get(rounds_path(world, wf, "cool"), params=params, headers=auth(world.token))
        assert bad.status_code == 422, params
    # Each out of range under the code the routine gives it, as a SQL client gets it.
    for params in ({"limit": 0}, {"after": -1}, {"activation": 0}):
        bad = client.simulate_get(rounds_path(world, wf, "cool"), params=params, headers=auth(world.token))
        assert [e["code"] for e in bad.json["errors"]] == ["LIMIT_INVALID"], (params, bad.json)


def test_P5_a_rounds_page_over_http_ends_once_its_results_pass_8_mib(world, orch, client):
    """150 rounds of 1 MiB were one answer of 150 MiB (the API's worker peaked at 474 MB) to one workflows:read
    request, and 1,000 could be a gigabyte. A page now ends once its results pass 8 MiB, always holding one round;
    its next_after and more lead on, and the SDK's iterator still reads every round once."""
    world.publish({**POLL, "steps": [{**POLL["steps"][0], "max_rounds": 20}]})
    wf = world.start("poll-flow")
    orch.drain()
    pad = "x" * (1000 * 1024)
    for n in range(1, 11):
        pending_round(world, orch, f'{{"status": "PENDING", "n": {n}, "pad": "{pad}"}}')
    pages, after = [], 0
    while True:
        got = client.simulate_get(rounds_path(world, wf), params={"after": after, "limit": 1000},
                                  headers=auth(world.token))
        assert got.status_code == 200
        body = json_only(got.text)
        pages.append([r["number"] for r in body["rounds"]])
        assert len(got.content) < 10 * 1024 * 1024  # one result past 8 MiB at most
        after = body["next_after"]
        if not body["more"]:
            break
    assert pages == [list(range(1, 10)), [10, 11]]  # 8 results make 8,000 KiB; the 9th passes 8 MiB: the page ends
    assert body["rounds"][0]["result"]["n"] == 10 and body["rounds"][1]["outcome"] == "IN_FLIGHT"

    class OverHttp(sdk.WeaveClient):  # the SDK's paging, its requests answered by the API
        def __init__(self) -> None:
            pass

        def _call(self, method, path, body=None, *, params=None, **kw):
            given = {name: value for name, value in params.items() if value is not None}
            return client.simulate_get(f"/v1/namespaces/{world.namespace}/{path}", params=given,
                                       headers=auth(world.token)).json

    assert [r["number"] for r in OverHttp().rounds(wf, "check", page=1000)] == list(range(1, 12))
