"""Waiting for effects in tests that run real processes: poll a condition, never sleep for a due time."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(predicate: Callable[[], bool], timeout: float = 30.0, interval: float = 0.05) -> bool:
    """Poll a condition until it holds or ``timeout`` seconds pass; answer whether it held."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()


def wait_for_value(produce: Callable[[], T | None], timeout: float = 30.0, interval: float = 0.05) -> T:
    """Poll ``produce`` until it gives a value other than None (or falsy), and return it; fail after ``timeout``."""
    found: list[T] = []

    def given() -> bool:
        value = produce()
        if value:
            found.append(value)
        return bool(value)

    if not wait_for(given, timeout, interval):
        raise AssertionError(f"nothing came within {timeout} s")
    return found[-1]
