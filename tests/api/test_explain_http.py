"""S-17 over HTTP and from SQL: one representation of the same facts."""

from __future__ import annotations

from orchestrator.cli import main
from procedures import pulse, signals
from tests.api.conftest import auth
from tests.support import json_only


def explain(world, wf: str, step: str) -> dict:
    return signals.explain(world.db.conn, world.token, world.namespace, wf, step)


def test_S17_sql_and_http_answer_the_same_representation(world, orch, client):
    """Instance-level events and reasons have no step: NULL in SQL, null over HTTP; no review codes is []."""
    world.publish({"name": "cool", "steps": [{"key": "cool", "type": "TIMER", "delay_ms": 60_000}]})
    wf = world.start("cool")
    orch.drain()
    rows = world.db.call("weave_instance_events", world.token, world.namespace, wf, 0, 100)[0]
    first = rows[0]
    assert first["step_key"] is None and first["activation_seq"] is None
    (head,) = world.db.call("weave_step_explain", world.token, world.namespace, wf, "cool")[0]
    assert head["open_review_codes"] == "[]"
    http = client.simulate_get(f"/v1/namespaces/{world.namespace}/workflows/{wf}/steps/cool/explain",
                               headers=auth(world.token))
    assert http.status_code == 200
    assert http.json["timer"] == explain(world, wf, "cool")["timer"] and http.json["open_review_codes"] == []


def test_S17_an_unknown_step_is_not_found_and_says_which_object(world, client):
    world.publish({"name": "cool", "steps": [{"key": "cool", "type": "TIMER", "delay_ms": 60_000}]})
    wf = world.start("cool")
    http = client.simulate_get(f"/v1/namespaces/{world.namespace}/workflows/{wf}/steps/nope/explain",
                               headers=auth(world.token))
    assert http.status_code == 404 and http.json["code"] == "NOT_FOUND"
    assert http.json["detail"] == "the instance has no step with this key"


POLL = {"name": "poll-flow", "steps": [{"key": "check", "type": "POLL", "queue": "payments",
                                        "handler": "payments.check", "handler_version": "1", "interval_ms": 1000,
                                        "max_rounds": 3, "timeout_ms": 60_000,
                                        "result": {"pending": ["PENDING"], "success": ["DONE"],
                                                   "review": ["MANUAL_CHECK"]}}]}


def test_S17_a_poll_result_in_a_review_reason_is_explained_as_kept_as_the_instance_gives_it(world, orch, client,
                                                                                           capsys):
    """The explain answer's blockers hold the open review reason's facts, with the round's result. They were parsed
    and written again: an amount of 12345678901234567890.10 came back 1.2345678901234567e+19, the very value the
    operator decides a POLL_REVIEW_VALUE on, 1e300 came back 1e+300, and a number no double holds (a worker could
    report one over SQL until such numbers were refused where they come in) as Infinity, which is not JSON: no
    client could read the answer. The instance gives them as kept, and so does explain, over HTTP and from the
    command line."""
    world.publish(POLL)
    wf = world.start("poll-flow")
    orch.drain()
    (task,) = pulse.task_claim(world.db.conn, "w1", "payments", limit=1)
    result = '{"status": "MANUAL_CHECK", "amount": 12345678901234567890.10, "n": 1e300}'
    pulse.attempt_complete(world.db.conn, task["attempt_id"], "w1", result_json=result)
    orch.drain()
    shown = client.simulate_get(f"/v1/namespaces/{world.namespace}/workflows/{wf}", headers=auth(world.token))
    assert f'"result": {result}' in shown.text.split('"review_reasons"', 1)[1]
    http = client.simulate_get(f"/v1/namespaces/{world.namespace}/workflows/{wf}/steps/check/explain",
                               headers=auth(world.token))
    assert http.status_code == 200
    answer = json_only(http.text)
    assert [b["reason"] for b in answer["blockers"] if b["blocker"] == "REVIEW"] == ["POLL_REVIEW_VALUE"]
    assert f'"result": {result}' in http.text
    assert main(["workflows", "explain", wf, "check", "--json", "--dsn", world.db.dsn.url(), "--namespace",
                 world.namespace, "--token", world.token]) == 0
    printed = capsys.readouterr().out
    json_only(printed)
    assert f'"result": {result}' in printed
