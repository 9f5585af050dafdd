"""Task handlers (K-8): Python callables registered by name and version.

    from orchestrator import handler, Retryable

    @handler("payments.check", version="1")
    def check(input, ctx):            # ctx is optional: def check(input) works too (see _takes_context)
        ...
        return {"status": "PAID"}     # any JSON value; it becomes the step output / round result

A handler raises ``Retryable(...)`` for a known-retryable failure (the task's frozen retry policy
decides whether another attempt follows); any other exception is a non-retryable failure. A task
whose handler name and version are not registered fails, non-retryable, with ``HANDLER_NOT_FOUND``.
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
import threading
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from procedures.definitions.model import HANDLER, VERSION

__all__ = ["HandlerModuleError", "HandlerNotFound", "Registry", "Retryable", "TaskContext", "handler", "load_modules",
           "registry"]


class Retryable(Exception):
    """A known-retryable failure (a timeout, a 5xx, a connection reset): another attempt may follow."""


class HandlerNotFound(LookupError):
    """No handler is registered under that name and version."""


@dataclass
class TaskContext:
    """What a handler may want to know about the attempt it runs in. Nothing here is a decision."""

    task_id: str
    attempt_id: int
    attempt_no: int
    max_attempts: int
    namespace: str
    queue: str
    workflow_id: str
    step_key: str
    round_no: int
    handler: str
    handler_version: str
    deadline_at: Any = None
    lease_expires_at: Any = None
    _cancel: threading.Event = field(default_factory=threading.Event, repr=False)
    _lost: threading.Event = field(default_factory=threading.Event, repr=False)
    _stopping: threading.Event = field(default_factory=threading.Event, repr=False)
    # Set with any of the three above: what wait_stop waits on.
    _wake: threading.Event = field(default_factory=threading.Event, repr=False)
    # Set by the worker as it reports the attempt's end: from then on the attempt is ended by its own report, and a
    # heartbeat refused for it (the report committed first) says nothing about the lease.
    _reporting: threading.Event = field(default_factory=threading.Event, repr=False)

    @property
    def cancel_requested(self) -> bool:
        """True once a heartbeat said that the task's cancellation was requested (K-5): stop early if you can."""
        return self._cancel.is_set()

    @property
    def lease_lost(self) -> bool:
        """True once a heartbeat was refused: the attempt is no longer current and its report will change nothing."""
        return self._lost.is_set()

    @property
    def worker_stopping(self) -> bool:
        """True once the worker was asked to stop (SIGTERM, SIGINT): it lets running attempts finish within its grace
        period, then leaves them to lease recovery, which ends them UNKNOWN and sends their steps to review. A long
        handler that stops now by raising ``Retryable`` gets its retry instead (when attempts are left)."""
        return self._stopping.is_set()

    @property
    def should_stop(self) -> bool:
        """cancel_requested, lease_lost or worker_stopping: whatever the handler does next, nobody waits for it."""
        return self._wake.is_set()

    def wait_cancelled(self, seconds: float) -> bool:
        """Sleep up to ``seconds``, waking early when cancellation is requested; returns cancel_requested."""
        return self._cancel.wait(seconds)

    def wait_stop(self, seconds: float) -> bool:
        """Sleep up to ``seconds``, waking early when the handler should stop (cancellation requested, lease lost,
        or the worker stopping); returns should_stop. The loop of a long handler::

            while not ctx.wait_stop(5.0):
                if done(): return result
            raise Retryable("stopped early")   # a cancel ends the task CANCELLED; a stop gets its retry
        """
        return self._wake.wait(seconds)

    def _signal(self, event: threading.Event) -> None:
        """Set one of the reasons to stop (by the worker: a heartbeat's answer, or its own stop)."""
        event.set()
        self._wake.set()


@dataclass(frozen=True)
class Handler:
    name: str
    version: str
    fn: Callable[..., Any]
    takes_context: bool
    decimals: bool = False  # the input's numbers with a fraction given as Decimal, every digit kept

    def __call__(self, input: Any, ctx: TaskContext) -> Any:
        return self.fn(input, ctx) if self.takes_context else self.fn(input)


CONTEXT_NAMES = frozenset({"ctx", "context"})


def _takes_context(fn: Callable[..., Any]) -> bool:
    """Whether the worker passes the context as the second argument: to a second positional parameter without a
    default, or named ctx or context, or to *args. A second parameter with a default and another name is the
    handler's own option (``def check(input, timeout_s=5.0)``) and keeps its default."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(positional) >= 2:
        second = positional[1]
        return second.default is second.empty or second.name in CONTEXT_NAMES
    return any(p.kind == p.VAR_POSITIONAL for p in params)


def _never_runs(fn: Callable[..., Any]) -> str | None:
    """What kind of callable ``fn`` is when calling it runs none of its code (an async function, a generator),
    else None."""
    for target in (fn, getattr(fn, "__call__", None)):  # noqa: B004 - an object's own __call__, if it has one
        if inspect.iscoroutinefunction(target):
            return "an async function"
        if inspect.isasyncgenfunction(target):
            return "an async generator"
        if inspect.isgeneratorfunction(target):
            return "a generator"
    return None


def _where(fn: Callable[..., Any]) -> tuple[Any, ...]:
    """Where ``fn`` is defined: its module and qualified name, and the file and line of its code when it has any."""
    code = getattr(fn, "__code__", None)
    return (getattr(fn, "__module__", None), getattr(fn, "__qualname__", None),
            getattr(code, "co_filename", None), getattr(code, "co_firstlineno", None))


def _same_definition(registered: Callable[..., Any], fn: Callable[..., Any]) -> bool:
    """Whether ``fn`` is the function already registered, or the same definition run again (its module imported
    again): not another function of the same module that happens to have the same name."""
    return registered is fn or _where(registered) == _where(fn)


def _callable_as(fn: Callable[..., Any], positional: int) -> bool:
    """Whether ``fn`` takes that many positional arguments (True when its signature cannot be read)."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return True
    try:
        signature.bind(*([None] * positional))
    except TypeError:
        return False
    return True


