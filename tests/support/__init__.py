"""What the tests share."""

from __future__ import annotations

import json
from typing import Any

import pytest


def json_only(text: str) -> Any:
    """``text`` read as JSON, failing the test on Infinity, -Infinity or NaN: Python's reader takes them, no other
    reader does (an answer holding one cannot be read by a client in JavaScript, Go or jq)."""
    return json.loads(text, parse_constant=lambda name: pytest.fail(f"{name} is not JSON"))
