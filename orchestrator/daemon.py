"""How a long-running engine process (orchestrator, worker) starts and stops: SIGTERM and SIGINT ask it to
stop, it waits for its database and refuses a database at another level (R-16), and then it runs until
asked to stop."""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable
from typing import Protocol

from procedures import errors
from procedures.logs import refuse


class Daemon(Protocol):
    @property
    def stopping(self) -> threading.Event: ...

    def stop(self, *_: object) -> None: ...

    def check_level(self) -> None: ...

    def run(self) -> object: ...


# The longest idle sleep a daemon takes (a day, in ms): a sleep of 10^11 s overflowed the wait that sleeps it.
IDLE_MAX_MS = 86_400_000


def _until_checked(check: Callable[[], None], stop: threading.Event, waits_for: tuple[type[BaseException], ...],
                   said: Callable[[BaseException, float], None] | None = None) -> bool:
    """``check()`` until it passes, waiting after each failure of a kind in ``waits_for`` (``said`` of it first)
    from 0.5 s, doubling up to 5 s; any other failure is raised. False when ``stop`` was set while waiting."""
    delay = 0.5
    while True:
        try:
            check()
            return True
        except waits_for as exc:
            if said is not None:
                said(exc, delay)
        if stop.wait(delay):
            return False
        delay = min(delay * 2, 5.0)


def await_level(check: Callable[[], None], stop: threading.Event, process: str) -> bool:
    """Run a process's start-up level check (R-16) until the database answers it. A database that cannot be
    reached yet is waited for, logged, with a back-off from 0.5 s to 5 s (a process started before its database
    then starts with it); a level that differs raises ``SchemaMismatch`` at once. False when ``stop`` was set
    while waiting."""
    log = logging.getLogger(f"weave.{process}")
    return _until_checked(check, stop, (errors.TransientDatabaseError,), lambda exc, delay: log.warning(
        "database not reachable at start; waiting", extra={"fields": {"error": str(exc), "retry_s": delay}}))


def hold_until_level(check: Callable[[], None], stop: threading.Event, process: str, cause: BaseException) -> bool:
    """A running process that met the database at another level than its own (``cause``: a table, column or
    routine missing or different, as while a migrate runs or a routine is installed again) decides nothing until
    the level is its own again (R-16): it runs the level check every 0.5 s, then up to every 5 s, and logs once
    when it holds and once when it goes on. When the level is its own from the first check, ``cause`` was a
    routine's own fault: logged as an error, and the caller goes on after a second. False when ``stop`` was set
    meanwhile."""
    log = logging.getLogger(f"weave.{process}")
    held = False

    def holding(exc: BaseException, _: float) -> None:  # said once, at the first check that fails
        nonlocal held
        if not held:
            held = True
            log.warning("the database is not at this build's level: holding until it is", extra={"fields": {
                "error": str(exc)}})

    if not _until_checked(check, stop, (errors.SchemaMismatch, errors.TransientDatabaseError), holding):
        return False
    if not held:  # the level is this build's: a routine's own fault (a column it lacks), which holding would not mend
        log.error("a routine failed on the database at this build's own level", extra={"fields": {
            "error": str(cause)}})
        return not stop.wait(1.0)
    log.info("the database is at this build's level again: going on")
    return True


def on_signal(stop: Callable[[], None]) -> Callable[..., None]:
    """A handler of SIGTERM and SIGINT that calls ``stop`` from a thread of its own. A handler runs in the main thread
    between two of its bytecodes, which may be while that thread holds the lock of the very event that stopping
    sets (inside ``Event.wait``, entering or leaving it): setting the event there would wait for the lock it holds
    itself, and the process would never stop. The thread waits for the lock and sets it."""

    def handler(*_: object) -> None:
        threading.Thread(target=stop, name="stop", daemon=True).start()

    return handler


def stop_on_signal(daemon: Daemon) -> Callable[..., None]:
    """The handler of SIGTERM and SIGINT of a daemon: ``on_signal(daemon.stop)``."""
    return on_signal(daemon.stop)


def serve(daemon: Daemon, process: str, json_out: bool = False) -> int:
    """Run ``daemon`` as the process ``weave <process>``; the exit status: 0 after a stop, 1 when refused."""
    handler = stop_on_signal(daemon)
    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
    try:
        if not await_level(daemon.check_level, daemon.stopping, process):
            return 0
    except errors.SchemaMismatch as exc:
        logging.getLogger(f"weave.{process}").error("refusing to start", extra={"fields": {"error": str(exc)}})
        return refuse(process, exc.code, exc.detail, 1, json_out)
    daemon.run()
    return 0
