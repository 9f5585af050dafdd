"""A mixed load driven over HTTP against real `weave` processes, for runs on a Galera cluster (and on one
server): timers, polls with budgets, signals with competing senders and replays, and final-signal polls.

Every request answered 2xx is remembered with what it acknowledged, so that a run can prove afterwards that
each of them is persisted. Nothing here sleeps for a due time: the test clock moves the engine past timers
and poll intervals, and only once nothing is running, so no lease can expire under a busy worker.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from dataclasses import dataclass, field

from api import client as sdk
from procedures import db as dbmod
from procedures.connections import retry_transient
from tests.support.db import Db
from tests.support.threads import run_threads
from tests.support.waiting import wait_for

RESULT = {"pending": ["PENDING"], "success": ["DONE", "PAID"]}
MIXED = {"name": "mixed", "steps": [
    {"key": "wait", "type": "TIMER", "delay_ms": 30_000},
    {"key": "check", "type": "POLL", "after": ["wait"], "queue": "payments", "handler": "example.poll",
     "handler_version": "1", "input": {"done_at": 2}, "interval_ms": 60_000, "max_rounds": 3,
     "timeout_ms": 36_000_000, "task_timeout_ms": 600_000, "result": RESULT},
    {"key": "approval", "type": "SIGNAL", "after": ["check"],
     "signal": {"name": "ok", "payload_version": "1", "payload_type": "any"},
     "correlation": "$.input.id", "timeout_ms": 36_000_000}]}
FINAL = {"name": "final", "steps": [
    {"key": "check", "type": "POLL", "queue": "payments", "handler": "example.poll", "handler_version": "1",
     "input": {"done_at": 99}, "interval_ms": 60_000, "max_rounds": 3, "timeout_ms": 36_000_000,
     "task_timeout_ms": 600_000, "result": RESULT,
     "final_signal": {"name": "payment.final", "payload_version": "1", "correlation": "$.input.id"}}]}
MAX_ROUNDS = 3


@dataclass
class Acks:
    """Every 2xx the clients got, and every request that never got one."""

    started: dict[str, str] = field(default_factory=dict)      # idempotency key -> workflow id
    signals: dict[str, tuple[str, str]] = field(default_factory=dict)  # key -> (workflow id, signal id)
    failed: list[str] = field(default_factory=list)
    by_status: Counter = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def total(self) -> int:
        return sum(n for s, n in self.by_status.items() if 200 <= s < 300)


def _request(client: sdk.WeaveClient, acks: Acks, what: str, method: str, path: str, body: dict,
             key: str) -> dict | None:
    try:
        status, _, answer = client.request(method, path, body, idempotency_key=key)
    except sdk.WeaveApiError as exc:
        with acks.lock:
            acks.by_status[exc.status] += 1
            acks.failed.append(f"{what} {key}: {exc.status} {exc.body.get('code')}")
        return None
    with acks.lock:
        acks.by_status[status] += 1
    return answer


def start_all(clients: list[sdk.WeaveClient], acks: Acks, mixed: int, final: int, threads: int = 4) -> None:
    jobs = [("mixed", f"m-{i}") for i in range(mixed)] + [("final", f"f-{i}") for i in range(final)]

    def work(part: int) -> None:
        for n, (definition, ident) in enumerate(jobs[part::threads]):
            client = clients[(part + n) % len(clients)]
            body = {"definition": definition, "app": "billing", "input": {"id": ident}, "deadline_ms": 360_000_000}
            answer = _request(client, acks, "start", "POST", "workflows", body, f"start-{ident}")
            if answer is not None:
                with acks.lock:
                    acks.started[f"start-{ident}"] = answer["workflow_id"]

    run_threads(work, threads)


def send_signals(clients: list[sdk.WeaveClient], acks: Acks, on_progress=None, threads: int = 4) -> None:
    """Two competing senders per mixed instance (own keys), each followed by a replay of the first sender's
    key; one final signal per final-signal poll, sent twice with one key."""
    jobs: list[tuple[str, str, str, dict]] = []
    for key, wf in sorted(acks.started.items()):
        ident = key.removeprefix("start-")
        if ident.startswith("m-"):
            for sender in ("a", "b"):
                body = {"name": "ok", "payload_version": "1", "target_step_key": "approval",
                        "target_activation_sequence": 1, "correlation_key": ident, "payload": {"by": sender},
                        "reason": f"sender {sender}"}
                jobs.append((wf, f"sig-{ident}-{sender}", "signal", body))
                jobs.append((wf, f"sig-{ident}-a", "replay", {**body, "payload": {"by": "a"}, "reason": "sender a"}))
        else:
            body = {"name": "payment.final", "payload_version": "1", "target_step_key": "check",
                    "target_activation_sequence": 1, "correlation_key": ident,
                    "payload": {"status": "PAID", "output": {"by": "final"}}, "reason": "settled elsewhere"}
            jobs += [(wf, f"fin-{ident}", "final", body), (wf, f"fin-{ident}", "replay", body)]

    def work(part: int) -> None:
        for n, (wf, key, what, body) in enumerate(jobs[part::threads]):
            client = clients[(part + n) % len(clients)]
            answer = _request(client, acks, what, "POST", f"workflows/{wf}/signals", body, key)
            if answer is not None:
                with acks.lock:
                    previous = acks.signals.setdefault(key, (wf, answer["signal_id"]))
                    assert previous == (wf, answer["signal_id"]), f"a replay of {key} answered another signal"
            if on_progress:
                on_progress()

    run_threads(work, threads)


class Driver:
    """Test-side SQL on the cluster: the test clock and reads, reconnecting (to another node) when the one it
    used goes away. The clock call is not idempotent; a retried advance only moves time further, which this
    load tolerates (every wait and lease is hours long)."""

    def __init__(self, dsn: dbmod.Dsn):
        self.dsn = dsn
        self.db = Db(dsn)

    def _retry(self, fn):
        """``fn(db)`` through a failover: the project's one retry wrapper, reconnecting after each transient
        failure (about a minute of jittered backoff, longer than a node's death and rejoin take)."""
        return retry_transient(lambda: fn(self.db), attempts=80, on_retry=self._reconnect)

    def _reconnect(self) -> None:
        try:
            self.db.close()
        except Exception:  # already broken
            pass
        self.db = Db(self.dsn)  # a transient failure here is retried by the wrapper too

    def scalar(self, sql: str, *args):
        return self._retry(lambda d: d.scalar(sql, *args))

    def rows(self, sql: str, *args):
        return self._retry(lambda d: d.rows(sql, *args))

    def advance(self, ms: int):
        return self._retry(lambda d: d.advance(ms))

    def quiet(self) -> bool:
        """Nothing due now and nothing queued or running: the clock may move without outrunning a worker."""
        busy = self.scalar("SELECT COUNT(*) FROM pulse_tasks WHERE status IN ('QUEUED', 'RUNNING')")
        if busy:
            return False
        sets = self._retry(lambda d: d.call("weave_scan", 10))
        return not any(rows for rows in sets[:-1])

    def holding(self) -> str:
        """What keeps the engine from quiet, for a failure message: the engine's time, the tasks queued or running
        (with their attempts' workers and leases), and the candidates a scan finds due."""
        now = self._retry(lambda d: d.now())
        tasks = self.rows(
            "SELECT t.id, t.status, t.queue_id, t.instance_id, t.step_key, t.round_no, t.available_at, t.deadline_at, "
            "t.attempts_used, a.id AS attempt_id, a.status AS attempt, a.worker_id, a.lease_expires_at "
            "FROM pulse_tasks t LEFT JOIN pulse_attempts a ON a.task_id = t.id AND a.attempt_no = t.attempts_used "
            "WHERE t.status IN ('QUEUED', 'RUNNING') ORDER BY t.id LIMIT 10")
        due = [rows[:5] for rows in self._retry(lambda d: d.call("weave_scan", 10))[:-1] if rows]
        return f"engine time {now}; tasks queued or running (first 10): {tasks}; due candidates: {due}"

    def finished(self, total: int) -> bool:
        return self.scalar("SELECT COUNT(*) FROM weave_instances WHERE status <> 'RUNNING'") >= total

    def drive_to_end(self, total: int, step_ms: int = 60_000, max_steps: int = 12, timeout: float = 120) -> int:
        """Move the clock one poll interval at a time, each time once the engine is quiet, until every instance
        left RUNNING. Returns the steps taken."""
        for steps in range(max_steps + 1):
            if self.finished(total):
                return steps
            assert wait_for(self.quiet, timeout=timeout, interval=0.1), \
                f"the engine never became quiet within {timeout:.0f}s: {self.holding()}"
            if self.finished(total):
                return steps
            self.advance(step_ms)
        raise AssertionError(f"instances still RUNNING after {max_steps} clock steps: "
                             f"{self.rows('SELECT status, COUNT(*) n FROM weave_instances GROUP BY status')}")

    def close(self) -> None:
        self.db.close()


def check_acks_persisted(db: Db, acks: Acks) -> dict:
    """Every acknowledged start and signal is in the database, exactly as acknowledged."""
    missing = []
    for key, wf in acks.started.items():
        row = db.row("SELECT id FROM weave_instances WHERE id = %s", int(wf.removeprefix("wf_")))
        if row is None:
            missing.append(("start", key, wf))
    for key, (wf, sig) in acks.signals.items():
        row = db.row("SELECT instance_id, idempotency_key FROM weave_signals WHERE id = %s",
                     int(sig.removeprefix("sig_")))
        if row is None or row["instance_id"] != int(wf.removeprefix("wf_")) or row["idempotency_key"] != key:
            missing.append(("signal", key, sig))
    return {"acknowledged": len(acks.started) + len(acks.signals), "missing": missing}


def check_outcomes(db: Db, mixed: int, final: int) -> dict:
    """The load's promises, counted: 0 lost timers, 0 double winners, 0 rounds beyond budget."""
    timers = db.scalar("SELECT COUNT(*) FROM weave_waits WHERE kind = 'TIMER' AND status = 'SATISFIED'")
    settled_events = db.scalar("SELECT COUNT(*) FROM weave_events WHERE type = 'TIMER_SETTLED'")
    double = db.rows("SELECT instance_id FROM weave_signals WHERE status = 'CONSUMED' "
                     "GROUP BY instance_id, target_step_key, target_activation_seq HAVING COUNT(*) > 1")
    beyond = db.rows("SELECT activation_id FROM weave_poll_states WHERE rounds_used > %s", MAX_ROUNDS)
    tasks_beyond = db.rows("SELECT activation_id FROM pulse_tasks GROUP BY activation_id HAVING COUNT(*) > %s",
                           MAX_ROUNDS)
    statuses = dict(Counter(r["status"] for r in db.rows("SELECT status FROM weave_instances")))
    payloads = [json.loads(r["payload"])
                for r in db.rows("SELECT payload FROM weave_signals WHERE status = 'CONSUMED'")]
    winners = dict(Counter(p.get("by") or p["output"]["by"] for p in payloads))
    return {"instances": statuses, "timers_settled": timers, "timer_events": settled_events,
            "lost_timers": mixed - timers, "double_winners": len(double),
            "rounds_beyond_budget": len(beyond) + len(tasks_beyond), "winners_by_sender": winners,
            "expected_instances": mixed + final}
