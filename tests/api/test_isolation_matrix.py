"""Z-5: every endpoint × missing scope, other namespace, disabled credential, queue not allowed, no token:
401/403/404 as specified, no row changed, nothing of another namespace in the answer."""

from __future__ import annotations

import json

import pytest

from procedures import routines
from tests.api.conftest import auth
from tests.support.world import World

NS = "/v1/namespaces/acme"
FLOW = {"name": "flow", "steps": [
    {"key": "approval", "type": "SIGNAL", "signal": {"name": "ok", "payload_version": "1", "payload_type": "any"},
     "correlation": "$.input.id", "timeout_ms": 3_600_000},
    {"key": "charge", "type": "TASK", "after": ["approval"], "queue": "payments", "handler": "example.echo",
     "handler_version": "1"}]}
SIGNAL = {"name": "ok", "payload_version": "1", "target_step_key": "approval", "target_activation_sequence": 1,
          "correlation_key": "x", "payload": 1, "reason": "r"}

# (method, path, body, scope, instance-scoped: the queue check applies)
ENDPOINTS = [
    ("POST", "/definitions", {"name": "other", "steps": [{"key": "t", "type": "TIMER", "delay_ms": 1}]},
     "definitions:publish", False),
    ("GET", "/definitions/flow/versions/1", None, "workflows:read", False),
    ("POST", "/workflows", {"definition": "flow", "app": "billing", "input": {"id": "x"}, "deadline_ms": 60_000},
     "workflows:start", True),
    ("GET", "/workflows", None, "workflows:read", False),
    ("GET", "/workflows/{wf}", None, "workflows:read", True),
    ("GET", "/workflows/{wf}/events", None, "workflows:read", True),
    ("POST", "/workflows/{wf}/signals", SIGNAL, "workflows:signal", True),
    ("GET", "/workflows/{wf}/signals", None, "workflows:read", True),
    ("GET", "/workflows/{wf}/signals/{sig}", None, "workflows:read", True),
    ("GET", "/workflows/{wf}/steps/approval/explain", None, "workflows:read", True),
    ("POST", "/workflows/{wf}/pause", {"reason": "r"}, "workflows:control", True),
    ("POST", "/workflows/{wf}/resume", {"reason": "r"}, "workflows:control", True),
    ("POST", "/workflows/{wf}/cancel", {"reason": "r"}, "workflows:control", True),
    ("POST", "/workflows/{wf}/deadline", {"reason": "r", "extend_ms": 1000}, "workflows:review", True),
    ("POST", "/workflows/{wf}/retry", {"reason": "r"}, "workflows:review", True),
    ("POST", "/workflows/{wf}/steps/approval/reactivate", {"reason": "r"}, "workflows:review", True),
    ("POST", "/workflows/{wf}/steps/approval/resolve", {"reason": "r", "output": 1}, "workflows:review", True),
    ("POST", "/workflows/{wf}/steps/approval/continue", {"reason": "r", "extra_rounds": 1}, "workflows:review", True),
    ("POST", "/apps", {"name": "x", "max_in_flight": 1}, "admin", False),
    ("POST", "/queues", {"name": "x", "capacity": 1}, "admin", False),
    ("POST", "/credentials", {"actor": "x", "scopes": ["workflows:read"]}, "admin", False),
]
ALL_SCOPES = ["admin", "definitions:publish", "workflows:read", "workflows:start", "workflows:signal",
              "workflows:control", "workflows:review"]


@pytest.fixture
def scene(db, world, client):
    world.publish(FLOW)
    wf = world.start("flow", {"id": "x"})
    from procedures import signals

    sig = signals.send(db.conn, world.token, "acme", wf, idempotency_key="s1", name="ok", payload_version="1",
                       target_step_key="approval", target_activation_sequence=1, correlation_key=b"zz",
                       payload=b"1", reason="r")["signal_id"]
    other = World.create(db, "beta")
    creds = {
        "disabled": world.credential(ALL_SCOPES, actor="gone"),
        "other_namespace": other.credential(ALL_SCOPES, actor="outsider"),
        "queue_not_allowed": world.credential(ALL_SCOPES, queues=["elsewhere"], actor="narrow"),
    }
    routines.credential_disable(db.conn, world.admin, "acme", creds["disabled"]["credential_id"])
    return {"wf": wf, "sig": sig, "creds": {k: v["token"] for k, v in creds.items()}, "world": world}


def call(client, method, path, body, token, key):
    headers = {"Content-Type": "application/json", "Idempotency-Key": key}
    if token:
        headers.update(auth(token))
    return client.simulate_request(method, NS + path, headers=headers, body=json.dumps(body) if body else None)


@pytest.mark.parametrize("method, path, body, scope, queued", ENDPOINTS, ids=[f"{e[0]} {e[1]}" for e in ENDPOINTS])
def test_Z5_every_endpoint_refuses_and_changes_nothing(client, scene, method, path, body, scope, queued):
    world = scene["world"]
    target = path.format(wf=scene["wf"], sig=scene["sig"])
    missing_scope = world.credential([s for s in ALL_SCOPES if s != scope], actor="almost")["token"]
    cases = [("no token", None, 401, "UNAUTHENTICATED"),
             ("disabled credential", scene["creds"]["disabled"], 401, "UNAUTHENTICATED"),
             ("other namespace", scene["creds"]["other_namespace"], 404, "NOT_FOUND"),
             ("missing scope", missing_scope, 403, "FORBIDDEN")]
    if queued:
        cases.append(("queue not allowed", scene["creds"]["queue_not_allowed"], 403, "FORBIDDEN"))
    before = world.db.table_counts()
    for label, token, status, code in cases:
        result = call(client, method, target, body, token, key=f"matrix-{label}")
        assert (result.status_code, result.json.get("code")) == (status, code), (label, result.text)
        assert "beta" not in result.text and "outsider" not in result.text
    assert world.db.table_counts() == before


@pytest.mark.parametrize("method, path, body, scope, queued", ENDPOINTS, ids=[f"{e[0]} {e[1]}" for e in ENDPOINTS])
def test_Z5_a_namespace_spelled_with_a_trailing_space_is_another_namespace(client, scene, method, path, body, scope,
                                                                          queued):
    """The names' collation pads spaces: `acme%20` found acme, served every request of it, and answered the
    namespace as typed. A namespace is found as written, and one that does not exist answers 404."""
    world = scene["world"]
    token = world.credential(ALL_SCOPES, actor="everything")["token"]
    before = world.db.table_counts()
    result = client.simulate_request(
        method, "/v1/namespaces/acme%20" + path.format(wf=scene["wf"], sig=scene["sig"]),
        headers={"Content-Type": "application/json", "Idempotency-Key": "padded", **auth(token)},
        body=json.dumps(body) if body else None)
    assert (result.status_code, result.json.get("code")) == (404, "NOT_FOUND"), result.text
    assert world.db.table_counts() == before
