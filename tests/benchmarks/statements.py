"""Statement counts: the database's own per-session ``Com_*`` counters, which count every statement a
session runs, the ones inside stored routines included (each nested ``CALL`` too). Unlike timings they
are deterministic, so the suite may assert them (tests/sql/test_statement_counts.py) and the benchmark
prints them (``python -m tests.benchmarks.bench_statements``).

Two measures:
- per decision: one routine call on one connection, the ``Com_*`` delta of that session;
- per lifecycle, all in: every connection the API, the orchestrator and the worker open in this process
  is counted (scans, claims and probes included), from the HTTP request that starts an instance to its
  SUCCEEDED. The processes run in-process here (the Falcon app through its WSGI test client, the
  orchestrator and the worker with one connection each), so the count does not depend on timing or on
  other users of the server.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import threading
import time
from collections.abc import Iterator
from typing import Any

import pymysql
from falcon import testing

from api.app import create_app
from api.http import Connections
from orchestrator.loop import Orchestrator
from orchestrator.worker import Worker
from procedures import db as dbmod
from procedures import routines
from tests.support.db import Db
from tests.support.signals import signal_flow
from tests.support.world import World

COM = ("SHOW SESSION STATUS WHERE Variable_name LIKE 'Com\\_%%' "
       "OR Variable_name IN ('Rows_read', 'Handler_read_next', 'Created_tmp_tables', 'Created_tmp_disk_tables')")


def statement_total(status: dict[str, int]) -> int:
    """The statements in a set of ``Com_*`` counters (session or global): every one but the ``SHOW`` that reads them."""
    return sum(v for k, v in status.items() if k.startswith("Com_") and k != "Com_show_status")


def session_counts(conn: pymysql.Connection) -> dict[str, int]:
    """Statements run so far by this session (the SHOW that reads them excluded), and rows read."""
    with conn.cursor() as cur:
        cur.execute(COM)
        rows = {r["Variable_name"]: int(r["Value"]) for r in cur.fetchall()}
    statements = statement_total(rows)
    # Procedure calls among the statements: the client's own CALL and every nested one. A nested CALL costs
    # about 7 us of database CPU here, a primary-key read about 19 us (each 20,000 times in a loop).
    # Internal temporary tables on disk (Aria): each one is a file created and removed by the server, which costs a
    # decision more than its statements do; no decision should need one, whatever the size of its tables.
    return {"statements": statements, "calls": rows.get("Com_call_procedure", 0), "rows_read": rows.get("Rows_read", 0),
            "tmp_tables": rows.get("Created_tmp_tables", 0), "disk_tables": rows.get("Created_tmp_disk_tables", 0)}


def statements(conn: pymysql.Connection) -> int:
    return session_counts(conn)["statements"]


@contextlib.contextmanager
def counted(conn: pymysql.Connection) -> Iterator[dict[str, int]]:
    """``with counted(conn) as n: ...`` leaves the session's deltas in ``n`` (statements, calls, rows_read and
    disk_tables)."""
    before = session_counts(conn)
    delta: dict[str, int] = {}
    yield delta
    after = session_counts(conn)
    delta.update({k: after[k] - before[k] for k in after})


class Census:
    """Counts every connection opened through ``procedures.db.connect`` while installed: a closed one
    is read just before it closes, an open one when asked (callers ask only while the owners are idle).

    A connection's own setup (the character set and the init command its handshake runs) is left out: a running
    node opens each of its connections once, where a harness that runs the worker once per round (its attempt
    threads, each with its connection, end with the run) would count that setup again in every round."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: list[pymysql.Connection] = []
        self._setup: dict[pymysql.Connection, int] = {}  # each connection's statements when its setup ended
        self._closed = 0
        self._original = pymysql.connect

    def __enter__(self) -> Census:
        census = self

        class CountedConnection(pymysql.connections.Connection):
            def connect(self, sock: Any = None) -> None:
                super().connect(sock)
                census._set_up(self)

            def close(self) -> None:  # noqa: D401 - read the counters before the session goes
                with contextlib.suppress(Exception):
                    census._retire(self)
                super().close()

        def connect(*args: Any, **kwargs: Any) -> pymysql.Connection:
            conn = CountedConnection(*args, **kwargs)
            with census._lock:
                census._open.append(conn)
            return conn

        pymysql.connect = connect
        return self

    def __exit__(self, *exc: object) -> None:
        pymysql.connect = self._original

    def _set_up(self, conn: pymysql.Connection) -> None:
        count = statements(conn)
        with self._lock:
            self._setup[conn] = count

    def _since_setup(self, conn: pymysql.Connection) -> int:
        return statements(conn) - self._setup.get(conn, 0) if conn.open else 0

    def _retire(self, conn: pymysql.Connection) -> None:
        # Read and moved under one lock: a count taken while a connection closes on another thread (a worker's,
        # as its run ends) would otherwise find it in neither place, and the lifecycle's figure would be short by
        # that connection's statements, or long by them when the count before it was the short one.
        with self._lock:
            if conn not in self._open:
                return
            count = self._since_setup(conn)
            self._open.remove(conn)
            self._setup.pop(conn, None)
            self._closed += count

    def ignore(self, conn: pymysql.Connection) -> None:
        """Leave a connection out of the count (the harness's own: test clock and status reads)."""
        with self._lock:
            if conn in self._open:
                self._open.remove(conn)
            self._setup.pop(conn, None)

    def total(self) -> int:
        with self._lock:
            return self._closed + sum(self._since_setup(c) for c in self._open)


