"""Scenario helpers for SIGNAL steps: definitions, a default Send, and recovery through the real routine."""

from __future__ import annotations

import itertools
from typing import Any

from procedures import routines, signals
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


def reactivate(world: World, workflow_id: str, step_key: str = "approval", reason: str = "retry after review") -> dict:
    """The recovery action reactivate (C-4) through weave_step_reactivate, as an operator would call it."""
    return routines.step_reactivate(world.db.conn, world.token, world.namespace, workflow_id, step_key, reason,
                                    f"reactivate-{next(_keys)}")
