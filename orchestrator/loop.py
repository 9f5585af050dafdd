"""The orchestrator's scan loop (R-10..R-14).

The loop proposes, the routines decide: every candidate is advanced by one routine call that is its
own short transaction and re-verifies everything under lock. Nothing here reads a clock to decide
anything; the engine time comes back from ``weave_scan``. Any number of orchestrators may run.
"""

from __future__ import annotations

import datetime
import json
import logging
import os
import random
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import pymysql

from procedures import candidates, db, errors, installer
from procedures.connections import Connections
from procedures.logs import configure_logging, refuse

from .daemon import IDLE_MAX_MS, hold_until_level, serve

log = logging.getLogger("weave.orchestrator")

# Outcomes that mean another node got to the candidate first: it holds the instance or already advanced it.
# How long a due candidate may be skipped because another transaction holds its instance before a warning names it:
# decisions hold an instance for milliseconds, so this is something else (an interactive session, a report query).
BUSY_WARN_S = 10.0
TAKEN = frozenset({"GONE", "BUSY"})
# How many batches ahead a node looks after another node overtook it (it then takes one of them at random).
AHEAD_BLOCKS = 4


@dataclass(frozen=True)
class Candidate:
    klass: str
    id: int
    version: int
    due_at: object


@dataclass
class ScanResult:
    candidates: list[Candidate]
    now: datetime.datetime
    next_at: datetime.datetime | None
    full: bool = False  # the scan answered as many rows as it was asked for: more may be due than it showed
    again: bool = True  # after the batch: something may be due now, so scan again at once instead of probing
    # every candidate of the batch failed, or the database refused a write as it refuses every one (read-only, not
    # ready): scanning again at once would only fail them again
    stalled: bool = False


# Outcomes after which the candidate may still be due: another node holds its instance, a fact of its instance due
# before it is to be decided first (the next scan brings both), or the advance failed.
UNSETTLED = frozenset({"BUSY", "EARLIER_FIRST", "FAILED"})

# After a batch whose every candidate failed, the loop waits this long before it scans again, doubling up to the
# longest while batches keep failing whole: a failure that is not booked (a lease recovery or a task expiry left
# for an operator, or any failure while the bookkeeping fails too) leaves its candidate due, and the next scan
# would bring it back at once, as fast as the database answers.
STALLED_FIRST_S = 0.1
# The scan's and the idle probe's connection answers within this or fails (seconds): both are short reads, and one
# stuck on a half-open connection would hold the whole loop, every due candidate with it, for the DSN's read timeout
# (120 s by default), without a word.
SCAN_TIMEOUT_S = 10.0
STALLED_LONGEST_S = 5.0


def _decided(node: str, klass: str, candidate: int, outcome: str, began: float) -> None:
    """One candidate's decision, at DEBUG (WEAVE_LOG_LEVEL=DEBUG): what an operator follows when a decision is in
    question; its effect is in the instance's events and audit rows. ``ms`` from the call's start (several
    candidates decided in one call share it)."""
    if log.isEnabledFor(logging.DEBUG):
        log.debug("decided", extra={"fields": {"node": node, "class": klass, "id": candidate, "outcome": outcome,
                                               "ms": round((time.monotonic() - began) * 1000, 1)}})


def _maybe_due(outcome: str, made_due: object) -> bool:
    """Whether something may be due now after an advance: the advancer said it made a candidate due (an advancer
    that does not answer made_due counts as yes), or the outcome leaves the candidate itself due."""
    return bool(made_due) or outcome in UNSETTLED


def merge_fairly(classes: list[list[Candidate]], limit: int) -> list[Candidate]:
    """One batch of at most ``limit``: classes take turns (no class starves the others), each class
    contributing its earliest first (R-10)."""
    batch: list[Candidate] = []
    queues = [list(c) for c in classes if c]
    while queues and len(batch) < limit:
        for q in list(queues):
            batch.append(q.pop(0))
            if not q:
                queues.remove(q)
            if len(batch) >= limit:
                break
    return batch


