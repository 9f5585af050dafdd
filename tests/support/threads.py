"""Running one piece of test code on several threads at once."""

from __future__ import annotations

import threading
from collections.abc import Callable


def run_threads(fn: Callable[[int], object], threads: int) -> None:
    """Run ``fn(0)`` .. ``fn(threads - 1)`` on as many threads, wait for all of them, and raise the first
    failure in the caller (an exception on a thread would otherwise only be printed)."""
    failures: list[BaseException] = []

    def guarded(part: int) -> None:
        try:
            fn(part)
        except BaseException as exc:  # re-raised in the caller
            failures.append(exc)

    pool = [threading.Thread(target=guarded, args=(p,)) for p in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    if failures:
        raise failures[0]
