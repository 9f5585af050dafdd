"""S-2 for values longer than any the engine holds: a token longer than any credential's is a 401, and a path whose
namespace, instance, signal, step, definition or credential is longer than any the engine names answers as any
object that is not there, a 404 once the token is known (a 401 before), never a 422 naming a routine's parameter."""

from __future__ import annotations

import json

import pytest

from api.http import IDEMPOTENCY_KEY_MAX, PATH_WIDTHS, TOKEN_MAX
from tests.api.conftest import auth

LONG = "x" * 300
FLOW = {"name": "flow", "steps": [
    {"key": "approval", "type": "SIGNAL", "signal": {"name": "ok", "payload_version": "1", "payload_type": "any"},
     "correlation": "$.input.id", "timeout_ms": 3_600_000}]}
PATHS = [
    ("GET", f"/v1/namespaces/{LONG}/workflows", None),
    ("GET", f"/v1/namespaces/acme/workflows/wf_{'1' * 100}", None),
    ("GET", f"/v1/namespaces/acme/workflows/{{wf}}/signals/sig_{'1' * 100}", None),
    ("GET", f"/v1/namespaces/acme/workflows/{{wf}}/steps/{LONG}/explain", None),
    ("POST", f"/v1/namespaces/acme/workflows/{{wf}}/steps/{LONG}/reactivate", {"reason": "r"}),
    ("POST", f"/v1/namespaces/acme/workflows/{{wf}}/steps/{'k' * 65}/reactivate", {"reason": "r"}),  # keys <= 64
    ("GET", f"/v1/namespaces/acme/definitions/{LONG}", None),
    ("GET", f"/v1/namespaces/acme/definitions/{LONG}/versions/1", None),
    ("POST", f"/v1/namespaces/acme/credentials/cred_{'1' * 100}/disable", None),
]


@pytest.mark.parametrize("method, path, body", PATHS, ids=[f"{m} {p[:60]}" for m, p, _ in PATHS])
def test_S2_a_path_longer_than_anything_it_could_name_is_a_404_after_the_token_is_checked(client, world, method,
                                                                                           path, body):
    world.publish(FLOW)
    path = path.replace("{wf}", world.start("flow", {"id": "x"}))
    token = world.admin if "credentials" in path else world.token
    for who, status, code in ((token, 404, "NOT_FOUND"), ("wv_unknown", 401, "UNAUTHENTICATED")):
        headers = {**auth(who, "k1"), "Content-Type": "application/json"}
        answer = client.simulate_request(method, path, headers=headers, body=json.dumps(body) if body else None)
        assert (answer.status_code, answer.json["code"]) == (status, code), answer.text
        assert "in_" not in answer.json["detail"]


def test_S2_a_token_longer_than_any_credential_s_is_a_401(client, world):
    for token in ("a" * 257, "a" * 600, "\u00e9" * 300):
        answer = client.simulate_get("/v1/namespaces/acme/workflows", headers=auth(token))
        assert (answer.status_code, answer.json["code"]) == (401, "UNAUTHENTICATED"), answer.text
        assert answer.headers["www-authenticate"] == 'Bearer realm="weave"'


def test_S2_the_api_s_widths_are_those_of_the_routines_parameters(db):
    """The widths the API holds a path value, a token and an Idempotency-Key to are the routines' own: wider, a value
    between the two would reach the database and be refused as it binds (a 422 naming a parameter); narrower, a name
    the engine holds would be answered as missing."""
    def narrowest(parameter: str) -> int:
        return db.scalar("SELECT MIN(CHARACTER_MAXIMUM_LENGTH) FROM information_schema.PARAMETERS "
                         "WHERE SPECIFIC_SCHEMA = DATABASE() AND PARAMETER_NAME = %s", parameter)

    parameter = {"ns": "in_namespace"}  # each other path value is the routines' in_<name>
    assert {name: narrowest(parameter.get(name, f"in_{name}")) for name in PATH_WIDTHS} == PATH_WIDTHS
    assert TOKEN_MAX <= narrowest("in_token")
    assert IDEMPOTENCY_KEY_MAX <= narrowest("in_idempotency_key")
