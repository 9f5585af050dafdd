"""One thin wrapper per Pulse routine. The rules live in the routines (``procedures/pulse_*.sql`` and the
orchestrator's ``weave_inbox_consume.sql``); a wrapper passes arguments and shapes the result rows."""

from __future__ import annotations

import json
from typing import Any

from .db import Connection as Conn
from .db import call, call_row
from .definitions.model import QUEUE


def _text(value: Any) -> str:
    if isinstance(value, bytes | bytearray):
        return value.decode("utf-8")
    return value


def queue_names(queues: list[str] | str) -> list[str]:
    """The queue names a worker serves, from names or comma lists of them (spaces around a name dropped, as the
    claim drops them). A name no queue can have is a ValueError naming it: the claim would refuse every call with
    QUEUES_INVALID."""
    parts = [queues] if isinstance(queues, str) else queues
    names = [name.strip() for part in parts for name in part.split(",")]
    bad = [name for name in names if not QUEUE.pattern.fullmatch(name)]
    if bad:
        verb = "is not a queue name" if len(bad) == 1 else "are not queue names"
        raise ValueError(f"{', '.join(map(repr, bad))} {verb} ({QUEUE.description})")
    return names


def task_claim(conn: Conn, worker_id: str, queues: list[str] | str, *, limit: int = 1, lease_ms: int = 30_000,
               namespace: str | None = None) -> list[dict]:
    """See procedures/pulse/pulse_task_claim.sql. ``input`` comes back as the JSON text the handler receives."""
    queues = queues if isinstance(queues, str) else ",".join(queues)
    rows = call(conn, "pulse_task_claim", worker_id, queues, namespace, limit, lease_ms)
    return [{**row, "input": _text(row["input"])} for row in (rows[0] if rows else [])]


def worker_attempts(conn: Conn, worker_id: str, started_since: Any = None) -> list[dict]:
    """See procedures/pulse/pulse_worker_attempts.sql: rows as ``task_claim``'s."""
    rows = call(conn, "pulse_worker_attempts", worker_id, started_since)
    return [{**row, "input": _text(row["input"])} for row in (rows[0] if rows else [])]


def attempt_heartbeat(conn: Conn, attempt_id: int, worker_id: str, lease_ms: int = 30_000) -> dict:
    """See procedures/pulse/pulse_attempt_heartbeat.sql."""
    row = call_row(conn, "pulse_attempt_heartbeat", attempt_id, worker_id, lease_ms)
    return {**row, "cancel_requested": bool(row["cancel_requested"])}


def attempt_complete(conn: Conn, attempt_id: int, worker_id: str, result: Any = None, *,
                     result_json: str | None = None) -> dict:
    """See procedures/pulse/pulse_attempt_complete.sql. ``result_json`` passes the result text as produced."""
    text = result_json if result_json is not None else json.dumps(result, separators=(",", ":"), ensure_ascii=False)
    return call_row(conn, "pulse_attempt_complete", attempt_id, worker_id, text)


def attempt_fail(conn: Conn, attempt_id: int, worker_id: str, error: str, retryable: bool = False) -> dict:
    """See procedures/pulse/pulse_attempt_fail.sql."""
    return call_row(conn, "pulse_attempt_fail", attempt_id, worker_id, error, 1 if retryable else 0)


def lease_recover(conn: Conn, attempt_id: int) -> str:
    """See procedures/pulse/pulse_lease_recover.sql (normally run by the orchestrator, class LEASE)."""
    return call_row(conn, "pulse_lease_recover", attempt_id)["outcome"]


def task_expire(conn: Conn, task_id: int) -> str:
    """See procedures/pulse/pulse_task_expire.sql (normally run by the orchestrator, class TASK_EXPIRY)."""
    return call_row(conn, "pulse_task_expire", task_id)["outcome"]


def inbox_consume(conn: Conn, inbox_id: int) -> str:
    """See procedures/pulse/weave_inbox_consume.sql (normally run by the orchestrator, class INBOX)."""
    return call_row(conn, "weave_inbox_consume", inbox_id)["outcome"]