# --- the flows -----------------------------------------------------------------------------------------------------

TIMER_FLOW = {"name": "count-timer", "steps": [{"key": "wait", "type": "TIMER", "delay_ms": 1000}]}
SIGNAL_FLOW = signal_flow("count-signal")
POLL_ROUNDS = 3
POLL_FLOW = {"name": "count-poll", "steps": [{
    "key": "check", "type": "POLL", "queue": "payments", "handler": "example.poll", "handler_version": "1",
    "input": {"n": "$.input.n", "done_at": POLL_ROUNDS}, "interval_ms": 1000, "max_rounds": POLL_ROUNDS,
    "timeout_ms": 3_600_000, "task_timeout_ms": 600_000,
    "result": {"pending": ["PENDING"], "success": ["DONE"]}}]}


class Stage:
    """One namespace with the three flows published, the API in-process, one orchestrator and one worker."""

    def __init__(self, dsn: dbmod.Dsn, census: Census):
        self.census = census
        self.db = Db(dsn)
        census.ignore(self.db.conn)  # the harness's clock and reads are no part of a lifecycle
        self.world = World.create(self.db, quota=1_000_000, capacity=1_000_000)
        for flow in (TIMER_FLOW, SIGNAL_FLOW, POLL_FLOW):
            self.world.publish(flow)
        self.token = self.world.token
        self.connections = Connections(dsn)
        self.client = testing.TestClient(create_app(self.connections))
        self.orch = Orchestrator(dsn, concurrency=1, spread=False)
        import orchestrator.example_handlers  # noqa: F401 - registers example.poll
        self.worker = Worker(dsn, queues=["payments"], concurrency=1, idle_probe_ms=1)
        self._keys = 0
        # Keys of this stage alone: a database other tests used before keeps their instances, under keys of theirs.
        self._run = secrets.token_hex(4)

    def close(self) -> None:
        self.orch.close()
        self.worker.close()
        self.connections.discard()
        self.db.close()

    def _key(self, what: str) -> str:
        self._keys += 1
        return f"{what}-{self._run}-{self._keys}"

    def _post(self, path: str, body: dict) -> dict:
        headers = {"Authorization": f"Bearer {self.token}", "Idempotency-Key": self._key("k")}
        result = self.client.simulate_post(f"/v1/namespaces/{self.world.namespace}{path}", json=body, headers=headers)
        assert result.status_code in (200, 201), (result.status_code, result.text)
        return result.json

    def start(self, definition: str, input: dict) -> str:
        return self._post("/workflows", {"definition": definition, "app": self.world.app, "input": input,
                                         "deadline_ms": 86_400_000})["workflow_id"]

    def send(self, workflow_id: str, correlation: str) -> dict:
        return self._post(f"/workflows/{workflow_id}/signals", {
            "name": SIGNAL_FLOW["steps"][0]["signal"]["name"],
            "payload_version": SIGNAL_FLOW["steps"][0]["signal"]["payload_version"],
            "target_step_key": "approval", "target_activation_sequence": 1, "correlation_key": correlation,
            "payload": {"approved": True}, "reason": "approved by the desk"})

    def status(self, workflow_id: str) -> str:
        return self.db.scalar("SELECT status FROM weave_instances WHERE id = %s", int(workflow_id.removeprefix("wf_")))

    def drain(self) -> None:
        self.orch.drain()

    def work(self) -> None:
        self.worker.run(exit_when_idle=True)

    # One lifecycle each, start to SUCCEEDED; the engine's time moves only by the test clock.
    # A start of a definition without tasks activates its first step itself: nothing is due for the loop after
    # it (no ROOT checkpoint), so no scan follows it; a start of one with tasks leaves a ROOT checkpoint due now.
    def timer_lifecycle(self) -> str:
        wf = self.start("count-timer", {})
        self.db.advance(1001)
        self.drain()
        return wf

    def signal_lifecycle(self) -> str:
        correlation = self._key("o")
        wf = self.start("count-signal", {"order_id": correlation})
        self.send(wf, correlation)
        self.drain()
        return wf

    def poll_lifecycle(self) -> str:
        # The worker's report consumes each answer itself (Settle at Report), so the orchestrator has nothing to do
        # until the next round falls due: as the running loop, which scans only when its probe finds work due, it
        # is called on then.
        wf = self.start("count-poll", {"n": 1})  # its first round's task is queued by the start
        for _ in range(POLL_ROUNDS):
            self.work()
            self.db.advance(1001)
            self.drain()
        return wf

    def lifecycle(self, kind: str, warm: bool = True) -> int:
        """All-in statements of one lifecycle of ``kind`` (timer, signal, poll), from a warm start (``warm``: run
        one lifecycle first so that every connection is open and every routine cached)."""
        run = getattr(self, f"{kind}_lifecycle")
        if warm:
            assert self.status(run()) == "SUCCEEDED"
        before = self.census.total()
        wf = run()
        spent = self.census.total() - before
        assert self.status(wf) == "SUCCEEDED", f"the {kind} flow did not finish"
        return spent


