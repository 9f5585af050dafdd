"""TIMER steps (03-timers): a fixed delay, measured from when the wait begins."""

from __future__ import annotations

from typing import Any

from .fields import Checker
from .model import COMMON_FIELDS, YEAR_MS, CompiledStep

FIELDS = COMMON_FIELDS | {"delay_ms"}


def check(c: Checker, raw: dict[str, Any], path: str, index: int, step: dict[str, Any],
          compiled: CompiledStep) -> None:
    step["delay_ms"] = c.integer(raw, path, "delay_ms", 1, YEAR_MS)
