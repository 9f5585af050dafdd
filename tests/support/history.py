"""A long settled history, bulk-inserted: what years of use leave in the tables, shaped like the rows the engine
writes (instances SUCCEEDED or CANCELLED with their steps, activations, waits, events, audit rows, signals, tasks,
attempts, inbox events, poll states and rounds, and the review reasons of some), for the read paths to prove that
they do not read it.

History is older than the live work of a scenario: ``reserve`` moves the id counters of every history table up
before the scenario creates anything, and ``add_history`` fills ids below them, in the order settled work has in a
real install (lower ids, older times). Each history instance ``n`` has one step of one of three kinds by ``n % 3``:
a TIMER (its wait), a SIGNAL (its wait and the signal that won it) or a POLL (a task, its attempt, its inbox event,
the poll state and a round). One in 25 was cancelled (and had a review reason, closed by the cancel); one in 1,000
of those has a reason that stays open, as a reason opened while the instance was CANCELLING does.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from tests.benchmarks.bench_scan import seq
from tests.support.db import Db

RESERVED = 10_000_000  # ids of live work start here; history instance n uses ids n
TABLES = ("weave_instances", "weave_steps", "weave_activations", "weave_waits", "weave_signals", "pulse_tasks",
          "pulse_attempts", "pulse_inbox", "weave_poll_rounds", "weave_audit", "weave_review_reasons",
          "weave_pending_advances")
KINDS = ("TIMER", "SIGNAL", "POLL")  # by n % 3
STEP_KEYS = ("wait", "approval", "check")


def reserve(db: Db) -> None:
    """Live work gets ids from RESERVED on, above any history added later."""
    for table in TABLES:
        db.execute(f"ALTER TABLE {table} AUTO_INCREMENT = {RESERVED}")


@dataclass(frozen=True)
class Owner:
    """Whose history: the namespace, app, credential and queue ids, and a definition (id, name) per step kind."""

    namespace_id: int
    app_id: int
    credential_id: int
    queue_id: int
    definitions: tuple[tuple[int, str], tuple[int, str], tuple[int, str]]

    @classmethod
    def of(cls, db: Db, namespace: str, app: str, queue: str, definitions: tuple[str, str, str]) -> Owner:
        ns = db.scalar("SELECT id FROM weave_namespaces WHERE name = %s", namespace)
        found = []
        for name in definitions:
            found.append((db.scalar("SELECT MAX(id) FROM weave_definitions WHERE namespace_id = %s AND name = %s",
                                    ns, name), name))
        return cls(ns, db.scalar("SELECT id FROM weave_apps WHERE namespace_id = %s AND name = %s", ns, app),
                   db.scalar("SELECT MIN(id) FROM weave_credentials WHERE namespace_id = %s", ns),
                   db.scalar("SELECT id FROM weave_queues WHERE namespace_id = %s AND name = %s", ns, queue),
                   (found[0], found[1], found[2]))


def _pick(column: str, values: tuple[str, ...]) -> str:
    return f"ELT({column} % 3 + 1, {', '.join(values)})"


def _run(db: Db, sql: str) -> None:
    with db.conn.cursor() as cur:
        cur.execute(sql)  # no arguments: the statement's % are SQL's own
        cur.fetchall()


def add_history(db: Db, owner: Owner, first: int, count: int) -> None:
    """History instances ``first`` .. ``first + count - 1`` (ids below RESERVED), all settled long ago."""
    assert first >= 1 and first + count <= RESERVED
    rows = f"(SELECT n + {first - 1} AS n FROM {seq(count)}) AS h"
    at = "TIMESTAMP('2025-01-01') + INTERVAL h.n SECOND"  # started at; settled a second later
    done = f"{at} + INTERVAL 1 SECOND"
    cancelled = "h.n % 25 = 0"
    status = f"IF({cancelled}, 'CANCELLED', 'SUCCEEDED')"
    ns, app, cred, queue = owner.namespace_id, owner.app_id, owner.credential_id, owner.queue_id
    def_id = _pick("h.n", tuple(str(d[0]) for d in owner.definitions))
    def_name = _pick("h.n", tuple(f"'{d[1]}'" for d in owner.definitions))
    kind = _pick("h.n", tuple(f"'{k}'" for k in KINDS))
    key = _pick("h.n", tuple(f"'{k}'" for k in STEP_KEYS))
    _run(db,
        "INSERT INTO weave_instances (id, namespace_id, app_id, definition_id, definition_name, definition_version, "
        "input, status, control, gate, deadline_at, credential_id, business_key, idempotency_key, request_digest, "
        "version, event_seq, signal_count, open_steps, created_at, updated_at, finished_at) "
        f"SELECT h.n, {ns}, {app}, {def_id}, {def_name}, 1, CONCAT('{{\"order_id\":\"h-', h.n, '\"}}'), {status}, "
        f"'ACTIVE', 'OPEN', {at} + INTERVAL 1 DAY, {cred}, CONCAT('order-', h.n), CONCAT('history-', h.n), "
        f"REPEAT('0', 64), 3, 4, h.n % 3 = 1, 0, {at}, {done}, {done} FROM {rows}")
    _run(db,
        "INSERT INTO weave_steps (id, namespace_id, instance_id, step_key, position, type, status, activation_seq, "
        "activation_id, output, updated_at) "
        f"SELECT h.n, {ns}, h.n, {key}, 0, {kind}, {status}, 1, h.n, '{{}}', {done} FROM {rows}")
    _run(db,
        "INSERT INTO weave_activations (id, namespace_id, instance_id, step_id, step_key, seq, frozen, "
        "correlation_key, started_at, deadline_at, ended_at) "
        f"SELECT h.n, {ns}, h.n, h.n, {key}, 1, '{{}}', IF(h.n % 3 = 1, CONCAT('h-', h.n), NULL), {at}, "
        f"{at} + INTERVAL 1 DAY, {done} FROM {rows}")
    _run(db,
        "INSERT INTO weave_waits (id, namespace_id, instance_id, activation_id, step_key, activation_seq, kind, "
        "status, started_at, due_at, planned_due_at, deadline_at, signal_name, payload_version, payload_type, "
        "correlation_key, winner_signal_id, settled_at) "
        f"SELECT h.n, {ns}, h.n, h.n, {key}, 1, {kind}, IF({cancelled}, 'CANCELLED', 'SATISFIED'), {at}, "
        f"IF(h.n % 3 = 0, {done}, NULL), IF(h.n % 3 = 0, {done}, NULL), IF(h.n % 3 = 1, {at} + INTERVAL 1 HOUR, NULL), "
        "IF(h.n % 3 = 1, 'approval.decided', NULL), IF(h.n % 3 = 1, '1', NULL), IF(h.n % 3 = 1, 'object', NULL), "
        f"IF(h.n % 3 = 1, CONCAT('h-', h.n), NULL), IF(h.n % 3 = 1 AND NOT {cancelled}, h.n, NULL), {done} "
        f"FROM {rows} WHERE h.n % 3 <> 2")
    _run(db,
        "INSERT INTO weave_signals (id, namespace_id, instance_id, idempotency_key, request_digest, name, "
        "payload_version, target_step_key, target_activation_seq, correlation_key, payload, reason, credential_id, "
        "actor, status, disposition, accepted_at, expires_at, available_at, consumed_at, receipt) "
        f"SELECT h.n, {ns}, h.n, CONCAT('sig-', h.n), REPEAT('0', 64), 'approval.decided', '1', 'approval', 1, "
        f"CONCAT('h-', h.n), '{{\"approved\": true}}', 'approved by the desk', {cred}, 'ops', "
        f"IF({cancelled}, 'REJECTED', 'CONSUMED'), IF({cancelled}, 'INSTANCE_SETTLED', NULL), {done}, "
        f"{at} + INTERVAL 1 DAY, {done}, {done}, '{{}}' FROM {rows} WHERE h.n % 3 = 1")
    _run(db,
        "INSERT INTO pulse_tasks (id, namespace_id, app_id, queue_id, instance_id, step_key, activation_id, round_no, "
        "handler, handler_version, input, priority, max_attempts, initial_backoff_ms, backoff_coefficient, "
        "max_backoff_ms, timeout_ms, deadline_at, status, attempts_used, available_at, result, created_at, "
        "updated_at, finished_at) "
        f"SELECT h.n, {ns}, {app}, {queue}, h.n, 'check', h.n, 1, 'example.poll', '1', '{{}}', 0, 3, 1000, 2, 60000, "
        f"600000, {at} + INTERVAL 10 MINUTE, IF({cancelled}, 'CANCELLED', 'SUCCEEDED'), 1, {at}, "
        f"'{{\"status\":\"DONE\"}}', {at}, {done}, {done} FROM {rows} WHERE h.n % 3 = 2")
    _run(db,
        "INSERT INTO pulse_attempts (id, namespace_id, task_id, instance_id, attempt_no, worker_id, status, "
        f"lease_expires_at, started_at, ended_at) SELECT h.n, {ns}, h.n, h.n, 1, 'w', "
        f"IF({cancelled}, 'FAILED', 'SUCCEEDED'), {at} + INTERVAL 30 SECOND, {at}, {done} "
        f"FROM {rows} WHERE h.n % 3 = 2")
    _run(db,
        "INSERT INTO pulse_inbox (id, namespace_id, task_id, instance_id, kind, result, occurred_at, state, "
        f"consumed_at, available_at, version) SELECT h.n, {ns}, h.n, h.n, "
        f"IF({cancelled}, 'CANCELLED', 'SUCCEEDED'), '{{\"status\":\"DONE\"}}', {done}, "
        f"IF({cancelled}, 'STALE', 'CONSUMED'), {done}, {done}, 2 FROM {rows} WHERE h.n % 3 = 2")
    _run(db,
        "INSERT INTO weave_poll_states (activation_id, namespace_id, instance_id, step_key, state, rounds_used, "
        "max_rounds, interval_ms, poll_deadline, last_outcome, updated_at) "
        f"SELECT h.n, {ns}, h.n, 'check', IF({cancelled}, 'STOPPED', 'SETTLED'), 1, 3, 1000, {at} + INTERVAL 1 HOUR, "
        f"IF({cancelled}, NULL, 'DONE'), {done} FROM {rows} WHERE h.n % 3 = 2")
    _run(db,
        "INSERT INTO weave_poll_rounds (id, namespace_id, instance_id, activation_id, round_no, task_id, outcome, "
        f"result, result_at, decided_at, created_at) SELECT h.n, {ns}, h.n, h.n, 1, h.n, "
        f"IF({cancelled}, 'CANCELLED', 'DONE'), '{{\"status\":\"DONE\"}}', {done}, {done}, {at} FROM {rows} "
        "WHERE h.n % 3 = 2")
    _run(db,
        "INSERT INTO weave_events (instance_id, seq, namespace_id, type, step_key, activation_seq, occurred_at, data) "
        f"SELECT h.n, e.seq, {ns}, ELT(e.seq, 'INSTANCE_STARTED', 'STEP_ACTIVATED', 'STEP_SUCCEEDED', "
        f"IF({cancelled}, 'INSTANCE_CANCELLED', 'INSTANCE_SUCCEEDED')), IF(e.seq IN (2, 3), {key}, ''), "
        f"e.seq IN (2, 3), IF(e.seq = 1, {at}, {done}), '{{}}' FROM (SELECT 1 AS seq UNION ALL SELECT 2 UNION ALL "
        f"SELECT 3 UNION ALL SELECT 4) AS e CROSS JOIN {rows}")
    _run(db,
        "INSERT INTO weave_audit (namespace_id, instance_id, credential_id, actor, action, idempotency_key, "
        "request_digest, accepted_at, deadline_at, details, created_at) "
        f"SELECT {ns}, h.n, IF(a.k = 0, {cred}, 0), IF(a.k = 0, 'ops', 'weave.orchestrator'), "
        f"IF(a.k = 0, 'instance.start', IF({cancelled}, 'instance.cancel', 'step.settle')), "
        f"IF(a.k = 0, CONCAT('history-', h.n), NULL), NULL, IF(a.k = 0, {at}, {done}), {at} + INTERVAL 1 DAY, "
        f"'{{}}', IF(a.k = 0, {at}, {done}) FROM (SELECT 0 AS k UNION ALL SELECT 1) AS a CROSS JOIN {rows}")
    _run(db,
        "INSERT INTO weave_review_reasons (id, namespace_id, instance_id, code, step_key, activation_seq, detail, "
        f"opened_at, closed_at, closed_by) SELECT h.n, {ns}, h.n, 'TASK_FAILED', {key}, 1, '{{}}', {at}, "
        f"IF(h.n % 25000 = 0, NULL, {done}), IF(h.n % 25000 = 0, NULL, 'cancel') FROM {rows} WHERE {cancelled}")
    _run(db, "ANALYZE TABLE " + ", ".join(t for t in TABLES if t != "weave_pending_advances")
               + ", weave_events, weave_poll_states")


def remove_history(db: Db) -> None:
    """Every history row gone (ids below RESERVED), the scenario's own rows kept: the invariants that run after a
    scenario (Q-3) check the engine's rows, not these copies."""
    for table in TABLES:
        column = "instance_id" if table == "weave_audit" else "id"
        _run(db, f"DELETE FROM {table} WHERE {column} BETWEEN 1 AND {RESERVED - 1}")
    _run(db, f"DELETE FROM weave_events WHERE instance_id < {RESERVED}")
    _run(db, f"DELETE FROM weave_poll_states WHERE activation_id < {RESERVED}")


def refold(db: Db) -> None:
    """The sums of /metrics folded again from nothing, over the history as it is now: history inserted after a
    fold stamps times before it, which no fold would reach, where a real install's rows are stamped as they are
    made. Folds until the sums reach the horizon (at most 50,000 rows of a kind a fold)."""
    from procedures import routines

    for table in ("weave_metric_decisions", "weave_metric_signals", "weave_metric_rounds"):
        _run(db, f"DELETE FROM {table}")
    _run(db, "UPDATE weave_metric_folds SET folded_until = '1000-01-01' WHERE id = 1")
    for _ in range(100):
        assert routines.metrics_fold(db.conn)
        reached = db.scalar("SELECT folded_until FROM weave_metric_folds WHERE id = 1")
        if reached > db.now() - dt.timedelta(minutes=3):  # at the horizon: nothing older left to fold
            return
    raise AssertionError("the sums of /metrics did not reach the horizon")
