"""Scenario helpers for SIGNAL steps: definitions, a default Send, and a stand-in for recovery."""

from __future__ import annotations

import itertools
from typing import Any

from procedures import signals
from tests.support.world import World

HOUR = 3_600_000
NAME = "approval.decided"
VERSION = "1"
_keys = itertools.count(1)


def signal_step(key: str = "approval", *, name: str = NAME, version: str = VERSION, payload_type: str = "object",
                correlation: str = "$.input.order_id", timeout_ms: int = HOUR, after: list[str] | None = None) -> dict:
    step = {"key": key, "type": "SIGNAL", "signal": {"name": name, "payload_version": version,
                                                     "payload_type": payload_type},
            "correlation": correlation, "timeout_ms": timeout_ms}
    if after:
        step["after"] = after
    return step


def signal_flow(name: str = "approval-flow", *, then_timer: bool = False, before_timer_ms: int | None = None,
                **step) -> dict:
    """A SIGNAL step `approval`; optionally a TIMER before it (so it starts later) and/or one after it."""
    steps = []
    if before_timer_ms is not None:
        steps.append({"key": "cool_off", "type": "TIMER", "delay_ms": before_timer_ms})
        step.setdefault("after", ["cool_off"])
    steps.append(signal_step(**step))
    if then_timer:
        key = step.get("key", "approval")
        steps.append({"key": f"after_{key}", "type": "TIMER", "delay_ms": 60_000, "after": [key]})
    return {"name": name, "steps": steps}


def send(world: World, workflow_id: str, key: str | None = None, *, token: str | None = None,
         namespace: str | None = None, conn=None, in_tx: bool = False, **fields: Any) -> dict:
    """Send with sensible defaults for the `approval` step; any field can be overridden."""
    args = {"name": NAME, "payload_version": VERSION, "target_step_key": "approval", "target_activation_sequence": 1,
            "correlation_key": "o-1", "payload": '{"approved": true}', "reason": "approved by the desk",
            "evidence_ref": None}
    args.update(fields)
    fn = signals.send_in_tx if in_tx else signals.send
    return fn(conn or world.db.conn, token or world.token, namespace or world.namespace, workflow_id,
              idempotency_key=key or f"sig-{next(_keys)}", **args)


def signal_row(world: World, signal_id: str) -> dict:
    return world.db.row("SELECT * FROM weave_signals WHERE id = %s", int(signal_id.removeprefix("sig_")))


def reactivate(world: World, workflow_id: str, step_key: str = "approval") -> None:
    """Stand-in for the recovery action `reactivate` (C-4), which is not built yet: closes the step's review
    reasons, reopens the instance and creates activation k+1 through the real activation routine."""
    inst = world.internal_id(workflow_id)
    conn = world.db.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("START TRANSACTION")
            cur.execute("CALL _weave_now(@now)")
            cur.execute("SELECT namespace_id FROM weave_instances WHERE id = %s FOR UPDATE", (inst,))
            ns = cur.fetchone()["namespace_id"]
            cur.execute("UPDATE weave_review_reasons SET closed_at = @now, closed_by = 'reactivate' "
                        "WHERE instance_id = %s AND closed_at IS NULL", (inst,))
            cur.execute("UPDATE weave_instances SET status = 'RUNNING', gate = 'OPEN' WHERE id = %s", (inst,))
            cur.execute("SELECT id FROM weave_steps WHERE instance_id = %s AND step_key = %s FOR UPDATE",
                        (inst, step_key))
            step = cur.fetchone()["id"]
            cur.execute("CALL _weave_step_activate(%s, %s, %s, @now, @result)", (ns, inst, step))
            cur.execute("COMMIT")
    finally:
        conn.close()
