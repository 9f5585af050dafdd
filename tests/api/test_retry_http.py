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



def test_C4_retry_over_http_sends_a_step_held_back_by_a_failing_decision_on(client, world, orch):
    """The step's reason is closed and the step is ACTIVE again in the activation it had, as the answer shows; with
    nothing to retry, the refusal names a step to act on instead."""
    from tests.support.signals import failing_in_review, signal_flow

    wf, _ = failing_in_review(world, orch)
    body = {"reason": "routines reinstalled"}
    done = client.simulate_post(f"{NS}/workflows/{wf}/retry", headers=auth(world.token, "t1"), json=body)
    assert done.status_code == 200, done.text
    (step,) = done.json["steps"]
    assert (done.json["status"], step["status"], step["activation_sequence"]) == ("RUNNING", "ACTIVE", 1)
    orch.drain()
    assert world.instance(wf)["status"] == "SUCCEEDED"
    world.publish(signal_flow("short", timeout_ms=1_000))
    timed_out = world.start("short", {"order_id": "o-2"})
    world.db.advance(2_000)
    orch.drain()  # no signal came: SIGNAL_TIMEOUT, the step's own reason
    refused = client.simulate_post(f"{NS}/workflows/{timed_out}/retry", headers=auth(world.token, "t2"), json=body)
    assert (refused.status_code, refused.json["code"]) == (409, "INVALID_STATE")
    assert refused.json["detail"].endswith("nothing to retry; reactivate or resolve its step approval"), refused.json
