"""The first-try-then-retry shape of every retried call: the engine's routine calls (``procedures.connections``)
and the SDK's HTTP calls (``api.client``). Standard library and tenacity only, so the SDK imports it without the
server's dependencies.

The first try is a plain call: building tenacity's loop costs more Python than most calls spend on their own
(14-70 us a call, by the machine's speed), and almost every call succeeds the first time. Only a retryable failure
starts the loop, with that failure replayed as its first attempt, so the attempts, the waits and ``on_retry`` are
the loop's own, as if it had run from the start.

``read_until`` is the other shape: reading something again until it says what the caller waits for (the SDK's
``wait_for``, ``weave workflows wait``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from tenacity import Retrying, retry_if_exception, stop_after_attempt, stop_after_delay
from tenacity.wait import wait_base

T = TypeVar("T")


def retry_after_first(fn: Callable[[], T], retryable: Callable[[BaseException], bool], attempts: int,
                      wait: wait_base, on_retry: Callable[[], None] | None = None, seconds: float | None = None) -> T:
    """``fn()``; after a failure that ``retryable`` accepts, tried again with ``wait`` between tries up to
    ``attempts`` tries in all, or with ``seconds`` given, for that long after the first failure whatever the number
    of tries; ``on_retry`` runs after each retryable failure. Any other error, and the last retryable one, is raised
    as it is."""
    try:
        return fn()
    except Exception as exc:
        if not retryable(exc):
            raise
        replay = [exc]

    def attempt() -> T:
        try:
            if replay:
                raise replay.pop()
            return fn()
        except Exception as exc:
            if on_retry is not None and retryable(exc):
                on_retry()
            raise

    stop = stop_after_attempt(attempts) if seconds is None else stop_after_delay(seconds)
    retrying = Retrying(stop=stop, wait=wait, retry=retry_if_exception(retryable), reraise=True)
    return retrying(attempt)


def read_until(read: Callable[[], T], done: Callable[[T], bool], timeout: float, interval: float,
               sleep: Callable[[float], None], clock: Callable[[], float]) -> tuple[T, bool]:
    """``read()`` again and again until ``done`` accepts what it answered or ``timeout`` seconds (on ``clock``) have
    passed, sleeping with ``sleep`` between reads: the first reads 50 ms apart, then twice as far apart each time,
    up to ``interval``. Answers the last value read and whether ``done`` accepted it."""
    ends, pause = clock() + timeout, 0.05
    while True:
        value = read()
        left = ends - clock()
        if done(value):
            return value, True
        if left <= 0:
            return value, False
        sleep(min(pause, left))
        pause = min(pause * 2, interval)
