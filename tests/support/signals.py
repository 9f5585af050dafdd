"""Scenario helpers for SIGNAL steps: definitions, a default Send, and recovery through the real routine."""

from __future__ import annotations

import hashlib
import itertools
from typing import Any

from procedures import db as dbmod
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


def resolved_over_sql(world: World, orch, output: str) -> str:
    """An instance whose SIGNAL step `approval` timed out into review and was then resolved over SQL with ``output``
    (JSON text as a SQL client sends it, kept as sent): its workflow id."""
    world.publish(signal_flow("resolvable", timeout_ms=1_000))
    wf = world.start("resolvable", {"order_id": "o-1"})
    world.db.advance(2_000)
    orch.drain()
    routines.step_resolve(world.db.conn, world.token, world.namespace, wf, "approval", "settled by hand", "res-1",
                          output_json=output)
    return wf


def send(world: World, workflow_id: str, key: str | None = None, *, token: str | None = None,
         namespace: str | None = None, conn=None, in_tx: bool = False, queued: bool = False, **fields: Any) -> dict:
    """Send with sensible defaults for the `approval` step; any field can be overridden.

    ``queued=True`` accepts the signal through the in-transaction entry point (S-16) in a transaction of its own:
    the signal is stored exactly as by Send but not settled at acceptance, so it waits for a runner (the SIGNAL
    candidate and the wait's checkpoint), as a signal does while every runner is down."""
    args = {"name": NAME, "payload_version": VERSION, "target_step_key": "approval", "target_activation_sequence": 1,
            "correlation_key": "o-1", "payload": '{"approved": true}', "reason": "approved by the desk",
            "evidence_ref": None}
    args.update(fields)
    if queued:
        outbox = world.db.connect()
        try:
            outbox.begin()
            receipt = signals.send_in_tx(outbox, token or world.token, namespace or world.namespace, workflow_id,
                                         idempotency_key=key or f"sig-{next(_keys)}", **args)
            outbox.commit()
            return receipt
        finally:
            outbox.close()
    fn = signals.send_in_tx if in_tx else signals.send
    return fn(conn or world.db.conn, token or world.token, namespace or world.namespace, workflow_id,
              idempotency_key=key or f"sig-{next(_keys)}", **args)


def failing_in_review(world: World, orch, **start: Any) -> tuple[str, dict]:
    """An `approval-flow` instance (its SIGNAL step `approval` open from the start) whose signal, accepted for the
    open wait without being settled, failed a third time in a row the same way: its step in review,
    CANDIDATE_FAILING (R-18). The instance and the signal's receipt; ``start``: the start's own arguments."""
    world.publish(signal_flow())
    wf = world.start("approval-flow", {"order_id": "o-1"}, **start)
    orch.drain()
    receipt = send(world, wf, queued=True)
    for _ in range(3):
        sig = world.db.row("SELECT id, version FROM weave_signals WHERE id = %s", int(receipt["signal_id"][4:]))
        dbmod.call(world.db.conn, "weave_candidate_fail", "SIGNAL", sig["id"], sig["version"],
                   "INVALID_STATE: the signal could not be applied")
    assert world.step(wf, "approval")["status"] == "NEEDS_REVIEW"
    return wf, receipt


def signal_row(world: World, signal_id: str) -> dict:
    return world.db.row("SELECT * FROM weave_signals WHERE id = %s", int(signal_id.removeprefix("sig_")))


def reactivate(world: World, workflow_id: str, step_key: str = "approval", reason: str = "retry after review") -> dict:
    """The recovery action reactivate (C-4) through weave_step_reactivate, as an operator would call it."""
    return routines.step_reactivate(world.db.conn, world.token, world.namespace, workflow_id, step_key, reason,
                                    f"reactivate-{next(_keys)}")


DIGEST_FIELDS = ("name", "payload_version", "target_step_key", "target_activation_sequence", "correlation_key",
                 "payload", "reason", "evidence_ref")


def digest(world: World, *, evidence_ref: str | None = None, form: str = "CANONICAL", **fields: Any) -> str:
    """The S-4 digest as the engine computes it (the one SQL function routines and invariants share)."""
    args = [fields[f] for f in DIGEST_FIELDS[:-1]] + [evidence_ref, form]
    return world.db.scalar("SELECT _weave_signal_digest(%s, %s, %s, %s, %s, %s, %s, %s, %s)", *args)


def specified_digest(*, canonical_payload: str, evidence_ref: str | None = None, **fields: Any) -> str:
    """The S-4 digest written out from the rule, as an independent oracle: SHA-256 over the fields in order,
    each preceded by its byte length as 8 bytes big-endian, the payload as its canonical JSON text; an absent
    evidence_ref is eight 0xFF bytes with nothing after them."""
    values = [fields["name"], fields["payload_version"], fields["target_step_key"],
              str(int(fields["target_activation_sequence"])), fields["correlation_key"], canonical_payload,
              fields["reason"]]
    h = hashlib.sha256()
    for value in values:
        raw = value if isinstance(value, bytes) else value.encode("utf-8")
        h.update(len(raw).to_bytes(8, "big") + raw)
    if evidence_ref is None:
        h.update(b"\xff" * 8)
    else:
        h.update(len(evidence_ref.encode()).to_bytes(8, "big") + evidence_ref.encode())
    return h.hexdigest()
