"""Bulk scenario setup shared by multi-node, process and benchmark runs."""

from __future__ import annotations

import threading

from procedures import routines
from procedures.connections import Connections
from tests.support.threads import run_threads
from tests.support.world import World


def start_many(world: World, definition: str, count: int, *, threads: int = 4, deadline_ms: int = 86_400_000,
               prefix: str = "bulk") -> list[str]:
    """Start ``count`` instances through the real start routine, on several connections. A start refused for a
    transient reason (a lost connection, a deadlock, the last slot of a quota taken by a concurrent start) is
    retried as every caller of the engine retries it (R-12), on a fresh connection; its idempotency key makes the
    retry safe."""
    ids: list[str] = []
    lock = threading.Lock()
    pool = Connections(world.db.dsn)  # one connection per thread, replaced after a failure

    def work(part: int) -> None:
        for i in range(part, count, threads):
            row = pool.retrying(lambda conn, i=i: routines.instance_start(
                conn, world.token, world.namespace, definition=definition, app=world.app, input={"n": i},
                idempotency_key=f"{prefix}-{i}", deadline_ms=deadline_ms))
            with lock:
                ids.append(row["workflow_id"])

    try:
        run_threads(work, threads)
    finally:
        pool.close_all()
    return ids