class Registry:
    """Handlers by (name, version). Registering the same pair twice with another function is an error."""

    def __init__(self) -> None:
        self._handlers: dict[tuple[str, str], Handler] = {}
        self._lock = threading.Lock()

    def register(self, name: str, version: str | int, fn: Callable[..., Any], *, decimals: bool = False) -> Handler:
        # Named as a task names its handler (as a definition may): under another name or version it would never run.
        if not isinstance(name, str) or not HANDLER.pattern.fullmatch(name):
            raise ValueError(f"handler name {name!r} is not one a definition can name ({HANDLER.description})")
        if isinstance(version, bool) or not isinstance(version, str | int) \
                or not VERSION.pattern.fullmatch(str(version)):
            raise ValueError(f"handler version {version!r} of {name} is not one a definition can name (a string of "
                             f"{VERSION.description}, or a whole number)")
        kind = _never_runs(fn)
        if kind:
            # The worker calls a handler and takes its return value as the result: this one's would be a coroutine
            # or a generator whose code never ran, and every task for it would fail RESULT_INVALID.
            raise ValueError(f"handler {name} version {version} is {kind}, which the worker would never run: a "
                             f"handler must be a plain function that returns its result")
        key = (name, str(version))
        entry = Handler(name, str(version), fn, _takes_context(fn), decimals)
        if not _callable_as(fn, 2 if entry.takes_context else 1):
            # Every task for it would fail with the TypeError of the worker's own call.
            raise ValueError(f"handler {name} version {version} cannot be called with the input (nor with the input "
                             f"and the context): a handler is def f(input) or def f(input, ctx)")
        with self._lock:
            existing = self._handlers.get(key)
            if existing is not None and not _same_definition(existing.fn, fn):
                raise ValueError(f"handler {name} version {version} is already registered by {existing.fn!r}")
            self._handlers[key] = entry
        return entry

    def get(self, name: str, version: str) -> Handler:
        try:
            return self._handlers[(name, str(version))]
        except KeyError:
            versions = sorted(v for n, v in self._handlers if n == name)
            held = (f"this worker has {name!r} in version{'s' if len(versions) > 1 else ''} "
                    f"{', '.join(repr(v) for v in versions)} only" if versions
                    else f"this worker has no {name!r} in any version")
            raise HandlerNotFound(f"no handler {name!r} version {version!r} is registered: {held} (a worker "
                                  "serving this queue must have every handler and version its tasks name)") from None

    def names(self) -> list[str]:
        return sorted(f"{n}@{v}" for n, v in self._handlers)


registry = Registry()


def handler(name: str, version: str | int = "1", *, into: Registry | None = None,
            decimals: bool = False) -> Callable[[Callable], Callable]:
    """Register the decorated function as the handler ``name`` at ``version``; with ``decimals``, the numbers of its
    input that have a fraction or an exponent are given as ``Decimal`` with every digit (as floats otherwise)."""
    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        (into or registry).register(name, version, fn, decimals=decimals)
        return fn
    return decorate


def load_modules(modules: Iterable[str]) -> list[str]:
    """Import the handler modules a worker was told about (their decorators register the handlers).
    The current directory is importable, as for any application server started from a project."""
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    loaded = []
    for spec in modules:
        for name in (part.strip() for part in spec.split(",")):
            if name:
                if name.endswith(".py") or "/" in name or os.sep in name:
                    raise HandlerModuleError(name, ValueError(
                        f"give the module's name, not a file path (for ./myapp/handlers.py: myapp.handlers), "
                        f"importable from the working directory {cwd} or installed"))
                try:
                    importlib.import_module(name)
                except Exception as exc:  # noqa: BLE001 - the module's own code failed: say where, then stop
                    raise HandlerModuleError(name, exc) from exc
                loaded.append(name)
    return loaded


class HandlerModuleError(Exception):
    """A handler module could not be imported: not found, or its own code failed (a syntax error, an exception
    at import). The message names the module and says where in the module's code it failed."""

    def __init__(self, module: str, cause: BaseException):
        where = ""  # a SyntaxError says where itself, a module not found has no code of its own
        # (but a module found, whose own code imports one that is not, has: the line of that import)
        itself_missing = isinstance(cause, ModuleNotFoundError) and cause.name is not None and (
            module == cause.name or module.startswith(cause.name + "."))
        if not isinstance(cause, SyntaxError) and not itself_missing and cause.__traceback__ is not None:
            # The module's own line: not the import machinery's, nor this file's (a refused registration).
            frames = [f for f in traceback.extract_tb(cause.__traceback__)
                      if not f.filename.startswith("<frozen") and f.filename != __file__]
            if frames:
                where = f" ({frames[-1].filename}, line {frames[-1].lineno})"
        super().__init__(f"cannot import handler module {module}: {type(cause).__name__}: {cause}{where}")
