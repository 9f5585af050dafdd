"""Definitions the upgrade tests (R-17) fill a database with: work that holds tasks in flight across a migration."""

from __future__ import annotations

TASK = {"name": "up-task", "steps": [{"key": "job", "type": "TASK", "queue": "payments", "handler": "example.echo",
                                       "handler_version": "1", "input": {"value": 1}, "task_timeout_ms": 600_000}]}
POLL = {"name": "up-poll", "steps": [{
    "key": "check", "type": "POLL", "queue": "payments", "handler": "example.poll", "handler_version": "1",
    "input": {"done_at": 2}, "interval_ms": 1000, "max_rounds": 3, "timeout_ms": 3_600_000,
    "task_timeout_ms": 600_000, "result": {"pending": ["PENDING"], "success": ["DONE"]}}]}
