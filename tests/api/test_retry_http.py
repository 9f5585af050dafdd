"""C-4 `retry` over HTTP: the instance's own CANDIDATE_FAILING reason closed with one audited, idempotent request,
and the SDK's call of it."""

from __future__ import annotations

import json

from api import client as sdk
from tests.api.conftest import auth
from tests.api.test_sdk_transport import server  # noqa: F401  (the recording server the SDK test talks to)
from tests.sql.test_instance_retry import early_signal_in_review

NS = "/v1/namespaces/acme"


def test_C4_retry_over_http_reopens_the_instance_and_replays_its_answer(client, world, orch):
    wf = early_signal_in_review(world, orch)
    body = {"reason": "routines reinstalled"}
    first = client.simulate_post(f"{NS}/workflows/{wf}/retry", headers=auth(world.token, "t1"), json=body)
    assert first.status_code == 200, first.text
    assert (first.json["status"], first.json["gate"], first.json["review_reasons"]) == ("RUNNING", "OPEN", [])
    assert "Idempotent-Replayed" not in first.headers
    again = client.simulate_post(f"{NS}/workflows/{wf}/retry", headers=auth(world.token, "t1"), json=body)
    assert again.status_code == 200 and again.headers["Idempotent-Replayed"] == "true"
    refused = client.simulate_post(f"{NS}/workflows/{wf}/retry", headers=auth(world.token, "t2"), json=body)
    assert (refused.status_code, refused.json["code"]) == (409, "INVALID_STATE")
    assert "RUNNING, not NEEDS_REVIEW" in refused.json["detail"]
    assert world.db.scalar("SELECT COUNT(*) FROM weave_audit WHERE action = 'instance.retry'") == 1


def test_C4_the_sdk_retries_an_instance_with_its_reason_and_key(server):  # noqa: F811
    sdk_client = sdk.WeaveClient(server.url, "wv_x", "acme")
    assert sdk_client.retry("wf_7", "fixed", idempotency_key="k1")["path"] == "/v1/namespaces/acme/workflows/wf_7/retry"
    assert json.loads(server.bodies[-1]) == {"reason": "fixed"}
