"""Example handlers, used by the tests and by the development setup:
``weave worker --handlers orchestrator.example_handlers --queue payments``.

They keep no state in memory: whatever decides their answer is in the frozen input or the attempt
(attempt number, poll round), so any worker process may run any attempt.
"""

from __future__ import annotations

import time
from typing import Any

from .handlers import Retryable, TaskContext, handler


@handler("example.echo", version="1")
def echo(input: Any) -> Any:
    """Returns its input unchanged."""
    return input


@handler("example.sleep", version="1")
def sleep(input: dict, ctx: TaskContext) -> dict:
    """Sleeps ``input["ms"]`` milliseconds (a slow handler for kill and grace tests); stops early when
    cancellation is requested and ``input["honour_cancel"]`` is true, or when it should stop for any reason (the
    worker stopping too) and ``input["honour_stop"]`` is true."""
    ms = int(input.get("ms", 1000))
    if input.get("honour_stop"):
        if ctx.wait_stop(ms / 1000.0):
            raise Retryable("stopped while sleeping")
    elif input.get("honour_cancel"):
        if ctx.wait_cancelled(ms / 1000.0):
            raise Retryable("cancelled while sleeping")
    else:
        time.sleep(ms / 1000.0)
    return {"slept_ms": ms, "attempt": ctx.attempt_no}


@handler("example.fail", version="1")
def fail(input: dict) -> Any:
    """Always fails, non-retryable, with ``input["message"]``."""
    raise RuntimeError(input.get("message", "example.fail always fails"))


@handler("example.flaky", version="1")
def flaky(input: dict, ctx: TaskContext) -> dict:
    """Retryable failure until attempt ``input["succeed_on_attempt"]`` (default 2), then success."""
    succeed_on = int(input.get("succeed_on_attempt", 2))
    if ctx.attempt_no < succeed_on:
        raise Retryable(f"flaky: attempt {ctx.attempt_no} of the {succeed_on} needed")
    return {"attempt": ctx.attempt_no, "value": input.get("value")}


@handler("example.poll", version="1")
def poll(input: dict, ctx: TaskContext) -> dict:
    """A POLL result object: PENDING until round (or, for a TASK step, attempt) ``input["done_at"]``
    (default 3), then DONE with ``input["output"]``."""
    count = ctx.round_no or ctx.attempt_no
    if count < int(input.get("done_at", 3)):
        return {"status": "PENDING"}
    return {"status": "DONE", "output": input.get("output", {"rounds": count})}