class Calls:
    """Every routine call made through ``procedures.db`` while installed, with its own statements (the delta of
    its session around it): where the statements of a lifecycle go."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int, int]] = []  # (routine, statements, procedure calls among them)
        self.conns: list[pymysql.Connection] = []
        self._lock = threading.Lock()
        self._original = dbmod._call_once

    def __enter__(self) -> Calls:
        original = self._original

        def call_once(conn: pymysql.Connection, routine: str, args: tuple) -> list[list[dict]]:
            before = session_counts(conn)
            try:
                return original(conn, routine, args)
            finally:
                after = session_counts(conn)
                with self._lock:
                    self.calls.append((routine, after["statements"] - before["statements"],
                                       after["calls"] - before["calls"]))
                    self.conns.append(conn)

        dbmod._call_once = call_once
        return self

    def __exit__(self, *exc: object) -> None:
        dbmod._call_once = self._original


def lifecycle_calls(stage: Stage, kind: str) -> list[tuple[str, int, int]]:
    """The routine calls one lifecycle of ``kind`` makes (warm, as ``Stage.lifecycle`` counts it), in order, each
    with its statements and the procedure calls among them (its own CALL included); the harness's own calls (test
    clock, status reads) are left out."""
    harness = stage.db.conn
    stage.lifecycle(kind)  # warm-up
    with Calls() as calls:
        stage.lifecycle(kind, warm=False)
    return [c for c, conn in zip(calls.calls, calls.conns, strict=True) if conn is not harness]


# --- per decision ------------------------------------------------------------------------------------------------

def _checkpoint(db: Db, wf: str, step_key: str) -> int:
    return db.scalar("SELECT id FROM weave_pending_advances WHERE instance_id = %s AND step_key = %s",
                     int(wf.removeprefix("wf_")), step_key)


def decisions(stage: Stage) -> dict[str, dict[str, int]]:
    """Statements (and rows read) of each decision, one routine call each, on one connection."""
    db, world, out = stage.db, stage.world, {}
    conn = db.conn

    def measure(name: str, routine: str, *args: Any) -> list[list[dict]]:
        with counted(conn) as n:
            sets = dbmod.call(conn, routine, *args)
        first = sets[0][0] if sets and sets[0] else {}
        out[name] = {"outcome": first.get("outcome"), **n}
        return sets

    # TIMER: the start, which activates the timer in its own transaction (a definition without tasks), then the
    # settlement with its successors (the instance SUCCEEDED).
    def start(name: str, definition: str, input: dict | None = None) -> str:
        with counted(conn) as n:
            wf = routines.instance_start(conn, world.token, world.namespace, definition=definition, app=world.app,
                                         input=input or {}, idempotency_key=stage._key("s"),
                                         deadline_ms=86_400_000)["workflow_id"]
        out[name] = {"outcome": world.instance(wf)["steps"][0]["status"], **n}
        return wf

    wf = start("start (TIMER, activated by the start)", "count-timer")
    db.advance(1001)
    measure("timer settle", "weave_checkpoint_advance", _checkpoint(db, wf, "wait"))

    # A settlement in the middle of a workflow: the timer settles and its successor, another timer, is activated in
    # the same transaction (the instance stays RUNNING).
    world.publish({"name": "count-chain", "steps": [
        {"key": "first", "type": "TIMER", "delay_ms": 1000},
        {"key": "then", "type": "TIMER", "delay_ms": 1000, "after": ["first"]}]})
    wf = world.start("count-chain", key=stage._key("c"))
    db.advance(1001)
    measure("timer settle, its successor activated", "weave_checkpoint_advance", _checkpoint(db, wf, "first"))
    assert world.instance(wf)["steps"][1]["status"] == "ACTIVE"

    # A fan-out: the settlement activates three successors in one walk (hour-long timers, which no later scan here
    # finds due).
    world.publish({"name": "count-fan", "steps": [{"key": "first", "type": "TIMER", "delay_ms": 1000}] + [
        {"key": f"then{i}", "type": "TIMER", "delay_ms": 3_600_000, "after": ["first"]} for i in range(3)]})
    wf = world.start("count-fan", key=stage._key("f"))
    db.advance(1001)
    measure("timer settle, three successors activated", "weave_checkpoint_advance", _checkpoint(db, wf, "first"))
    assert [s["status"] for s in world.instance(wf)["steps"]] == ["SUCCEEDED"] + ["ACTIVE"] * 3

    # The same settlement for ten timers due together, in one weave_candidates_advance call (per timer).
    wfs = [world.start("count-timer", key=stage._key("t")) for _ in range(10)]
    db.advance(1001)
    with counted(conn) as n:
        sets = dbmod.call(conn, "weave_candidates_advance", "CHECKPOINT",
                          json.dumps([_checkpoint(db, w, "wait") for w in wfs]))
    assert [r["outcome"] for r in sets[0]] == ["SETTLED"] * 10
    out["timer settle, 10 in one call (each)"] = {"outcome": "SETTLED", **{k: v / 10 for k, v in n.items()}}

    # SIGNAL: the start, which activates the step (no early signal: its checkpoint waits for the deadline), that
    # checkpoint looked at before the deadline, then the send, which settles the open wait in its own transaction;
    # then the candidate path of a signal accepted without settling (the in-transaction entry point): the SIGNAL
    # candidate's consumption and the twin checkpoint candidate.
    from procedures import signals

    def signal_args(wf: str, correlation: str) -> dict:
        return dict(idempotency_key=stage._key("i"), name="approval.decided", payload_version="1",
                    target_step_key="approval", target_activation_sequence=1, correlation_key=correlation,
                    payload='{"approved": true}', reason="approved", evidence_ref=None)

    def accepted_unsettled() -> tuple[str, int]:
        """A `count-signal` instance with a signal for its open wait accepted through the in-transaction entry point,
        in a transaction of its own: stored PENDING, not settled at acceptance. The instance and the signal's id."""
        correlation = stage._key("o")
        wf = world.start("count-signal", {"order_id": correlation}, key=stage._key("s"))
        outbox = db.connect()
        outbox.begin()
        receipt = signals.send_in_tx(outbox, world.token, world.namespace, wf, **signal_args(wf, correlation))
        outbox.commit()
        outbox.close()
        return wf, int(receipt["signal_id"].removeprefix("sig_"))

    def failing(signal_id: int) -> None:
        """The signal's decision failed a third time in a row the same way (R-18): its review is opened."""
        for _ in range(3):
            version = db.scalar("SELECT version FROM weave_signals WHERE id = %s", signal_id)
            dbmod.call(conn, "weave_candidate_fail", "SIGNAL", signal_id, version, "INVALID_STATE: counted")

    correlation = stage._key("o")
    wf = start("start (SIGNAL, activated by the start)", "count-signal", {"order_id": correlation})
    measure("signal checkpoint before its deadline", "weave_checkpoint_advance", _checkpoint(db, wf, "approval"))
    with counted(conn) as n:
        receipt = signals.send(conn, world.token, world.namespace, wf, **signal_args(wf, correlation))
    assert db.scalar("SELECT status FROM weave_signals WHERE id = %s",
                     int(receipt["signal_id"].removeprefix("sig_"))) == "CONSUMED"
    out["signal send (settles the open wait)"] = dict(n)

    # Acceptance alone, as B-1's acceptance row measures it: an early signal, its SIGNAL step still behind an
    # hour's TIMER, stored PENDING with its event, audit row and receipt, and nothing else to decide.
    world.publish(signal_flow("count-signal-later", before_timer_ms=3_600_000))
    correlation = stage._key("o")
    wf = world.start("count-signal-later", {"order_id": correlation}, key=stage._key("s"))
    with counted(conn) as n:
        receipt = signals.send(conn, world.token, world.namespace, wf, **signal_args(wf, correlation))
    stored = db.scalar("SELECT status FROM weave_signals WHERE id = %s", int(receipt["signal_id"].removeprefix("sig_")))
    waits = db.scalar("SELECT COUNT(*) FROM weave_waits WHERE instance_id = %s AND kind = 'SIGNAL'",
                      int(wf.removeprefix("wf_")))
    assert (stored, waits) == ("PENDING", 0)  # stored, with no wait to settle yet (its step is not activated)
    out["signal send (early: accepted, stored PENDING)"] = dict(n)

    wf, signal_id = accepted_unsettled()
    twin = _checkpoint(db, wf, "approval")
    measure("signal settle (candidate path)", "weave_signal_process", signal_id)
    measure("signal twin candidate", "weave_checkpoint_advance", twin)

    # POLL: the start, which activates the step with round 1 and its task, claim, the completion that consumes its
    # round's answer at once (Settle at Report), the next round; then the candidate path of an answer whose report
    # found the instance held.
    wf = start("start (POLL, round 1 created by the start)", "count-poll", {"n": 1})
    claim = measure("task claim", "pulse_task_claim", "w-count", "payments", None, 1, 30_000)[0][0]
    measure("attempt complete (consumes the round's answer)", "pulse_attempt_complete", claim["attempt_id"],
            "w-count", json.dumps({"status": "PENDING"}))
    assert db.scalar("SELECT state FROM pulse_inbox WHERE task_id = %s",
                     int(claim["task_id"].removeprefix("tsk_"))) == "CONSUMED"
    db.advance(1001)
    measure("poll round start", "weave_checkpoint_advance", _checkpoint(db, wf, "check"))
    # The read that answers GET /workflows/{id} (and a start's answer): the instance with its step, wait, poll
    # state and rounds.
    measure("instance get", "weave_instance_get", world.token, world.namespace, wf)
    claim = dbmod.call(conn, "pulse_task_claim", "w-count", "payments", None, 1, 30_000)[0][0]
    with world.held(wf):
        measure("attempt complete (instance held: answer left in the inbox)", "pulse_attempt_complete",
                claim["attempt_id"], "w-count", json.dumps({"status": "PENDING"}))
    inbox = db.scalar("SELECT id FROM pulse_inbox WHERE task_id = %s", int(claim["task_id"].removeprefix("tsk_")))
    measure("inbox consume (round pending)", "weave_inbox_consume", inbox)

    # Three task outcomes due together, in one weave_candidates_advance call (per outcome).
    for _ in range(3):
        world.start("count-poll", {"n": 1}, key=stage._key("p"))
    claims = dbmod.call(conn, "pulse_task_claim", "w-count", "payments", None, 3, 30_000)[0]
    for c in claims:
        with world.held(attempt_id=c["attempt_id"]):
            dbmod.call(conn, "pulse_attempt_complete", c["attempt_id"], "w-count", json.dumps({"status": "PENDING"}))
    events = [db.scalar("SELECT id FROM pulse_inbox WHERE task_id = %s", int(c["task_id"].removeprefix("tsk_")))
              for c in claims]
    with counted(conn) as n:
        sets = dbmod.call(conn, "weave_candidates_advance", "INBOX", json.dumps(events))
    assert [r["outcome"] for r in sets[0]] == ["PENDING"] * 3
    out["inbox consume, 3 in one call (each)"] = {"outcome": "PENDING", **{k: round(v / 3, 1) for k, v in n.items()}}

    # A retryable failure with attempts left: the task goes back to its queue (K-3), taking no lock of its
    # instance's. On a queue of its own, so that no worker of the lifecycles measured later claims it again.
    routines.queue_put(conn, world.admin, world.namespace, "retries", 10)
    world.publish({"name": "count-retry", "steps": [{**POLL_FLOW["steps"][0], "queue": "retries"}]})
    world.start("count-retry", {"n": 1}, key=stage._key("r"))
    claim = dbmod.call(conn, "pulse_task_claim", "w-count", "retries", None, 1, 30_000)[0][0]
    measure("attempt heartbeat", "pulse_attempt_heartbeat", claim["attempt_id"], "w-count", 30_000)
    measure("attempt fail (retry scheduled)", "pulse_attempt_fail", claim["attempt_id"], "w-count", "flaky", 1)
    assert out["attempt fail (retry scheduled)"]["outcome"] == "RETRY_SCHEDULED"

    # Operator actions (C-1, C-2, C-4), on an instance whose timer waits: each decides and audits in its own
    # transaction, then answers the instance in a snapshot of its own (result sets 2-6).
    wf = start("start (TIMER, for the operator actions)", "count-timer")
    del out["start (TIMER, for the operator actions)"]
    for name, routine, args in (("pause", "weave_instance_pause", ()), ("resume", "weave_instance_resume", ()),
                                ("deadline (extended)", "weave_instance_deadline", (None, 60_000)),
                                ("cancel", "weave_instance_cancel", ())):
        measure(name, routine, world.token, world.namespace, wf, *args, "operator", stage._key("a"))
        out[name]["outcome"] = world.instance(wf)["status"]

    measure("scan (nothing due)", "weave_scan", 100)
    measure("idle probe", "weave_scan_probe")
    routines.queue_put(conn, world.admin, world.namespace, "quiet", 10)
    measure("task claim (nothing queued)", "pulse_task_claim", "w-count", "quiet", None, 1, 30_000)

    # Retry (C-4), last, so that its instance changes nothing the measures above read: an early signal failing a third
    # time the same way opens the instance's own CANDIDATE_FAILING reason; the retry closes it and makes the signal
    # due again. The instance is cancelled after, leaving nothing of it due.
    correlation = stage._key("o")
    wf = world.start("count-signal-later", {"order_id": correlation}, key=stage._key("s"))
    receipt = signals.send(conn, world.token, world.namespace, wf, **signal_args(wf, correlation))
    failing(int(receipt["signal_id"].removeprefix("sig_")))
    measure("retry (the instance's own failing decision)", "weave_instance_retry", world.token, world.namespace, wf,
            "operator", stage._key("a"))
    out["retry (the instance's own failing decision)"]["outcome"] = world.instance(wf)["status"]
    routines.instance_cancel(conn, world.token, world.namespace, wf, "counted", stage._key("a"))

    # A step's retry: a signal for an open wait, accepted without settling, fails a third time and sends its step to
    # review; the retry sends the step on in its activation, its checkpoint due at the signal's acceptance. The
    # checkpoint then settles the step with that signal.
    wf, signal_id = accepted_unsettled()
    failing(signal_id)
    measure("retry (a step's failing signal: the step goes on)", "weave_instance_retry", world.token, world.namespace,
            wf, "operator", stage._key("a"))
    out["retry (a step's failing signal: the step goes on)"]["outcome"] = world.instance(wf)["status"]
    stage.drain()  # its checkpoint, due: the signal wins and the instance ends, leaving nothing of it due
    assert world.instance(wf)["status"] == "SUCCEEDED"
    return out


def _idle_run(dsn: dbmod.Dsn, seconds: float) -> int:
    with Census() as census:
        orch = Orchestrator(dsn)
        worker = Worker(dsn, queues=["payments"], concurrency=1)
        threads = [threading.Thread(target=orch.run, daemon=True), threading.Thread(target=worker.run, daemon=True)]
        for t in threads:
            t.start()
        time.sleep(seconds)
        orch.stop()
        worker.stop()
        for t in threads:
            t.join(timeout=30)
        orch.close()
        worker.close()
        return census.total()  # every loop has stopped: its connections are idle or closed


def idle_rate(dsn: dbmod.Dsn, short: float = 1.0, long: float = 4.0) -> float:
    """Statements per second of one orchestrator and one worker (default settings) with nothing to do: the
    difference of a long and a short run, so start-up and shut-down cancel out."""
    return (_idle_run(dsn, long) - _idle_run(dsn, short)) / (long - short)
