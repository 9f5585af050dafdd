"""S-17 over HTTP and from SQL: one representation of the same facts."""

from __future__ import annotations

from procedures import signals
from tests.api.conftest import auth


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
