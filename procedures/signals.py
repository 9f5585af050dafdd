"""Thin wrappers for the signal routines (05-signals). The rules live in the routines; each wrapper
passes arguments and shapes result sets into the resource shapes of 07-api.

Payloads and correlation keys cross this layer as the exact text (or bytes) handed over: nothing here
re-serialises a payload, so key order, whitespace and big numbers reach the routine as received (S-4).
"""

from __future__ import annotations

import json
from typing import Any

from . import jsontext
from .db import Connection as Conn
from .db import call, call_row
from .routines import _json, rfc3339


def _receipt(row: dict) -> dict:
    receipt = {k: row[k] for k in ("signal_id", "workflow_id", "idempotency_key", "status", "disposition",
                                   "accepted_at", "expires_at", "request_digest")}
    receipt["receipt_json"] = row["receipt"]
    receipt["replayed"] = bool(row["replayed"])
    return receipt


def send(conn: Conn, token: str, namespace: str, workflow_id: str, *, idempotency_key: str | None,
         name: str | None, payload_version: str | None, target_step_key: str | None,
         target_activation_sequence: int | None, correlation_key: str | bytes | None, payload: str | bytes | None,
         reason: str | None, evidence_ref: str | None = None, in_tx: bool = False) -> dict:
    """See procedures/signals/weave_signal_send.sql. ``payload`` is the JSON text as received (``None`` =
    missing); every field rule (S-1) is the routine's. With ``in_tx``, weave_signal_send_in_tx.sql: inside the
    caller's open transaction on ``conn`` (autocommit off, or after BEGIN); the caller commits or rolls back.

    Returns the receipt fields, ``receipt_json`` (the frozen receipt text, byte-identical on replay) and
    ``replayed``."""
    row = call_row(conn, "weave_signal_send_in_tx" if in_tx else "weave_signal_send", token, namespace, workflow_id,
                   idempotency_key, name, payload_version, target_step_key, target_activation_sequence,
                   correlation_key, payload, reason, evidence_ref)
    return _receipt(row)


def send_in_tx(conn: Conn, token: str, namespace: str, workflow_id: str, **fields: Any) -> dict:
    """``send`` inside the caller's open transaction (procedures/signals/weave_signal_send_in_tx.sql)."""
    return send(conn, token, namespace, workflow_id, in_tx=True, **fields)


def _text(value: Any) -> Any:
    if isinstance(value, bytes | bytearray):
        return value.decode("utf-8")
    return value


def _signal(row: dict, verbatim: bool = False) -> dict:
    """A stored signal as the 07-api resource; the payload parsed, or with ``verbatim`` its accepted text as a
    ``jsontext.Verbatim`` (for an answer that writes it as it is, without parsing it); ``payload_text`` either way."""
    payload = _text(row["payload"])
    return {
        "signal_id": row["signal_id"], "workflow_id": row["workflow_id"], "idempotency_key": row["idempotency_key"],
        "name": row["name"], "payload_version": row["payload_version"], "target_step_key": row["target_step_key"],
        "target_activation_sequence": row["target_activation_sequence"],
        "correlation_key": _text(row["correlation_key"]), "payload_text": payload,
        "payload": jsontext.Verbatim(payload) if verbatim else json.loads(payload),
        "reason": row["reason"], "evidence_ref": row["evidence_ref"], "actor": row["actor"], "status": row["status"],
        "disposition": row["disposition"], "accepted_at": rfc3339(row["accepted_at"]),
        "expires_at": rfc3339(row["expires_at"]), "consumed_at": rfc3339(row["consumed_at"]),
        "request_digest": row["request_digest"],
    }


def get(conn: Conn, token: str, namespace: str, workflow_id: str, signal_id: str, *, verbatim: bool = False) -> dict:
    """See procedures/signals/weave_signal_get.sql; shaped as the 07-api signal resource (``verbatim`` as _signal's)."""
    return _signal(call_row(conn, "weave_signal_get", token, namespace, workflow_id, signal_id), verbatim)


def list_signals(conn: Conn, token: str, namespace: str, workflow_id: str, *, status: str | None = None,
                 limit: int = 100, after: str | None = None, verbatim: bool = False) -> dict:
    """See procedures/signals/weave_signal_list.sql: ``{"items": [...], "next_cursor": ...}`` (``verbatim`` as
    _signal's)."""
    rows, cursor = call(conn, "weave_signal_list", token, namespace, workflow_id, status, limit, after)
    return {"items": [_signal(r, verbatim) for r in rows], "next_cursor": cursor[0]["next_cursor"]}


