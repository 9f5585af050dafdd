"""SIGNAL steps (05-signals): the contract a signal must match, its correlation and its timeout."""

from __future__ import annotations

from typing import Any

from .fields import Checker, describe
from .model import COMMON_FIELDS, SIGNAL_NAME, VERSION, YEAR_MS, CompiledStep

FIELDS = COMMON_FIELDS | {"signal", "correlation", "timeout_ms"}
PAYLOAD_TYPES = ("object", "array", "string", "number", "boolean", "null", "any")


def check(c: Checker, raw: dict[str, Any], path: str, index: int, step: dict[str, Any],
          compiled: CompiledStep) -> None:
    step["signal"] = contract(c, raw, path)
    step["correlation"], compiled["correlation"] = c.correlation(raw, path, index)
    step["timeout_ms"] = c.integer(raw, path, "timeout_ms", 1, YEAR_MS)


def contract(c: Checker, raw: dict[str, Any], path: str) -> dict[str, Any] | None:
    signal = c.member_object(raw, path, "signal", frozenset({"name", "payload_version", "payload_type"}),
                             required=True)
    if signal is None:
        return None
    field = f"{path}.signal"
    payload_type = signal.get("payload_type", "any")
    if payload_type not in PAYLOAD_TYPES:
        code = "INVALID_VALUE" if isinstance(payload_type, str) else "INVALID_TYPE"
        allowed = ", ".join(PAYLOAD_TYPES)
        c.error(f"{field}.payload_type", code, f"payload_type must be one of {allowed}, got {describe(payload_type)}")
    return {
        "name": c.text(signal, field, "name", SIGNAL_NAME),
        "payload_version": c.text(signal, field, "payload_version", VERSION),
        "payload_type": payload_type,
    }