@dataclass
class Orchestrator:
    dsn: db.Dsn
    batch: int = 100
    concurrency: int = 4
    idle_probe_ms: int = 20
    idle_max_ms: int = 200  # while nothing is due the probe interval doubles up to this (Send settles open waits)
    node_id: str = field(default_factory=lambda: f"{socket.gethostname()}:{os.getpid()}")
    retry_attempts: int = 5
    spread: bool = True  # start batches at a random point (several nodes); tests turn it off for determinism
    chunk: int = 5  # due candidates of a listed class per weave_candidates_advance call
    stats: Counter = field(default_factory=Counter)

    def __post_init__(self) -> None:
        # A batch or a chunk of 0 would scan and never advance anything (every instance stalling, the loop
        # spinning on "full" scans); 0 connections would advance through one all the same.
        for name in ("batch", "concurrency", "chunk", "idle_probe_ms", "idle_max_ms"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")
        for name in ("idle_probe_ms", "idle_max_ms"):  # a longer sleep overflows the wait it is slept by
            if getattr(self, name) > IDLE_MAX_MS:
                raise ValueError(f"{name} must be at most {IDLE_MAX_MS} (a day)")
        if self.batch > 10_000:  # weave_scan's cap: a larger batch would be cut to it without a word
            raise ValueError("batch must be at most 10000: a scan brings at most 10000 candidates of a class")
        self._connections = Connections(self.dsn)
        limits = {name: SCAN_TIMEOUT_S for name in ("read_timeout", "write_timeout")
                  if self.dsn.timeout(name) > SCAN_TIMEOUT_S}
        self._scans = Connections(self.dsn.with_options(**limits) if limits else self.dsn)  # the loop thread's
        self._stop = threading.Event()
        # Set when an advance of the current batch lost the database after its retries: the batch's other units are
        # left (their candidates stay due) rather than each waiting out the same retries and connect timeouts.
        self._unreachable = threading.Event()
        # Set when an advance of the current batch was refused as every write is (a primary fenced read-only, a node
        # not ready): the batch is left as above, and the loop then waits as after a batch that failed whole.
        self._refused = threading.Event()
        self._pool = ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="advance")
        self._blocks = 1  # batches the next scan reads: more than one after a batch another node overtook
        # Candidates skipped because another transaction held their instance: the version skipped at, since when
        # (time.monotonic()), and whether a warning has named it (_note_busy).
        self._busy_since: dict[tuple[str, int], tuple[int, float, bool]] = {}
        self._busy_lock = threading.Lock()

    # --- connections --------------------------------------------------------------------------------
    def _conn(self) -> db.Connection:
        return self._connections.get()

    def _call(self, routine: str, *args: object) -> list[list[dict]]:
        """A routine call retried on transient errors with jittered exponential backoff (R-12)."""
        return self._connections.call(routine, *args, attempts=self.retry_attempts)

    def _look(self, routine: str, *args: object) -> list[list[dict]]:
        """The scan's or the probe's call on the loop's own connection (SCAN_TIMEOUT_S), retried as ``_call`` is, each
        failure said as it happens: a lost answer or a reset taken up by a retry would otherwise leave no trace."""
        what = "scan" if routine == "weave_scan" else "probe"

        def failed() -> None:
            log.warning(f"{what} failed; trying again", extra={"fields": {"node": self.node_id}})

        return self._scans.retrying(lambda conn: db.call(conn, routine, *args), self.retry_attempts,
                                    on_retry=failed)

    # --- the loop -----------------------------------------------------------------------------------
    def check_level(self) -> None:
        installer.check_level(self._scans.get())

    @property
    def stopping(self) -> threading.Event:
        """Set once the orchestrator was asked to stop (SIGTERM, SIGINT or ``stop``)."""
        return self._stop

    def scan(self, size: int | None = None) -> ScanResult:
        """The earliest due candidates, at most ``size`` (the batch by default), the classes taking turns."""
        size = size or self.batch
        rows, clock = self._look("weave_scan", size)
        per_class: dict[str, list[Candidate]] = {}  # in the order the scan lists the classes
        for r in rows:
            per_class.setdefault(r["class"], []).append(Candidate(r["class"], r["id"], r["version"], r["due_at"]))
        return ScanResult(merge_fairly(list(per_class.values()), size), clock[0]["now_at"], clock[0]["next_at"],
                          full=len(rows) >= size)

    def advance(self, cand: Candidate) -> str:
        return self._advance(cand)[0]

    def _advance(self, cand: Candidate) -> tuple[str, bool]:
        """One candidate's outcome, and whether anything may be due now after it: the advancer says so (made_due:
        it made a candidate due at its own time); an advancer that does not say, or an outcome that leaves the
        candidate due, counts as yes."""
        made_due = True
        began = time.monotonic()
        try:
            sets = self._call(candidates.BY_NAME[cand.klass].advancer, cand.id)
            row = sets[0][0] if sets and sets[0] else {}
            outcome = row.get("outcome", "DONE")
            made_due = row.get("made_due", True)
            _decided(self.node_id, cand.klass, cand.id, outcome, began)
        except (errors.WeaveError, pymysql.err.MySQLError) as exc:
            outcome = "FAILED"
            self.stats["failed"] += 1
            lost = self._away(exc)
            log.warning("advance failed", extra={"fields": {
                "class": cand.klass, "id": cand.id, "version": cand.version, "error": str(exc)}})
            if candidates.BY_NAME[cand.klass].bookkept and not lost:  # booked nowhere with the database away
                try:
                    self._call("weave_candidate_fail", cand.klass, cand.id, cand.version, str(exc)[:4000])
                except (errors.WeaveError, pymysql.err.MySQLError) as again:
                    log.error("failure bookkeeping failed", extra={"fields": {"id": cand.id, "error": str(again)}})
        self.stats[f"{cand.klass}:{outcome}"] += 1
        self._note_busy(cand, outcome)
        return outcome, _maybe_due(outcome, made_due)

    def _note_busy(self, cand: Candidate, outcome: str) -> None:
        """A candidate whose instance another transaction holds is skipped (BUSY) and comes back at the next scan;
        so is one that waits for an earlier fact of its instance (EARLIER_FIRST). Held for long (a forgotten
        interactive transaction, a report query with FOR UPDATE, an earlier fact whose advance keeps failing), it
        waits with nothing to say so: the due lag grows and it fails nothing. After BUSY_WARN_S of being skipped, its
        instance is named, once, in a warning."""
        key = (cand.klass, cand.id)
        waits = outcome in ("BUSY", "EARLIER_FIRST")
        if not waits and key not in self._busy_since:  # the usual advance: no lock taken
            return
        now = time.monotonic()
        with self._busy_lock:  # advances run on the pool's threads
            if not waits:
                self._busy_since.pop(key, None)
                return
            if len(self._busy_since) > 10_000:  # a bound, not a history: what is skipped for long comes back
                self._busy_since.clear()
            # Skipped at the same version all along: a candidate another node decided in between (a checkpoint is
            # kept and moved, its version raised) starts over, so two races lost a while apart are not a hold.
            version, since, warned = self._busy_since.get(key, (cand.version, now, False))
            if version != cand.version:
                since, warned = now, False
            self._busy_since[key] = (cand.version, since, warned or now - since >= BUSY_WARN_S)
            if warned or now - since < BUSY_WARN_S:
                return
        instance = None
        table = candidates.BY_NAME[cand.klass].table
        if table:
            try:
                with self._conn().cursor() as cur:
                    cur.execute(f"SELECT CONCAT('wf_', instance_id) AS wf FROM {table} WHERE id = %s", (cand.id,))
                    row = cur.fetchone()
                instance = row["wf"] if row else None
            except (errors.WeaveError, pymysql.err.MySQLError):
                instance = None
        log.warning("a due candidate's instance is held by another transaction: its decision waits"
                    if outcome == "BUSY" else
                    "a due candidate waits for an earlier fact of its instance, which is not decided", extra={
            "fields": {"node": self.node_id, "class": cand.klass, "id": cand.id, "workflow_id": instance,
                       "held_s": round(now - since)}})

    def _advance_list(self, cands: list[Candidate]) -> tuple[list[str], bool]:
        """Several candidates of one listed class in one call (weave_candidates_advance: each still its own
        transaction); their outcomes, and whether anything may be due now after them (as ``_advance``). When the
        call fails, the decisions before the failure stay; the list is then advanced one by one, which
        re-verifies those (GONE) and books the failure (R-12)."""
        klass = cands[0].klass
        began = time.monotonic()
        try:
            sets = self._call("weave_candidates_advance", klass, json.dumps([c.id for c in cands]))
        except (errors.WeaveError, pymysql.err.MySQLError) as exc:
            if self._away(exc):  # the list is left with the rest of the batch, for the next scan
                log.warning("advance failed; the batch is left", extra={"fields": {
                    "class": klass, "ids": [c.id for c in cands], "error": str(exc)}})
            outcomes, again = [], False
            for cand in cands:
                if self._stop.is_set() or self._unreachable.is_set():
                    break
                outcome, due = self._advance(cand)
                outcomes.append(outcome)
                again = again or due
            return outcomes, True if len(outcomes) < len(cands) else again
        rows = sets[0] if sets else []
        outcomes = [row["outcome"] for row in rows]
        by_id = {c.id: c for c in cands}
        for row in rows:
            self.stats[f"{klass}:{row['outcome']}"] += 1
            self._note_busy(by_id[row["id"]], row["outcome"])
            _decided(self.node_id, klass, row["id"], row["outcome"], began)
        again = not rows or any(_maybe_due(row["outcome"], row.get("made_due", True)) for row in rows)
        return outcomes, again

    def _away(self, exc: BaseException) -> bool:
        """Whether an advance's failure says the database takes nothing now (it is not reachable, it refuses every
        write alike, or it is not at this build's level): the rest of the batch is then left, and a refusal also
        makes the loop wait before it scans again (the scan, a read, would bring the same batch back at once). None
        is booked as the candidate's failure: none is the candidate's own."""
        refused = (errors.refuses_writes(exc) or errors.refused_by_settings(exc)
                   or (errors.is_schema_mismatch(exc) and not self._level_is_own()))
        if refused:
            self._refused.set()
        if refused or errors.is_connection_lost(exc):
            self._unreachable.set()
            return True
        return False

    def _level_is_own(self) -> bool:
        """Whether the database is at this build's level now: a failure that looks like another level's (a column
        or a routine missing) on it is the candidate's own, and booked as any other (R-12)."""
        try:
            self.check_level()
        except (errors.SchemaMismatch, errors.TransientDatabaseError):
            return False
        return True

    def _units(self, batch: list[Candidate]) -> list[list[Candidate]]:
        """The batch in order as units of work: each run of consecutive candidates of one listed class is cut into
        lists of at most ``chunk`` advanced by one call each (so that the advance threads share a run evenly and
        finish it together); any other candidate is a unit of its own."""
        units: list[list[Candidate]] = []
        run: list[Candidate] = []

        def flush() -> None:
            if run:
                size = max(1, self.chunk)
                units.extend(run[i:i + size] for i in range(0, len(run), size))
                run.clear()

        for cand in batch:
            if run and run[0].klass != cand.klass:
                flush()
            if candidates.BY_NAME[cand.klass].listed:
                run.append(cand)
            else:
                units.append([cand])
        flush()
        return units

    def _advance_unit(self, unit: list[Candidate], overtaken: threading.Event) -> bool:
        """One unit of a batch, unless the batch was overtaken: a list of candidates that another node had
        entirely taken already (GONE or BUSY) means that node is ahead on this stretch of the batch, and going
        on would only repeat its work candidate by candidate; the next scan shows what is still due. Answers
        whether anything may be due now after the unit (a unit left undone counts as yes)."""
        if overtaken.is_set() or self._stop.is_set() or self._unreachable.is_set():
            return True
        if len(unit) > 1:
            outcomes, again = self._advance_list(unit)
            if outcomes and all(o in TAKEN for o in outcomes):
                self.stats["overtaken"] += 1
                overtaken.set()
            return again
        return self._advance(unit[0])[1]

    def run_once(self) -> ScanResult:
        """Scan once and advance the batch (in parallel on separate connections, R-14). The result's ``again``
        says whether anything may be due now: the scan was full, it looked ahead and left the blocks it did not
        take, a candidate may still be due (BUSY, FAILED, not advanced), or an advance made a candidate due at its
        own time (made_due). When it is false, whatever became due meanwhile by other hands (a send, a worker's
        outcome) or by the passing of time is found by the probe that idling starts with (R-14), so the loop does
        not scan just to find nothing."""
        result = self.scan(self.batch * self._blocks)
        if not result.candidates:
            result.again = False
            return result
        batch = result.candidates
        left = False  # due candidates of this scan left to other nodes
        if len(batch) > self.batch:
            # Overtaken last time: another node works on the earliest batch. This scan looked further ahead, and
            # this node takes one of the later batch-long blocks at random, so that the nodes part ways instead of
            # deciding the same candidates twice (the second finds them GONE or BUSY).
            first = self.batch * random.randrange(1, -(-len(batch) // self.batch))
            batch = batch[first:first + self.batch]
            left = True
        # Every node sees the same earliest candidates; starting each batch at a random point spreads
        # concurrent nodes over different rows instead of having them collide row by row (all are due).
        start = random.randrange(len(batch)) if self.spread else 0
        overtaken = threading.Event()
        self._unreachable.clear()
        self._refused.clear()
        failed_before = self._undecided()
        futures = [self._pool.submit(self._advance_unit, unit, overtaken)
                   for unit in self._units(batch[start:] + batch[:start])]
        again = [f.result() for f in futures]
        result.stalled = self._undecided() - failed_before >= len(batch) or self._refused.is_set()
        # A node that nothing overtook (as a node alone) keeps scanning one batch, earliest first.
        self._blocks = AHEAD_BLOCKS if overtaken.is_set() and self.spread else 1
        # The blocks left to other nodes are still due as far as this node knows: should those nodes stop (or
        # never have been there), only another scan finds them.
        result.again = result.full or left or overtaken.is_set() or any(again)
        return result

    def _undecided(self) -> int:
        """Candidates that failed so far, of every class, or that waited for an earlier fact of their instance: a
        batch of nothing else decided nothing, and scanning again at once would bring the same batch back (an
        earlier fact whose own advance keeps failing holds the later ones of its instance)."""
        return sum(n for key, n in self.stats.items() if key.endswith((":FAILED", ":EARLIER_FIRST")))

    def idle_seconds(self, result: ScanResult) -> float:
        probe = self.idle_probe_ms / 1000.0
        if result.next_at is None:
            return probe
        gap = (result.next_at - result.now).total_seconds()
        return max(0.0, min(gap, probe))

    def probe(self) -> tuple[datetime.datetime, datetime.datetime | None]:
        """Engine time and the earliest check time of any class (weave_scan_probe): one cheap read."""
        row = self._look("weave_scan_probe")[0][0]
        return row["now_at"], row["next_at"]

    def wait_for_work(self, until: Callable[[], bool] | None = None) -> None:
        """Idle (R-14): probe until something is due, sleeping until the earliest check time the probe sees but
        never longer than the probe interval, which grows from idle_probe_ms to idle_max_ms while nothing is due."""
        interval = self.idle_probe_ms / 1000.0
        while not self._stop.is_set() and not (until and until()):
            now, next_at = self.probe()
            if next_at is not None and next_at <= now:
                return
            gap = (next_at - now).total_seconds() if next_at is not None else interval
            self._stop.wait(max(0.0, min(gap, interval)))
            interval = min(interval * 2, max(self.idle_probe_ms, self.idle_max_ms) / 1000.0)

    def stop(self, *_: object) -> None:
        self._stop.set()

    def run(self, until: Callable[[], bool] | None = None) -> None:
        log.info("orchestrator started", extra={"fields": {"node": self.node_id, "batch": self.batch,
                                                           "concurrency": self.concurrency}})
        try:
            self._loop(until)
        finally:
            # Also when an error no retry takes up ends the loop: the advances not started yet are dropped (their
            # candidates stay due for the next node), not run one after another before the process may exit.
            self._pool.shutdown(wait=True, cancel_futures=True)
        log.info("orchestrator stopped", extra={"fields": {"node": self.node_id, **dict(self.stats)}})

    def _loop(self, until: Callable[[], bool] | None) -> None:
        stalled = STALLED_FIRST_S
        failing: tuple[float, int] | None = None  # since when (monotonic) and how often the scan or probe failed

        def failed(what: str, exc: BaseException) -> None:
            """The scan or the probe met the database away (waits half a second) or at another level (holds)."""
            nonlocal failing
            self._scans.discard()
            if isinstance(exc, errors.SchemaMismatch):
                hold_until_level(self.check_level, self._stop, "orchestrator", exc)
                return
            log.warning(f"{what} failed; retrying", extra={"fields": {"node": self.node_id, "error": str(exc)}})
            failing = (failing[0] if failing else time.monotonic(), (failing[1] if failing else 0) + 1)
            self._stop.wait(0.5)

        while not self._stop.is_set() and not (until and until()):
            try:
                result = self.run_once()
            except (errors.TransientDatabaseError, errors.SchemaMismatch) as exc:
                failed("scan", exc)
                continue
            if failing is not None:  # the end of an outage is said as its start was, with how long it lasted
                log.info("the database answers again", extra={"fields": {
                    "node": self.node_id, "failed": failing[1], "seconds": round(time.monotonic() - failing[0], 1)}})
                failing = None
            if result.stalled:
                self._stop.wait(stalled)
                stalled = min(stalled * 2, STALLED_LONGEST_S)
                continue
            stalled = STALLED_FIRST_S
            if result.again:
                continue
            if not result.candidates:
                self._stop.wait(self.idle_seconds(result))
            try:
                self.wait_for_work(until)
            except (errors.TransientDatabaseError, errors.SchemaMismatch) as exc:
                failed("probe", exc)

    def drain(self, max_rounds: int = 10_000) -> Counter:
        """Advance until nothing is due (for tests and tools): returns the outcome counts. Like the loop, it scans
        again only while something may be due (``ScanResult.again``); nothing else moves meanwhile when the
        caller runs nothing beside it."""
        for _ in range(max_rounds):
            if not self.run_once().again:
                break
        return self.stats

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        self._connections.close_all()
        self._scans.close_all()


def run_orchestrator(dsn: db.Dsn, *, batch: int = 100, concurrency: int = 4, idle_probe_ms: int = 20,
                     idle_max_ms: int = 200, node_id: str | None = None, json_errors: bool = False) -> int:
    """``weave orchestrator``; ``json_errors``: a refusal to start as JSON on stderr (``--json``)."""
    configure_logging()
    try:
        orch = Orchestrator(dsn, batch=batch, concurrency=concurrency, idle_probe_ms=idle_probe_ms,
                            idle_max_ms=idle_max_ms)
    except ValueError as exc:
        return refuse("orchestrator", "USAGE_INVALID", str(exc), 2, json_errors, text=str(exc))
    if node_id:
        orch.node_id = node_id
    return serve(orch, "orchestrator", json_errors)
