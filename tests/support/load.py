"""Bulk scenario setup shared by multi-node, process and benchmark runs."""

from __future__ import annotations

import threading

from procedures import routines
from tests.support.threads import run_threads
from tests.support.world import World


def start_many(world: World, definition: str, count: int, *, threads: int = 4, deadline_ms: int = 86_400_000,
               prefix: str = "bulk") -> list[str]:
    """Start ``count`` instances through the real start routine, on several connections."""
    ids: list[str] = []
    lock = threading.Lock()

    def work(part: int) -> None:
        conn = world.db.connect()
        try:
            for i in range(part, count, threads):
                row = routines.instance_start(conn, world.token, world.namespace, definition=definition,
                                              app=world.app, input={"n": i}, idempotency_key=f"{prefix}-{i}",
                                              deadline_ms=deadline_ms)
                with lock:
                    ids.append(row["workflow_id"])
        finally:
            conn.close()

    run_threads(work, threads)
    return ids
