"""06-control end to end with real processes: a POLL ends in review, an operator continues it, a final signal
then settles it, and the instance succeeds; the event history tells the whole story."""

from __future__ import annotations

from api import client as sdk
from tests.process.test_e2e_http import engine  # noqa: F401  (the api + orchestrator + worker fixture)
from tests.support.waiting import wait_for

FLOW = {"name": "settle", "steps": [
    {"key": "check_payment", "type": "POLL", "queue": "payments", "handler": "example.poll", "handler_version": "1",
     "input": {"order_id": "$.input.order_id", "done_at": 99}, "interval_ms": 1, "max_rounds": 2,
     "timeout_ms": 3_600_000, "result": {"pending": ["PENDING"], "success": ["PAID"], "review": ["MANUAL_CHECK"]},
     "final_signal": {"name": "payment.final", "payload_version": "1", "correlation": "$.input.order_id"}}]}


def test_C4_poll_in_review_continued_then_settled_by_its_final_signal(engine, world):  # noqa: F811
    admin = sdk.WeaveClient(engine, world.admin, "acme")
    ops = sdk.WeaveClient(engine, world.token, "acme")
    admin.publish_definition(FLOW)
    wf = ops.start_workflow("settle", app="billing", input={"order_id": "o-9"}, deadline_ms=86_400_000)["workflow_id"]
    assert wait_for(lambda: ops.get_workflow(wf)["status"] == "NEEDS_REVIEW", timeout=30)
    inst = ops.get_workflow(wf)
    assert [r["code"] for r in inst["review_reasons"]] == ["POLL_ROUNDS_EXHAUSTED"]
    assert inst["steps"][0]["poll"]["rounds_used"] == 2

    ops.continue_poll(wf, "check_payment", "the bank is slow today", extra_rounds=50)
    receipt = ops.send_signal(wf, name="payment.final", payload_version="1", target_step_key="check_payment",
                              target_activation_sequence=1, correlation_key="o-9",
                              payload={"status": "PAID", "output": {"by": "bank callback"}}, reason="bank webhook")
    assert receipt["status"] == "PENDING"
    assert wait_for(lambda: ops.get_workflow(wf)["status"] == "SUCCEEDED", timeout=30)
    step = ops.get_workflow(wf)["steps"][0]
    assert step["output"] == {"status": "PAID", "output": {"by": "bank callback"}}
    assert step["final_wait"]["winner_signal_id"] == receipt["signal_id"]
    types = [e["type"] for e in ops.events(wf)]
    story = ["INSTANCE_STARTED", "STEP_ACTIVATED", "POLL_ROUNDS_EXHAUSTED", "REVIEW_OPENED", "POLL_CONTINUED",
             "INSTANCE_REOPENED", "SIGNAL_ACCEPTED", "INSTANCE_SUCCEEDED"]
    positions = [types.index(t) for t in story]
    assert positions == sorted(positions), types