def explain(conn: Conn, token: str, namespace: str, workflow_id: str, step_key: str, *,
            verbatim: bool = False) -> dict:
    """See procedures/instances/weave_step_explain.sql (S-17). ``verbatim``: each blocker's detail that is JSON as
    kept (a review reason's facts hold a poll round's result: written back with every digit, never parsed)."""
    head, rows, facts, blockers, late = call(conn, "weave_step_explain", token, namespace, workflow_id, step_key)
    step, fact = head[0], facts[0]
    pins = {"kind": step["wait_kind"], "status": step["wait_status"], "name": step["signal_name"],
            "payload_version": step["payload_version"], "payload_type": step["payload_type"],
            "correlation_key": _text(step["correlation_key"]), "correlation_key_hex": step["correlation_key_hex"],
            "activation_sequence": step["activation_sequence"], "started_at": rfc3339(step["started_at"]),
            "deadline_at": rfc3339(step["deadline_at"]), "winner_signal_id": step["winner_signal_id"]}
    return {
        "step_key": step["step_key"], "type": step["step_type"], "status": step["step_status"],
        "instance_status": step["instance_status"], "control": step["control"],
        "instance_deadline_at": rfc3339(step["instance_deadline_at"]),
        "open_review_codes": json.loads(step["open_review_codes"] or "[]"), "now_at": rfc3339(step["now_at"]),
        "signals_total": step["signals_total"],
        "wait": pins,
        "timer": None if fact["timer_due_at"] is None else {
            "due_at": rfc3339(fact["timer_due_at"]), "delay_ms": fact["timer_delay_ms"],
            "planned_due_at": rfc3339(fact["timer_planned_due_at"]), "truncated": bool(fact["timer_truncated"]),
            "lateness_ms": float(fact["timer_lateness_ms"])},
        "poll": None if fact["poll_state"] is None else {
            "state": fact["poll_state"], "rounds_used": fact["rounds_used"], "max_rounds": fact["max_rounds"],
            "next_poll_at": rfc3339(fact["next_poll_at"]), "poll_deadline": rfc3339(fact["poll_deadline"]),
            "last_outcome": fact["poll_last_outcome"], "stop_reason": fact["poll_stop_reason"]},
        "task": None if fact["task_id"] is None else {
            "task_id": fact["task_id"], "status": fact["task_status"], "attempts_used": fact["attempts_used"],
            "max_attempts": fact["max_attempts"], "lease_holder": fact["lease_holder"],
            "lease_expires_at": rfc3339(fact["lease_expires_at"]), "next_retry_at": rfc3339(fact["next_retry_at"]),
            "attempt_started_at": rfc3339(fact["attempt_started_at"]),
            "deadline_at": rfc3339(fact["task_deadline_at"]),
            "cancel_requested": bool(fact["task_cancel_requested"]), "last_error": fact["task_last_error"],
            "late_reports": [_late_report(r, verbatim) for r in late]},
        "blockers": [{"blocker": b["blocker"], "reason": b["reason"], "since": rfc3339(b["since"]),
                      "next_check_at": rfc3339(b["next_check_at"]), "detail": _json_or_text(b["detail"], verbatim)}
                     for b in blockers],
        "signals": [{
            "signal_id": r["signal_id"], "idempotency_key": r["idempotency_key"],
            "target_activation_sequence": r["target_activation_sequence"], "status": r["status"],
            "disposition": r["disposition"], "accepted_at": rfc3339(r["accepted_at"]),
            "expires_at": rfc3339(r["expires_at"]), "consumed_at": rfc3339(r["consumed_at"]),
            "correlation_key": _text(r["correlation_key"]), "correlation_key_hex": r["correlation_key_hex"],
            "why": r["why"], "detail": json.loads(r["detail"]) if r["detail"] else None,
        } for r in rows],
    }


def _late_report(row: dict, verbatim: bool) -> dict:
    """A report kept without effect (pulse_late_reports): a success with its result, a failure with its error."""
    succeeded = row["kind"] == "SUCCEEDED"
    failure = {} if succeeded else _json_or_text(row["body"])
    if not isinstance(failure, dict):
        failure = {"error": failure}
    return {"attempt_id": row["attempt_id"], "attempt_no": row["attempt_no"], "worker_id": row["worker_id"],
            "kind": row["kind"], "reported_at": rfc3339(row["reported_at"]),
            "result": _json_or_text(row["body"], verbatim) if succeeded else None,
            "error": failure.get("error"), "retryable": failure.get("retryable")}


def _json_or_text(value: Any, verbatim: bool = False) -> Any:
    """A detail that is JSON (parsed, or with ``verbatim`` as its text), or else the text it is."""
    try:
        parsed = _json(value)
    except ValueError:
        return value
    return _json(value, verbatim=True) if verbatim else parsed


def process(conn: Conn, signal_id: int) -> str:
    """See procedures/signals/weave_signal_process.sql (the orchestrator's SIGNAL candidate class)."""
    return call_row(conn, "weave_signal_process", signal_id)["outcome"]
