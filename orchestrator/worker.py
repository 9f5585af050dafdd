"""The Pulse worker (K-1..K-3, K-8, K-9): claims tasks, runs their handlers, reports the outcomes.

A worker decides nothing about tasks: the routines do, from locked rows. It claims only as many tasks
as it has free slots, runs each in its own thread, heartbeats every running attempt so that its lease
stays alive (and to learn about cancellation), and reports the end of each attempt. What an outcome
means for the workflow is decided by the routines, not here: a report that finds its instance free
consumes the outcome in its own transaction, as the orchestrator would consume it from the task inbox
(which it does when the instance was held). A worker that dies simply stops heartbeating; the
orchestrator records its attempts as UNKNOWN once their leases run out (K-4). Any number of workers may
run against one database.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import decimal
import hashlib
import heapq
import json
import logging
import os
import queue
import secrets
import socket
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from procedures import db, errors, installer, jsontext, pulse, settings
from procedures.connections import Connections
from procedures.logs import configure_logging, refuse

from . import http_handler  # noqa: F401 - registers the built-in http handler
from .daemon import IDLE_MAX_MS, hold_until_level, serve
from .handlers import HandlerModuleError, HandlerNotFound, Registry, Retryable, TaskContext, load_modules, registry

log = logging.getLogger("weave.worker")
BUILT_IN_HANDLERS = frozenset(registry.names())  # what every worker runs without --handlers (the http handler)

# A task a report scheduled becomes claimable at its due time (a retry) or just after it (a POLL step's next round,
# which the orchestrator creates once it is due): a worker that expects one claims this long after its due time.
EXPECTED_LATE_S = 0.02

# How far before a lost claim began, on the engine's clock, its read-back looks for the attempts it may have started:
# the engine's clock and this process's are read at different moments, each to a microsecond or so.
LOST_CLAIM_MARGIN_S = 1.0

# Reported error texts are capped like the column that keeps them.
MAX_ERROR_CHARS = 2000
# A crashed handler's traceback goes to the log line of its attempt's end, its last part when it is longer.
MAX_TRACEBACK_CHARS = 8000

# The largest result a report carries, as pulse_attempt_complete takes it: JSON of at most 1 MiB. A larger one is
# refused here, unsent: one past the server's packet limit would not reach the routine's refusal, its connection
# would be cut, and the report tried again until the lease ran out (UNKNOWN, review) although the handler ended.
MAX_RESULT_BYTES = 1024 * 1024


def default_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"[:128]


@dataclass
class Worker:
    dsn: db.Dsn
    queues: list[str]
    concurrency: int = 8
    namespace: str | None = None
    lease_ms: int = 30_000
    heartbeat_ms: int = 10_000
    grace_ms: int = 30_000
    idle_probe_ms: int = 50  # the first sleep after a claim that found nothing
    idle_max_ms: int = 800  # while claims keep finding nothing the sleep doubles up to this
    worker_id: str = field(default_factory=default_worker_id)
    handlers: Registry = field(default_factory=lambda: registry)
    stats: Counter = field(default_factory=Counter)

    def __post_init__(self) -> None:
        if not self.queues:
            raise ValueError("a worker needs at least one queue")
        pulse.queue_names(self.queues)  # a name no queue can have: every claim would be refused
        # What the claim routine would refuse on the first claim (K-1), refused here, where it is set.
        if not 1 <= self.concurrency <= 1000:
            raise ValueError("concurrency must be 1-1000: a claim takes at most 1000 tasks")
        if self.lease_ms < 1:
            raise ValueError(f"lease_ms (--lease-ms) must be positive, not {self.lease_ms}")
        if self.heartbeat_ms < 1:
            raise ValueError(f"heartbeat_ms (--heartbeat-ms) must be positive, not {self.heartbeat_ms}")
        if self.heartbeat_ms >= self.lease_ms:
            raise ValueError(f"heartbeat_ms (--heartbeat-ms, {self.heartbeat_ms}) must be shorter than lease_ms "
                             f"(--lease-ms, {self.lease_ms}), or leases would run out between two heartbeats")
        if self.lease_ms > 86_400_000:
            raise ValueError("lease_ms (--lease-ms) must be at most 86400000 (a day)")
        if not 1 <= len(self.worker_id) <= 128:
            raise ValueError(f"worker_id (--worker-id) must be 1-128 characters, not {len(self.worker_id)}")
        if self.grace_ms < 0:
            raise ValueError("grace_ms must not be negative")
        if self.idle_max_ms > IDLE_MAX_MS:
            raise ValueError(f"idle_max_ms must be at most {IDLE_MAX_MS} (a day)")
        self._connections = Connections(self.dsn)
        # The heartbeat thread's connections answer within a heartbeat interval or fail. Beats run one after another,
        # and one stuck on a hung node (the DSN's read timeout is 120 s by default) would hold every other attempt's
        # beat behind it until their leases ran out; failed, the next beat goes to a node that answers.
        beat_s = max(1.0, self.heartbeat_ms / 1000.0)
        limits = {name: beat_s for name in ("read_timeout", "write_timeout") if self.dsn.timeout(name) > beat_s}
        self._beats = Connections(self.dsn.with_options(**limits) if limits else self.dsn)
        self._stop = threading.Event()
        self._hurry = threading.Event()  # asked to stop a second time: no grace period
        self._loop_conn: db.Connection | None = None  # the claim loop's connection (see stop)
        self._heartbeats_stop = threading.Event()
        self._cond = threading.Condition()
        self._inflight: dict[int, TaskContext] = {}
        self._work: queue.Queue = queue.Queue()
        self._threads: list[threading.Thread] = []
        self._ended = False  # an attempt ended since the claim loop last looked (guarded by _cond)
        # When tasks this worker's reports scheduled become claimable (a POLL step's next round, a retry): monotonic
        # times, a heap, guarded by _cond.
        self._expected: list[float] = []
        # Attempts this worker ran and then left to their leases (a report that could not be written, a crash in the
        # worker): still RUNNING in the database, and never to be run again (guarded by _cond).
        self._left_to_lease: set[int] = set()
        # Engine time before this worker's first claim: what a lost claim's read-back goes back to at most.
        self._since: dt.datetime | None = None
        self.claimed = 0
        # Reports that cannot be written (no connection to be had: the server's max_connections reached by all its
        # clients together) stop the claims: every task claimed meanwhile would run and then go to review UNKNOWN
        # when its lease ran out. Set by a report's first failed try, cleared by a report written, or, once no
        # report is trying any more, by a connection the claim loop manages to open for the next one (guarded).
        self._reports_blocked = False
        self._reports_trying = 0  # reports being tried again after a failure (guarded)

    # --- connections -----------------------------------------------------------------------------------------
    def _conn(self) -> db.Connection:
        return self._connections.get()

    def _claim_conn(self) -> db.Connection:
        """The claim loop's connection, remembered so that a second stop can cut a read that hangs on it."""
        self._loop_conn = self._connections.get()
        return self._loop_conn

    def _drop_conn(self) -> None:
        self._connections.discard()

    def _report(self, fn: Callable[[db.Connection], dict]) -> dict:
        """An attempt's report, retried on transient errors (and on the database at another level than this build's
        for a moment) with jittered exponential backoff for as long as the
        attempt's lease lasts: a finished attempt whose report is lost becomes UNKNOWN when its lease runs out and
        goes to review (K-4), so a restart or a failover shorter than the lease must not lose it. Trying again is
        safe: a report that committed and lost only its answer is answered LATE the next time, and changes
        nothing."""
        # A routine missing or not this build's for a moment (installed again by a migrate: dropped, then created)
        # is tried again as a lost connection is: the handler has ended, and only its report is missing.
        trying = False
        written = False  # a try may have committed: its connection was lost after the report was sent

        def report(conn: db.Connection) -> dict:
            nonlocal written
            try:
                return fn(conn)
            except Exception as exc:
                written = written or errors.answer_may_be_lost(exc)
                raise

        def again() -> None:
            nonlocal trying
            if not trying:
                trying = True
                with self._cond:
                    self._reports_trying += 1
                    if not self._reports_blocked:
                        self._reports_blocked = True
                        log.warning("a report cannot be written: claiming stops until one is", extra={"fields": {
                            "worker": self.worker_id}})

        try:
            answer = self._connections.retrying(report, seconds=self.lease_ms / 1000.0, retryable=_report_again,
                                                on_retry=again)
        except errors.WeaveError as exc:
            exc.may_be_written = written  # type: ignore[attr-defined]  # for the line that says it failed
            raise
        finally:
            if trying:
                with self._cond:
                    self._reports_trying -= 1
        with self._cond:
            if self._reports_blocked and not self._reports_trying:  # none other still being tried
                self._reports_blocked = False
                log.info("reports are written again: claiming goes on", extra={"fields": {"worker": self.worker_id}})
            self._cond.notify_all()
        return answer

    def _claims_held(self) -> bool:
        """Whether the claim loop holds its claims because reports cannot be written: while a report is still being
        tried, or, once none is, until a connection for the next one can be opened (it is kept for that report)."""
        with self._cond:
            if not self._reports_blocked:
                return False
            trying = self._reports_trying
        if not trying:
            try:
                self._connections.spare()
            except Exception:  # noqa: BLE001 - no connection yet, however it failed: held, and looked at again
                pass
            else:
                with self._cond:
                    self._reports_blocked = False
                log.info("a connection for reports can be had again: claiming goes on", extra={"fields": {
                    "worker": self.worker_id}})
                return False
        self.stats["claims_held"] += 1
        return True

    def check_level(self) -> None:
        """The start-up check (R-16), and a warning when the worker's connections at most pass the server's limit."""
        conn = self._conn()
        installer.check_level(conn)
        # Each attempt thread reports on a connection of its own, beside the claim loop's and the heartbeats'. Past
        # max_connections, reports meet "too many connections" until their leases run out (UNKNOWN, review).
        with conn.cursor() as cur:
            cur.execute("SELECT @@max_connections AS m")
            limit = int(cur.fetchall()[0]["m"])
        connections = self.concurrency + 2
        if connections > limit:
            log.warning("more connections than the server's max_connections: reports would be refused connections "
                        "until their leases ran out; use a lower --concurrency, or raise max_connections",
                        extra={"fields": {"concurrency": self.concurrency, "connections": connections,
                                          "max_connections": limit}})

    def close(self) -> None:
        """Close every connection of the worker: its claim loop's, and those its ended threads left for the next run."""
        self._connections.close_all()
        self._beats.close_all()

    @property
    def stopping(self) -> threading.Event:
        """Set once the worker was asked to stop (SIGTERM, SIGINT or ``stop``)."""
        return self._stop

    # --- the claim loop --------------------------------------------------------------------------------------
    @property
    def in_flight(self) -> int:
        with self._cond:
            return len(self._inflight)

    def stop(self, *_: object) -> None:
        """Stop claiming; running attempts get the grace period to finish (K-9), and their handlers are told
        (``ctx.worker_stopping``, which wakes ``ctx.wait_stop``). Asked a second time (a second Ctrl-C, another
        SIGTERM), the worker waits no longer: what still runs is left to lease recovery, as after the grace."""
        if self._stop.is_set():
            self._hurry.set()
            with self._cond:
                self._cond.notify_all()
            # The claim loop may be waiting on the database (a network that went silent holds a read for the DSN's
            # read timeout, two minutes by default): its socket is shut, so that it stops now, as asked. A claim cut
            # so is one whose attempts, had it committed, are left to their leases, as the running ones are.
            conn = self._loop_conn
            sock = getattr(conn, "_sock", None) if conn is not None else None
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
            log.warning("asked again to stop: not waiting for running attempts", extra={"fields": {
                "worker": self.worker_id, "running": self.in_flight}})
            return
        self._stop.set()
        with self._cond:
            running = list(self._inflight.values())
            self._cond.notify_all()
        # Said at once: a worker that waits for its attempts in silence looks hung to whoever stopped it.
        log.info("stopping: no new claims; running attempts may finish within the grace period", extra={"fields": {
            "worker": self.worker_id, "running": len(running), "grace_ms": self.grace_ms,
            "hint": "stop it again (a second Ctrl-C or SIGTERM) to leave them to lease recovery now"}})
        for ctx in running:
            ctx._signal(ctx._stopping)

    def run(self, *, max_claims: int | None = None, until: Callable[[], bool] | None = None,
            exit_when_idle: bool = False) -> Counter:
        """Claim and run tasks until stopped (or ``max_claims`` tasks were claimed, or ``until()`` holds, or —
        with ``exit_when_idle`` — nothing is claimable and nothing runs), then let running attempts finish
        within the grace period. Returns the outcome counts."""
        log.info("worker started", extra={"fields": {
            "worker": self.worker_id, "queues": self.queues, "namespace": self.namespace,
            "concurrency": self.concurrency, "lease_ms": self.lease_ms, "heartbeat_ms": self.heartbeat_ms,
            "handlers": self.handlers.names()}})
        self._start_threads()
        try:
            self._claim_loop(None if max_claims is None else self.claimed + max_claims, until, exit_when_idle)
        finally:
            self._finish()
        log.info("worker stopped", extra={"fields": {"worker": self.worker_id, **dict(self.stats)}})
        return self.stats

    def _idle_wait(self, seconds: float) -> bool:
        """Sleep up to ``seconds`` after a claim that found nothing; an attempt that ends (its next round or
        successor task is likely to follow) or ``stop`` wakes it early. True when an attempt ended."""
        with self._cond:
            if not self._ended and not self._stop.is_set():
                self._cond.wait(seconds)
            ended, self._ended = self._ended, False
        return ended

    def _claim_loop(self, claim_until: int | None, until: Callable[[], bool] | None, exit_when_idle: bool) -> None:
        """Claim while there is work; after a claim that found nothing, sleep idle_probe_ms, doubling up to
        idle_max_ms while claims keep finding nothing (an idle worker costs a few statements a second), and back
        to idle_probe_ms as soon as a claim finds work or an attempt of this worker ends. A claim that brought
        fewer tasks than it asked for is followed by a sleep of idle_probe_ms too, not by another claim. No sleep
        outlasts the time a task this worker's reports scheduled becomes claimable (a POLL step's next round, a
        retry): the worker claims then, and sleeps idle_probe_ms again if the task is not there yet."""
        idle = self.idle_probe_ms / 1000.0
        longest = max(self.idle_probe_ms, self.idle_max_ms) / 1000.0
        pause = idle
        failures = 0
        unanswered: float | None = None  # when (monotonic) a claim that lost its connection began: it may have
        # committed, and its attempts are ours
        while not self._stop.is_set():
            if (until and until()) or (claim_until is not None and self.claimed >= claim_until):
                return
            with self._cond:
                free = self.concurrency - len(self._inflight)
                if free <= 0:
                    self._cond.wait(idle)
                    continue
                self._ended = False
            if self._claims_held():
                self._stop.wait(max(idle, HELD_CLAIMS_WAIT_S))  # a connection tried four times a second at most
                continue
            limit = free if claim_until is None else min(free, claim_until - self.claimed)
            claiming = False
            try:
                if self._since is None:
                    began_at = db.call_row(self._claim_conn(), "weave_clock_now")["now_at"]
                    self._warn_of_namesakes(began_at)  # before it is set: a failure here is tried again
                    self._warn_of_namespaces()
                    self._since = began_at
                if unanswered is not None:
                    self._take_unanswered(unanswered)
                    unanswered = None
                    continue
                claiming = True
                claim_began = time.monotonic()
                claims = pulse.task_claim(self._claim_conn(), self.worker_id, self.queues, limit=limit,
                                          lease_ms=self.lease_ms, namespace=self.namespace)
                if failures:  # the end of an outage is said as its start was
                    log.info("the database answers again", extra={"fields": {"worker": self.worker_id,
                                                                             "failed": failures}})
                failures = 0
            except errors.TransientDatabaseError as exc:
                failures += 1
                self._drop_conn()
                if claiming and errors.answer_may_be_lost(exc) and unanswered is None:
                    unanswered = claim_began
                log.warning("claim failed; retrying", extra={"fields": {"worker": self.worker_id, "error": str(exc)}})
                self._stop.wait(min(5.0, 0.05 * 2 ** min(failures, 7)))
                continue
            except errors.SchemaMismatch as exc:  # claims nothing on tables between two levels
                self._drop_conn()
                hold_until_level(self.check_level, self._stop, "worker", exc)
                continue
            if not claims:
                if exit_when_idle and self.in_flight == 0:
                    return
                pause = idle if self._rest(pause) else min(pause * 2, longest)
                continue
            pause = idle
            self._start(claims)
            if len(claims) < limit:
                # A short claim took every task it could reach: claimed again at once, the queues would answer
                # nothing (a claim's three statements) unless a task came within the last moment, which the next
                # claim finds as it finds one that comes during the sleep.
                self._rest(idle)

    def _start(self, claims: list[dict]) -> None:
        """Hand claimed attempts to the attempt threads."""
        for claim in claims:
            ctx = _context(claim)
            with self._cond:
                self._inflight[ctx.attempt_id] = ctx
                if self._stop.is_set():  # a claim answered as the worker was told to stop
                    ctx._signal(ctx._stopping)
            self._work.put((claim, ctx))
        self.claimed += len(claims)
        self.stats["claimed"] += len(claims)

    def _take_unanswered(self, began: float | None = None) -> None:
        """After a claim whose answer was lost (its connection lost, or the claim interrupted after its commit):
        its attempts, if it committed, are RUNNING for this worker and nobody runs them. They are read back
        (pulse_worker_attempts) and run like a claim's, before the next claim; left alone they would run out
        their leases unrun and go to review as UNKNOWN (K-4). An attempt this worker ran and left to its lease
        (its report could not be written) is RUNNING too, and is never run twice; nor is one that an earlier
        process with the same worker id started (only those since this worker began are read). ``began``: when
        (time.monotonic()) the lost claim began. Only attempts started since then run, on the engine's clock
        (its time now, less the time since, less a second): a process that wrongly shares this worker's id,
        running alongside, has its earlier claims left to it, never run a second time here. Should the engine's
        clock have jumped ahead meanwhile (a failover to a node whose clock is ahead), the claim's own attempts
        are left out too: the doubt goes the safe way (their leases end them, UNKNOWN, for a person to look at,
        where running another's would do its work twice), and a warning names them."""
        with self._cond:
            known = set(self._inflight) | self._left_to_lease  # running here, or run here already
        window = None
        if began is not None:
            now = db.call_row(self._conn(), "weave_clock_now")["now_at"]
            window = now - dt.timedelta(seconds=time.monotonic() - began + LOST_CLAIM_MARGIN_S)
        running = [row for row in pulse.worker_attempts(self._conn(), self.worker_id, self._since)
                   if row["attempt_id"] not in known]
        lost = [row for row in running if window is None or row["started_at"] >= window]
        left = [row["attempt_id"] for row in running if window is not None and row["started_at"] < window]
        if left:
            log.warning("attempts under this worker id that started before the lost claim began are left to their "
                        "leases: another process may be using the same id, or the engine's clock moved ahead",
                        extra={"fields": {"attempts": left[:20]}})
        if lost:
            log.warning("a claim lost its answer: its attempts run now", extra={"fields": {
                "attempts": [row["attempt_id"] for row in lost]}})
            self.stats["unanswered_claims_taken"] += len(lost)
            self._start(lost)

    def _warn_of_namesakes(self, now: dt.datetime) -> None:
        """At start (engine time ``now``): attempts RUNNING under this worker's id with their leases live are
        another process's, one still running or one just gone (a restart before its leases ran out). Two workers
        must never share an id: a report of one fails the other's attempt, and a lost claim's read-back has to
        tell their attempts apart by when they started."""
        live = [row["attempt_id"] for row in pulse.worker_attempts(self._conn(), self.worker_id)
                if row["lease_expires_at"] > now]
        if live:
            log.warning("attempts under this worker id are running with live leases: another process may be using "
                        "the same id, which two running workers must never share (or an earlier one has just "
                        "stopped, and its leases will end them)", extra={"fields": {
                            "worker": self.worker_id, "attempts": live[:20]}})

    def _warn_of_namespaces(self) -> None:
        """At start, for a worker given no --namespace: when its queues are named in several namespaces, its handlers
        will run every one's tasks. On an install shared by tenants, queue names repeat (payments, say), and a
        tenant's handlers saw another's inputs and decided its results."""
        if self.namespace:
            return
        names = ", ".join(["%s"] * len(self.queues))
        with self._conn().cursor() as cur:
            cur.execute(f"SELECT DISTINCT n.name FROM weave_queues q JOIN weave_namespaces n ON n.id = q.namespace_id "
                        f"WHERE q.name IN ({names}) ORDER BY n.name LIMIT 11", tuple(self.queues))
            namespaces = [row["name"] for row in cur.fetchall()]
        if len(namespaces) > 1:
            log.warning("this worker serves its queues in every namespace, and several have them: its handlers run "
                        "the tasks of each; give --namespace to serve one", extra={"fields": {
                            "worker": self.worker_id, "queues": self.queues, "namespaces": namespaces[:10]}})

    def _rest(self, seconds: float) -> bool:
        """Sleep as ``_idle_wait``, but not beyond the time a task this worker's reports scheduled becomes
        claimable. True when an attempt ended or that time came: the claims that follow start over from
        idle_probe_ms."""
        expected = self._until_expected()
        if expected is not None and expected < seconds:
            self._idle_wait(expected)
            return True
        return self._idle_wait(seconds)

    def _until_expected(self) -> float | None:
        """Seconds until the first task this worker's reports scheduled becomes claimable, or None. Times passed
        are dropped: the claim just made looked for their tasks."""
        now = time.monotonic()
        with self._cond:
            self._drop_expected(now)
            return self._expected[0] - now if self._expected else None

    def _drop_expected(self, now: float) -> None:
        """Forget the expected times that have passed (the caller holds ``_cond``)."""
        while self._expected and self._expected[0] <= now:
            heapq.heappop(self._expected)

    def _finish(self) -> None:
        """Let running attempts finish within the grace period; anything still running after it is left to
        lease recovery (K-4, K-9)."""
        deadline = time.monotonic() + self.grace_ms / 1000.0
        with self._cond:
            while self._inflight and time.monotonic() < deadline and not self._hurry.is_set():
                self._cond.wait(min(0.1, max(0.0, deadline - time.monotonic())))
            abandoned = sorted(self._inflight)
        if abandoned:
            said = "asked again to stop" if self._hurry.is_set() else "grace period over"
            log.warning(f"{said}; leaving running attempts to lease recovery", extra={"fields": {
                "worker": self.worker_id, "attempts": abandoned}})
        for t in self._threads:
            if t.name.startswith("task-"):
                self._work.put(None)
        self._heartbeats_stop.set()

    # --- threads ---------------------------------------------------------------------------------------------
    def _start_threads(self) -> None:
        # Each run gets its own work queue and heartbeat switch: a thread abandoned by an earlier run (grace
        # period over) finishes its attempt and exits without touching the new run's work.
        self._stop.clear()
        self._hurry.clear()
        self._heartbeats_stop = threading.Event()
        self._work = queue.Queue()
        self._threads = [threading.Thread(target=self._executor, args=(self._work,), name=f"task-{n}", daemon=True)
                         for n in range(self.concurrency)]
        self._threads.append(threading.Thread(target=self._heartbeater, args=(self._heartbeats_stop,),
                                              name="heartbeat", daemon=True))
        for t in self._threads:
            t.start()

    def _executor(self, work: queue.Queue) -> None:
        try:
            while True:
                item = work.get()
                if item is None:
                    return
                claim, ctx = item
                try:
                    self._execute(claim, ctx)
                # Never lose the slot, nor the thread: the lease decides what happens to the attempt. A SystemExit
                # ended the thread without a word (Python's thread hook prints none), and the worker went on
                # claiming tasks that no thread would run, their leases kept alive by the heartbeats.
                except BaseException:  # noqa: BLE001
                    log.exception("attempt crashed in the worker", extra={"fields": _attempt_fields(ctx)})
                    with self._cond:
                        self._left_to_lease.add(ctx.attempt_id)
                finally:
                    with self._cond:
                        self._inflight.pop(ctx.attempt_id, None)
                        self._ended = True
                        self._cond.notify_all()
        finally:
            self._connections.release()  # for the next run's threads, its routines parsed

    def _heartbeater(self, stop: threading.Event) -> None:
        interval = self.heartbeat_ms / 1000.0
        try:
            while not stop.wait(interval):
                with self._cond:
                    running = [ctx for ctx in self._inflight.values() if not ctx.lease_lost]
                for ctx in running:
                    self._heartbeat(ctx)
        finally:
            self._beats.release()

    def _heartbeat(self, ctx: TaskContext) -> None:
        try:
            beat = pulse.attempt_heartbeat(self._beats.get(), ctx.attempt_id, self.worker_id, self.lease_ms)
        except (errors.AttemptNotCurrent, errors.NotFound):
            if ctx._reporting.is_set():
                return  # the attempt's own report ended it meanwhile: its answer, not the lease, says how
            ctx._signal(ctx._lost)
            self.stats["lease_lost"] += 1
            log.warning("lease lost; the attempt's report will change nothing", extra={"fields": {
                "worker": self.worker_id, **_attempt_fields(ctx)}})
            return
        except errors.TransientDatabaseError as exc:
            self._beats.discard()
            log.warning("heartbeat failed", extra={"fields": {**_attempt_fields(ctx), "error": str(exc)}})
            return
        except Exception as exc:
            # Any other failure (a server refusing connections, a node turned read-only, an answer out of shape)
            # is this beat's alone: the thread goes on to the other attempts and beats again next time, on a new
            # connection. Ending the thread would let every running attempt's lease run out (K-4: UNKNOWN, review).
            self._beats.discard()
            log.error("heartbeat failed", extra={"fields": {**_attempt_fields(ctx), "error": _describe(exc)}})
            return
        ctx.lease_expires_at = beat["lease_expires_at"]
        if beat["cancel_requested"] and not ctx.cancel_requested:
            ctx._signal(ctx._cancel)
            log.info("cancellation requested", extra={"fields": _attempt_fields(ctx)})

    # --- one attempt -----------------------------------------------------------------------------------------
    def _execute(self, claim: dict, ctx: TaskContext) -> None:
        started = time.monotonic()
        try:
            fn = self.handlers.get(ctx.handler, ctx.handler_version)
        except HandlerNotFound as exc:
            self._report_fail(ctx, f"HANDLER_NOT_FOUND: {exc}", retryable=False, started=started)
            return
        try:
            given = json.loads(claim["input"], parse_float=decimal.Decimal if fn.decimals else jsontext.finite_float)
        except ValueError as exc:  # kept by the engine as JSON text, but no value Python can hand over as it is
            self._report_fail(ctx, f"INPUT_INVALID: the task's input cannot be given to its handler: {exc}",
                              retryable=False, started=started)
            return
        try:
            value = fn(given, ctx)
        except Retryable as exc:
            self._report_fail(ctx, _describe(exc), retryable=True, started=started)
            return
        except BaseException as exc:  # any other exception is a non-retryable failure (K-8), SystemExit included:
            # a handler that calls sys.exit() ends its attempt, not the worker's thread that runs it
            self._report_fail(ctx, _describe(exc), retryable=False, started=started, crash=exc)
            return
        try:
            text = jsontext.dumps_exact(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
            if not jsontext.is_text(text):  # a lone surrogate ("\ud800"): a str Python holds and no report carries
                raise ValueError("a string holds a lone surrogate, which is not text")
            twice = _key_written_twice(value)
            if twice is not None:
                raise ValueError(f"an object has two keys written {twice!r} (as 1 and \"1\" are): a key twice")
        # A value nested past Python's recursion limit is not JSON either, nor one whose own code fails as it is
        # written (a mapping whose items() raises, a dict changed while it is read): the handler has ended, and its
        # value never will be JSON, so the attempt fails now rather than run out its lease as an unknown effect.
        except Exception as exc:
            self._report_fail(ctx, f"RESULT_INVALID: the handler returned a value that is not JSON: {_describe(exc)}",
                              retryable=False, started=started)
            return
        size = len(text.encode())
        if size > MAX_RESULT_BYTES:
            self._report_fail(ctx, f"RESULT_INVALID: the result must be JSON of at most 1 MiB, got {size} bytes",
                              retryable=False, started=started)
            return
        ctx._reporting.set()
        try:
            answer = self._report(
                lambda conn: pulse.attempt_complete(conn, ctx.attempt_id, self.worker_id, result_json=text))
        except errors.ValidationFailed as exc:
            self._report_fail(ctx, f"{exc.field_code}: {exc.detail}", retryable=False, started=started)
            return
        except errors.WeaveError as exc:
            self._report_lost(ctx, exc, outcome="SUCCEEDED", result=text)
            return
        self._record(ctx, answer, started)

    def _report_fail(self, ctx: TaskContext, error: str, *, retryable: bool, started: float,
                     crash: BaseException | None = None) -> None:
        """``crash``: the exception the handler raised, whose traceback the log line carries (the task keeps only
        ``error``, its one line)."""
        ctx._reporting.set()
        try:
            text = jsontext.as_text(error[:MAX_ERROR_CHARS])  # a lone surrogate in it, escaped, is still read
            answer = self._report(
                lambda conn: pulse.attempt_fail(conn, ctx.attempt_id, self.worker_id, text, retryable))
        except errors.WeaveError as exc:
            self._report_lost(ctx, exc, outcome="FAILED", error=error)
            return
        self._record(ctx, answer, started, error=error, crash=crash)

    def _report_lost(self, ctx: TaskContext, exc: Exception, *, outcome: str, result: str | None = None,
                     error: str | None = None) -> None:
        """The report could not be written before its lease ran out: the attempt will end UNKNOWN, for review, unless a
        try whose answer was lost had written it. What the handler did is said here, since the engine may not hold it:
        its outcome, and for a success the size and SHA-256 of its result (to compare with the external system), for
        a failure its error."""
        self.stats["report_failed"] += 1
        with self._cond:
            self._left_to_lease.add(ctx.attempt_id)
        said: dict[str, object] = {"outcome": outcome}
        if result is not None:
            said.update(result_bytes=len(result.encode()), result_sha256=hashlib.sha256(result.encode()).hexdigest())
        if error is not None:
            said["handler_error"] = error[:500]
        if getattr(exc, "may_be_written", False):
            # A try's connection was lost once the report was sent: it may have committed, and then the attempt has
            # ended as reported, not UNKNOWN. An error here sent operators after a review that never came.
            log.warning("report's answer was lost; it may have been written, else the lease will decide", extra={
                "fields": {**_attempt_fields(ctx), "error": str(exc), **said}})
            return
        log.error("report failed; the lease will decide", extra={"fields": {
            **_attempt_fields(ctx), "error": str(exc), **said}})

    def _record(self, ctx: TaskContext, answer: dict, started: float, error: str | None = None,
                crash: BaseException | None = None) -> None:
        outcome = answer["outcome"]
        self.stats[outcome] += 1
        if answer.get("next_task_in_ms") is not None:  # the step's next round, or this task's retry
            now = time.monotonic()
            with self._cond:
                # Passed times go here too: a worker whose claims stay full never sleeps, and its heap would grow.
                self._drop_expected(now)
                heapq.heappush(self._expected, now + answer["next_task_in_ms"] / 1000 + EXPECTED_LATE_S)
        fields = {**_attempt_fields(ctx), "attempt_no": ctx.attempt_no,
                  "handler": f"{ctx.handler}@{ctx.handler_version}", "outcome": outcome,
                  "task_status": answer["task_status"], "ms": round((time.monotonic() - started) * 1000, 1)}
        if answer.get("round_outcome") is not None:
            fields["round_outcome"] = answer["round_outcome"]
        if error:
            fields["error"] = error[:500]
        if crash is not None:
            fields["traceback"] = jsontext.as_text("".join(traceback.format_exception(crash))[-MAX_TRACEBACK_CHARS:])
        # An attempt whose end leaves its task FAILED (its step goes to review) needs someone: a warning, which
        # WEAVE_LOG_LEVEL=WARNING keeps; so does a poll's answer its step could not take or leaves to a person
        # (the task SUCCEEDED, the step went to review). A report that came too late changed nothing: a warning too.
        needs_attention = outcome == "LATE" or answer["task_status"] == "FAILED" \
            or answer.get("round_outcome") in ("INVALID", "REVIEW_VALUE")
        (log.warning if needs_attention else log.info)("attempt ended", extra={"fields": fields})


def _key_text(key: object) -> str:
    """A dict key as json writes it."""
    if isinstance(key, str):
        return key
    if key is None or isinstance(key, bool):
        return json.dumps(key)
    return int.__repr__(key) if isinstance(key, int) else float.__repr__(key)


def _key_written_twice(value: object) -> str | None:
    """The text of a key that two keys of one dict in ``value`` (already written as JSON) are both written as (1 and
    "1", True and "true"), else None. Such JSON holds a key twice: the server's JSON functions read the first,
    Python the last, so an expression and the API would read different step outputs."""
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if not all(type(key) is str for key in node):
                seen: set[str] = set()
                for key in node:
                    text = _key_text(key)
                    if text in seen:
                        return text
                    seen.add(text)
            stack.extend(node.values())
        elif isinstance(node, list | tuple):
            stack.extend(node)
    return None


# How long the claim loop waits between two looks while reports cannot be written.
HELD_CLAIMS_WAIT_S = 0.25


def _report_again(exc: BaseException) -> bool:
    return errors.is_transient(exc) or errors.is_schema_mismatch(exc)


def _attempt_fields(ctx: TaskContext) -> dict[str, object]:
    """What names an attempt in a log line: its task and attempt, and the instance, namespace, step and round it
    works for, so that a line leads to the order it is about without a query."""
    fields: dict[str, object] = {"task": ctx.task_id, "attempt": ctx.attempt_id, "workflow_id": ctx.workflow_id,
                                 "namespace": ctx.namespace, "step": ctx.step_key}
    if ctx.round_no:
        fields["round"] = ctx.round_no
    return fields


def _describe(exc: BaseException) -> str:
    try:
        text = str(exc)
    except BaseException as err:  # noqa: BLE001 - its own __str__ failed: the failure is still the handler's to report
        return f"{type(exc).__name__} (its text could not be read: {type(err).__name__})"
    if isinstance(exc, Retryable):
        return text or "Retryable"
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _context(claim: dict) -> TaskContext:
    return TaskContext(
        task_id=claim["task_id"], attempt_id=claim["attempt_id"], attempt_no=claim["attempt_no"],
        max_attempts=claim["max_attempts"], namespace=claim["namespace"], queue=claim["queue"],
        workflow_id=claim["workflow_id"], step_key=claim["step_key"], round_no=claim["round_no"],
        handler=claim["handler"], handler_version=claim["handler_version"], deadline_at=claim["deadline_at"],
        lease_expires_at=claim["lease_expires_at"])


def run_worker(dsn: db.Dsn, *, queues: Iterable[str], handler_modules: Iterable[str] = (), concurrency: int = 8,
               namespace: str | None = None, lease_ms: int = 30_000, heartbeat_ms: int = 10_000,
               grace_ms: int = 30_000, worker_id: str | None = None, idle_max_ms: int = 800,
               json_errors: bool = False) -> int:
    """``weave worker``: load the handler modules, check the database level (R-16), run until SIGTERM/SIGINT.
    ``json_errors``: a refusal to start as JSON on stderr (``--json``)."""
    configure_logging()
    settings.http_allowlist()  # read by the built-in http handler at each call: a bad value stops the start instead
    try:
        loaded = load_modules(handler_modules)
    except HandlerModuleError as exc:
        return refuse("worker", "HANDLER_MODULE_INVALID", str(exc), 1, json_errors, text=str(exc))
    if not set(registry.names()) - BUILT_IN_HANDLERS:
        # Not an error (a worker may serve only the built-in http handler), but the usual slip: every task for
        # another handler would fail HANDLER_NOT_FOUND at once (K-8) and send its step to review.
        log.warning("no handler of your own is registered: this worker runs only the built-in handlers, and a task "
                    "for any other handler fails HANDLER_NOT_FOUND", extra={"fields": {
                        "modules": loaded, "handlers": registry.names(),
                        "hint": "pass --handlers MODULE with the modules whose @handler functions this worker runs"}})
    names = [q.strip() for spec in queues for q in spec.split(",") if q.strip()]  # "--queue 'a, b'" too
    try:
        worker = Worker(dsn, names, concurrency=concurrency, namespace=namespace, lease_ms=lease_ms,
                        heartbeat_ms=heartbeat_ms, grace_ms=grace_ms, idle_max_ms=idle_max_ms,
                        worker_id=default_worker_id() if worker_id is None else worker_id)
    except ValueError as exc:
        return refuse("worker", "USAGE_INVALID", str(exc), 2, json_errors, text=str(exc))
    log.info("handler modules loaded", extra={"fields": {"modules": loaded}})
    return serve(worker, "worker", json_errors)
