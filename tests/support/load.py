"""Bulk scenario setup shared by multi-node, process and benchmark runs."""

from __future__ import annotations

import threading

from procedures import routines
from procedures.connections import retry_transient
from tests.support.threads import run_threads
from tests.support.world import World


def start_many(world: World, definition: str, count: int, *, threads: int = 4, deadline_ms: int = 86_400_000,
               prefix: str = "bulk") -> list[str]:
    """Start ``count`` instances through the real start routine, on several connections. A start refused for a
    transient reason (a lost connection, a deadlock, the last slot of a quota taken by a concurrent start) is
    retried as every caller of the engine retries it (R-12); its idempotency key makes the retry safe."""
    ids: list[str] = []
    lock = threading.Lock()

    def work(part: int) -> None:
        conns = [world.db.connect()]

        def close() -> None:
            if conns[0].open:  # a connection the server dropped is closed already
                conns[0].close()

        def reconnect() -> None:
            close()
            conns[0] = world.db.connect()

        def start(i: int) -> dict:
            return routines.instance_start(conns[0], world.token, world.namespace, definition=definition,
                                           app=world.app, input={"n": i}, idempotency_key=f"{prefix}-{i}",
                                           deadline_ms=deadline_ms)

        try:
            for i in range(part, count, threads):
                row = retry_transient(lambda i=i: start(i), on_retry=reconnect)
                with lock:
                    ids.append(row["workflow_id"])
        finally:
            close()

    run_threads(work, threads)
    return ids
