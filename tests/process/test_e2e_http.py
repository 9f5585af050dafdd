"""End to end through HTTP only (plus the SQL test clock): real `weave api`, `weave orchestrator` and
`weave worker` processes, driven with the Python SDK."""

from __future__ import annotations

import pytest

from api import client as sdk
from tests.support.processes import WeaveProcess, start_api
from tests.support.waiting import wait_for

FLOW = {"name": "order", "steps": [
    {"key": "charge", "type": "TASK", "queue": "payments", "handler": "example.echo", "handler_version": "1",
     "input": {"order_id": "$.input.order_id", "amount": "$.input.amount"}},
    {"key": "cool_off", "type": "TIMER", "after": ["charge"], "delay_ms": 60_000},
    {"key": "receipt", "type": "TASK", "after": ["cool_off"], "queue": "payments", "handler": "example.echo",
     "handler_version": "1", "input": {"charged": "$.steps.charge.output.amount"}},
    {"key": "approval", "type": "SIGNAL", "after": ["receipt"],
     "signal": {"name": "approval.decided", "payload_version": "1", "payload_type": "object"},
     "correlation": "$.input.order_id", "timeout_ms": 3_600_000}]}


@pytest.fixture
def engine(database, world, tmp_path):
    api, url = start_api(database, tmp_path / "api.log")
    procs = [api, WeaveProcess(database, "orchestrator", log=tmp_path / "orch.log"),
             WeaveProcess(database, "worker", "--handlers", "orchestrator.example_handlers", "--queue", "payments",
                          "--concurrency", "2", log=tmp_path / "worker.log")]
    yield url
    for p in procs:
        assert p.terminate() == 0, f"{p.args[0]} did not stop cleanly"
        p.close()


def _started(engine: str, world, order: str, amount: int) -> tuple[sdk.WeaveClient, str]:
    """The flow published by the admin, one instance started by the operator: (operator client, its id)."""
    sdk.WeaveClient(engine, world.admin, "acme").publish_definition(FLOW)
    ops = sdk.WeaveClient(engine, world.token, "acme")
    started = ops.start_workflow("order", app="billing", input={"order_id": order, "amount": amount},
                                 deadline_ms=86_400_000)
    return ops, started["workflow_id"]


def test_task_timer_task_signal_through_http_only(engine, world):
    ops, wf = _started(engine, world, "o-7", 42)
    # An early approval, before its step is active (S-10): it waits and wins when the step activates.
    receipt = ops.send_signal(wf, name="approval.decided", payload_version="1", target_step_key="approval",
                              target_activation_sequence=1, correlation_key="o-7",
                              payload={"approved": True}, reason="risk ok")
    assert receipt["status"] == "PENDING"

    def step(key: str) -> dict:
        return next(s for s in ops.get_workflow(wf)["steps"] if s["key"] == key)

    assert wait_for(lambda: step("cool_off")["status"] == "ACTIVE", timeout=30)
    assert step("charge")["output"] == {"order_id": "o-7", "amount": 42}
    world.db.advance(60_001)  # the only thing not done over HTTP: the test clock
    assert wait_for(lambda: ops.get_workflow(wf)["status"] == "SUCCEEDED", timeout=30)
    inst = ops.get_workflow(wf)
    assert [s["output"] for s in inst["steps"]] == [{"order_id": "o-7", "amount": 42}, None, {"charged": 42},
                                                    {"approved": True}]
    assert ops.get_signal(wf, receipt["signal_id"])["status"] == "CONSUMED"
    types = [e["type"] for e in ops.events(wf)]
    assert types[0] == "INSTANCE_STARTED" and types[-1] == "INSTANCE_SUCCEEDED"
    assert types.count("TASK_SUCCEEDED") == 2 and "TIMER_SETTLED" in types


def test_pause_resume_and_cancel_through_http_only(engine, world):
    ops, wf = _started(engine, world, "o-8", 1)
    assert wait_for(lambda: ops.get_workflow(wf)["steps"][1]["status"] == "ACTIVE", timeout=30)
    assert ops.pause(wf, "fraud check")["control"] == "PAUSED"
    world.db.advance(60_001)
    assert wait_for(lambda: ops.get_workflow(wf)["steps"][1]["status"] == "SUCCEEDED", timeout=30)
    assert ops.get_workflow(wf)["steps"][2]["status"] == "PENDING"  # T-5: the successor waits for resume
    ops.resume(wf, "fraud check passed")
    assert wait_for(lambda: ops.get_workflow(wf)["steps"][3]["status"] == "ACTIVE", timeout=30)
    cancelled = ops.cancel(wf, "customer withdrew")
    assert cancelled["status"] == "CANCELLED" and cancelled["gate"] == "CLOSED"
    with pytest.raises(sdk.InvalidState):
        ops.pause(wf, "too late")
