"""POLL steps (04-polls): bounded rounds of a task, the result classes, and the optional final signal."""

from __future__ import annotations

from typing import Any

from ..jsontext import is_text
from . import task
from .fields import Checker, describe
from .model import DAY_MS, MAX_STATUS_CHARS, SIGNAL_NAME, VERSION, YEAR_MS, CompiledStep, Template

FIELDS = task.FIELDS | {"interval_ms", "max_rounds", "timeout_ms", "result", "final_signal"}
RESULT_CLASSES = ("pending", "success", "review")


def check(c: Checker, raw: dict[str, Any], path: str, index: int, step: dict[str, Any],
          compiled: CompiledStep) -> None:
    task.check(c, raw, path, index, step, compiled)
    step["interval_ms"] = c.integer(raw, path, "interval_ms", 1, DAY_MS)
    step["max_rounds"] = c.integer(raw, path, "max_rounds", 1, 10_000)
    step["timeout_ms"] = c.integer(raw, path, "timeout_ms", 1, YEAR_MS)
    step["result"] = result_classes(c, raw, path)
    step["final_signal"], compiled["correlation"] = final_signal(c, raw, path, index)


def result_classes(c: Checker, raw: dict[str, Any], path: str) -> dict[str, list[str] | None] | None:
    result = c.member_object(raw, path, "result", frozenset(RESULT_CLASSES), required=True)
    if result is None:
        return None
    field = f"{path}.result"
    classes = {
        "pending": statuses(c, result, field, "pending", required=True),
        "success": statuses(c, result, field, "success", required=True),
        "review": statuses(c, result, field, "review", required=False),
    }
    owner: dict[str, str] = {}
    for class_name, listed in classes.items():
        for position, status in enumerate(listed or []):
            first = owner.setdefault(status, class_name)
            if first != class_name:
                c.error(f"{field}.{class_name}[{position}]", "RESULT_CLASS_OVERLAP",
                        f"status {describe(status)} is in both {first} and {class_name}")
    return classes


def statuses(c: Checker, result: dict[str, Any], path: str, name: str, required: bool) -> list[str] | None:
    if not c.present(result, path, name, required=required):
        return None if required else []
    value = result[name]
    field = f"{path}.{name}"
    if not isinstance(value, list):
        c.error(field, "INVALID_TYPE", f"{name} must be an array of statuses, got {describe(value)}")
        return None
    if required and not value:
        c.error(field, "INVALID_VALUE", f"{name} must list at least one status")
        return None
    listed: list[str] = []
    for position, status in enumerate(value):
        item = f"{field}[{position}]"
        if not isinstance(status, str):
            c.error(item, "INVALID_TYPE", f"a status must be a string, got {describe(status)}")
        elif not 1 <= len(status) <= MAX_STATUS_CHARS or not is_text(status):
            c.error(item, "INVALID_VALUE", f"a status must be 1-{MAX_STATUS_CHARS} characters, got {describe(status)}")
        elif status in listed:
            c.error(item, "INVALID_VALUE", f"status {describe(status)} is listed twice in {name}")
        else:
            listed.append(status)
    return listed if len(listed) == len(value) else None


def final_signal(c: Checker, raw: dict[str, Any], path: str, index: int) -> tuple[dict[str, Any] | None,
                                                                                 Template | None]:
    if raw.get("final_signal") is None:  # absent and explicit null both mean "no final signal"
        return None, None
    contract = c.member_object(raw, path, "final_signal", frozenset({"name", "payload_version", "correlation"}),
                               required=True)
    if contract is None:
        return None, None
    field = f"{path}.final_signal"
    name = c.text(contract, field, "name", SIGNAL_NAME)
    payload_version = c.text(contract, field, "payload_version", VERSION)
    correlation, template = c.correlation(contract, field, index)
    return {"name": name, "payload_version": payload_version, "correlation": correlation}, template
