"""TASK steps (04-polls, Pulse): one queued task with its handler, input, timeout, priority and retry policy.
POLL steps share these fields: each poll round is one such task."""

from __future__ import annotations

from typing import Any

from .fields import Checker
from .model import COMMON_FIELDS, DAY_MS, HANDLER, QUEUE, VERSION, CompiledStep

FIELDS = COMMON_FIELDS | {
    "queue", "handler", "handler_version", "input", "task_timeout_ms", "priority", "retry",
    "business_key", "mutex_key",
}
RETRY_FIELDS = frozenset({"max_attempts", "initial_backoff_ms", "backoff_coefficient", "max_backoff_ms"})


def check(c: Checker, raw: dict[str, Any], path: str, index: int, step: dict[str, Any],
          compiled: CompiledStep) -> None:
    step["queue"] = c.text(raw, path, "queue", QUEUE)
    step["handler"] = c.text(raw, path, "handler", HANDLER)
    step["handler_version"] = c.text(raw, path, "handler_version", VERSION)
    if c.present(raw, path, "input", required=False):
        bindings: list[list[Any]] = []
        step["input"], skeleton = c.json_value(raw["input"], f"{path}.input", (), index, bindings, 1)
        compiled["input"] = {"skeleton": skeleton, "bindings": bindings}
    else:
        step["input"] = {}
    step["task_timeout_ms"] = c.integer(raw, path, "task_timeout_ms", 1, DAY_MS, default=30_000)
    step["priority"] = c.integer(raw, path, "priority", -1000, 1000, default=0)
    step["retry"] = retry(c, raw, path)
    step["business_key"], compiled["business_key"] = c.optional_key(raw, path, "business_key", index)
    step["mutex_key"], compiled["mutex_key"] = c.optional_key(raw, path, "mutex_key", index)


def retry(c: Checker, raw: dict[str, Any], path: str) -> dict[str, Any] | None:
    policy = c.member_object(raw, path, "retry", RETRY_FIELDS, required=False)
    if policy is None:
        return None
    field = f"{path}.retry"
    initial = c.integer(policy, field, "initial_backoff_ms", 0, DAY_MS, default=1000)
    maximum = c.integer(policy, field, "max_backoff_ms", 0, DAY_MS, default=60_000)
    if initial is not None and maximum is not None and maximum < initial:
        shown = f"{maximum:,}" if "max_backoff_ms" in policy else f"the default {maximum:,}"
        c.error(f"{field}.max_backoff_ms", "OUT_OF_RANGE",
                f"max_backoff_ms ({shown}) must be at least initial_backoff_ms ({initial:,})")
    return {
        "max_attempts": c.integer(policy, field, "max_attempts", 1, 100, default=3),
        "initial_backoff_ms": initial,
        "backoff_coefficient": c.number(policy, field, "backoff_coefficient", 1.0, 10.0, default=2.0),
        "max_backoff_ms": maximum,
    }
