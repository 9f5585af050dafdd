"""Z-6 at the HTTP edge, on the real server behind two forwarders that stand for two nodes of a cluster
(tests/support/proxy.py): the node under a request keeps taking statements and commits them, but its answers
are lost. The API then repeats the request on the other node only where a repeat cannot do anything twice —
a read, or a request whose routine took its Idempotency-Key and replays the first run — and answers 503
otherwise, without repeating it. Never a 2xx for what is not stored, never a write stored twice.
"""

from __future__ import annotations

import pytest
from falcon import testing

from api.app import PREFIX, create_app
from api.http import ApiConnections
from tests.api.conftest import auth
from tests.support.proxy import two_nodes

URL = PREFIX.replace("{ns}", "acme")
COOL_OFF = {"name": "cool-off", "steps": [{"key": "wait", "type": "TIMER", "delay_ms": 60_000}]}


@pytest.fixture
def api(database, world):
    world.publish(COOL_OFF)
    with two_nodes(database, connect_timeout=1, read_timeout=1, write_timeout=1) as (pair, dsn):
        connections = ApiConnections(dsn)
        try:
            yield pair, connections, testing.TestClient(create_app(connections))
        finally:
            connections.close_all()


def test_Z6_a_keyed_request_whose_answer_was_lost_is_replayed_on_another_node(api, world):
    (a, b), connections, client = api
    assert client.simulate_get(URL + "/workflows", headers=auth(world.token)).status_code == 200
    assert connections.get().port == a.port
    a.hang(answers_only=True)
    body = {"definition": "cool-off", "app": "billing", "input": {"n": 1}, "deadline_ms": 86_400_000}
    started = client.simulate_post(URL + "/workflows", json=body, headers=auth(world.token, "start-once"))
    # The first run committed on node a; the repeat on node b found the key and replayed it.
    assert started.status_code == 200 and started.headers.get("Idempotent-Replayed") == "true", started.text
    assert connections.get().port == b.port
    assert world.db.scalar("SELECT COUNT(*) FROM weave_instances WHERE idempotency_key = 'start-once'") == 1
    assert started.json["workflow_id"] == world.start("cool-off", {"n": 1}, key="start-once")


def test_Z6_a_read_whose_node_was_lost_is_read_again_on_another_node(api, world):
    (a, b), connections, client = api
    wf = world.start("cool-off", {"n": 2})
    assert client.simulate_get(URL + f"/workflows/{wf}", headers=auth(world.token)).status_code == 200
    a.hang()
    got = client.simulate_get(URL + f"/workflows/{wf}", headers=auth(world.token))
    assert got.status_code == 200 and got.json["workflow_id"] == wf and connections.get().port == b.port


def test_Z6_a_write_without_a_key_whose_answer_was_lost_answers_503_and_is_not_repeated(api, world):
    (a, _), connections, client = api
    assert client.simulate_get(URL + "/workflows", headers=auth(world.token)).status_code == 200
    audits = world.db.scalar("SELECT COUNT(*) FROM weave_audit WHERE action = 'app.put'")
    a.hang(answers_only=True)
    put = client.simulate_post(URL + "/apps", json={"name": "lost-answer", "max_in_flight": 5},
                               headers=auth(world.admin))
    assert put.status_code == 503 and put.headers.get("Retry-After") == "1", put.text
    # It committed (the answer, not the statement, was lost) and ran exactly once.
    assert world.db.scalar("SELECT COUNT(*) FROM weave_apps WHERE name = 'lost-answer'") == 1
    assert world.db.scalar("SELECT COUNT(*) FROM weave_audit WHERE action = 'app.put'") == audits + 1


@pytest.mark.parametrize("path", ["/readyz", "/metrics"])
def test_Z6_readiness_and_metrics_whose_node_was_lost_are_read_again_on_another_node(api, world, path):
    """/readyz and /metrics read like any GET: a node lost under one is not the database being away, and a
    readiness probe answered 503 then would take every API node out of its load balancer at once."""
    (a, b), connections, client = api
    assert client.simulate_get(path).status_code == 200
    assert connections.get().port == a.port
    a.hang()
    got = client.simulate_get(path)
    assert got.status_code == 200, got.text
    assert connections.get().port == b.port
