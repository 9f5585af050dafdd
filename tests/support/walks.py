"""Seeded random walks of the engine: what every walk shares (its draws, running the engine, and a failure's
message naming the walk and what happened in it)."""

from __future__ import annotations

import contextlib
import os
import random
from collections.abc import Iterator
from typing import Any

from tests.support.db import Db, reset


def seeds(default: int) -> range:
    """The seeds of the walks a test runs: the suite's ``default`` many, times WEAVE_WALKS_SCALE (``make reliability``
    sets 10), from WEAVE_WALKS_FROM on (0 unless set: a failure names its walk, and the walks from it on run again
    without those before it)."""
    first = int(os.environ.get("WEAVE_WALKS_FROM", "0"))
    return range(first, first + default * int(os.environ.get("WEAVE_WALKS_SCALE", "1")))


class Walk:
    """One walk, drawn from ``seed`` on a clean database; ``history`` says what happened, for a failure's message."""

    def __init__(self, db: Db, orch: Any, seed: int):
        self.db, self.orch, self.rng = db, orch, random.Random(seed)
        self.history: list[str] = []
        reset(db.conn)

    def draw(self, choices: list) -> Any:
        return self.rng.choice(choices)

    def drain(self) -> None:
        """The engine runs until nothing is due; no decision may have failed."""
        stats = self.orch.drain()
        failed = {k: v for k, v in stats.items() if k.endswith("FAILED") and v}
        assert not failed, f"a decision failed: {stats}"


@contextlib.contextmanager
def told(seed: int, walk: Walk | None) -> Iterator[None]:
    """A failure inside names the walk and prints its history."""
    try:
        yield
    except AssertionError as exc:
        history = "\n  ".join(walk.history) if walk is not None else ""
        raise AssertionError(f"walk {seed} (WEAVE_WALKS_FROM={seed} runs it first): {exc}\n  {history}") from exc
