"""How far the engine's decisions are from the least they could cost on this schema, next to the raw procedure.

    python -m tests.benchmarks.bench_floor [--n 300] [--rounds 2]

Spec 08's throughput targets are ratios to the raw 5-row procedure. This measures, as ``bench_cpu`` does (the
server's CPU in slices between runs of the raw procedure, on one connection), each decision next to a floor
procedure written for this benchmark that makes exactly the decision's row changes with the fewest statements and
no checks: no engine could do less and keep those rows. A floor procedure is installed only in the benchmark's
own database; none ships.

The settling send of B-1, into instances whose SIGNAL wait is open (their only step):

- ``rows alone``: the signal with its S-4 request digest and receipt, three events, two audit rows, step,
  instance, activation and wait in one multi-table update, the instance's checkpoints deleted; one credential
  read and one locking read of the instance with its step and wait.
- ``rows with Send's own rules``: the same, authorised and locked by the engine's own routines
  (``_weave_instance_authorize``, ``_weave_instance_lock``) and with Send's S-1 field checks: what R-3, R-4 (an
  event and an audit row per change), S-1, S-2 and S-4 cost before any decision is read.
- ``weave_signal_send``: the engine's send, which settles the wait in its own transaction.

``best_b1_ratio`` is 1 / ratio: the best B-1 figure that a send doing that much could reach.

The settlement of a due TIMER (the only step of its instance, so it ends the instance), as B-2 makes them:

- ``rows alone``: the step, instance, activation and wait in one update, two events, the checkpoints deleted, one
  audit row; the candidate's instance found, locked SKIP LOCKED (R-13), and the candidate with its step and wait
  read under that lock with the clock.
- ``weave_checkpoint_advance``, one per call, and ``weave_candidates_advance``, five per call (the orchestrator's
  way), each settlement in its own transaction.

The three decisions of a POLL round (B-3), against a floor procedure each: a worker's claim of one task
(``pulse_task_claim``), its report that the round's answer is PENDING, consumed in the report
(``pulse_attempt_complete``), and the next round's start when its interval is over (``weave_checkpoint_advance``).
Tasks left queued by one kind are claimed by the next kind's setup, and left running.

Not collected by pytest.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable

from procedures import db as dbmod
from procedures import pulse, routines, signals
from tests.benchmarks.bench_cpu import POLL, SIGNAL, TIMER, CpuMeter
from tests.benchmarks.bench_signals import payload_json, reset_raw
from tests.benchmarks.common import check_invariants, figure, fresh_database, world_on

# The row changes of a settling send (the first signal of an instance whose only step is the SIGNAL step), in the
# fewest statements, the signal's S-4 digest included (the rows must be valid ones). {rules} is where the second
# procedure authorises and checks.
FLOOR = """
CREATE PROCEDURE {name}(IN in_token VARCHAR(512), IN in_namespace VARCHAR(200), IN in_inst BIGINT UNSIGNED,
                        IN in_key VARCHAR(128), IN in_corr VARBINARY(512), IN in_payload LONGBLOB)
BEGIN
    DECLARE v_cred, v_ns, v_step, v_act, v_wait, v_seq, v_id BIGINT UNSIGNED;
    DECLARE v_actor VARCHAR(128);
    DECLARE v_now DATETIME(6);
    DECLARE v_digest CHAR(64);
    DECLARE v_receipt LONGTEXT;
    DECLARE x_inst, x_ident BIGINT UNSIGNED;
    DECLARE x_queues VARCHAR(2048);
    DECLARE x_locked TINYINT;
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
    START TRANSACTION;
    {rules}
    SELECT s.id, s.activation_id, w.id, i.event_seq, i.namespace_id, UTC_TIMESTAMP(6)
      INTO v_step, v_act, v_wait, v_seq, v_ns, v_now
      FROM weave_instances i JOIN weave_steps s ON s.instance_id = i.id AND s.step_key = 'approval'
      JOIN weave_waits w ON w.activation_id = s.activation_id
     WHERE i.id = in_inst FOR UPDATE;
    SET v_digest = _weave_signal_digest('approval.decided', '1', 'approval', 1, in_corr, in_payload, 'bench', NULL,
                                        'CANONICAL');
    SET v_receipt = JSON_OBJECT('workflow_id', CONCAT('wf_', in_inst), 'idempotency_key', in_key, 'status', 'PENDING',
                                'request_digest', v_digest);
    INSERT INTO weave_signals (namespace_id, instance_id, idempotency_key, request_digest, name, payload_version,
                               target_step_key, target_activation_seq, correlation_key, payload, reason, evidence_ref,
                               credential_id, actor, status, disposition, accepted_at, expires_at, available_at,
                               consumed_at, receipt)
    VALUES (v_ns, in_inst, in_key, v_digest, 'approval.decided', '1', 'approval', 1, in_corr, in_payload, 'bench',
            NULL, v_cred, v_actor, 'CONSUMED', NULL, v_now, v_now + INTERVAL 1 DAY, v_now, v_now, v_receipt);
    SET v_id = LAST_INSERT_ID();
    UPDATE weave_steps s STRAIGHT_JOIN weave_instances i ON i.id = s.instance_id
      STRAIGHT_JOIN weave_activations a ON a.id = v_act STRAIGHT_JOIN weave_waits w ON w.id = v_wait
       SET s.status = 'SUCCEEDED', s.output = in_payload, s.updated_at = v_now,
           i.event_seq = i.event_seq + 3, i.finished_at = v_now, i.status = 'SUCCEEDED', i.open_steps = 0,
           i.signal_count = i.signal_count + 1, i.updated_at = v_now, i.version = i.version + 1,
           a.ended_at = v_now, w.status = 'SATISFIED', w.winner_signal_id = v_id, w.settled_at = v_now
     WHERE s.id = v_step;
    INSERT INTO weave_events (instance_id, seq, namespace_id, type, step_key, activation_seq, occurred_at, data)
    VALUES (in_inst, v_seq + 1, v_ns, 'SIGNAL_ACCEPTED', 'approval', 1, v_now, JSON_OBJECT('signal_id', v_id)),
           (in_inst, v_seq + 2, v_ns, 'SIGNAL_CONSUMED', 'approval', 1, v_now, JSON_OBJECT('signal_id', v_id)),
           (in_inst, v_seq + 3, v_ns, 'INSTANCE_SUCCEEDED', '', 0, v_now, '{{}}');
    INSERT INTO weave_audit (namespace_id, instance_id, credential_id, actor, action, idempotency_key,
                             request_digest, accepted_at, deadline_at, reason, details, response, created_at)
    VALUES (v_ns, in_inst, v_cred, v_actor, 'signal.accept', in_key, v_digest, v_now, v_now, 'bench', '{{}}',
            _weave_signal_receipt(v_id, v_receipt), v_now),
           (v_ns, in_inst, v_cred, v_actor, 'signal.consume', NULL, NULL, v_now, v_now, NULL, '{{}}', NULL, v_now);
    DELETE FROM weave_pending_advances WHERE instance_id = in_inst;
    COMMIT;
    SELECT v_id AS signal_id;
END
"""
ROWS_ALONE = {
    "rules": "SELECT id, actor INTO v_cred, v_actor FROM weave_credentials WHERE token_hash = SHA2(in_token, 256);",
}
WITH_RULES = {
    # S-2 and R-3 by the engine's own routines, then Send's S-1 field checks (its regular expressions, UTF-8 and
    # JSON checks) as _weave_signal_accept makes them.
    "rules": """CALL _weave_instance_authorize(in_token, in_namespace, CONCAT('wf_', in_inst), 'workflows:signal',
                                            v_ns, v_cred, v_actor, x_inst, x_ident, x_queues);
    CALL _weave_instance_lock(x_inst, x_ident, x_locked);
    IF NOT (in_key REGEXP '^[!-~]{1,128}$') OR NOT ('approval.decided' REGEXP '^[ -~]+$')
       OR NOT ('1' REGEXP '^[ -~]{1,32}$') OR CHAR_LENGTH('approval') NOT BETWEEN 1 AND 64
       OR CAST(CONVERT(in_corr USING utf8mb4) AS BINARY) <> in_corr
       OR CAST(CONVERT(in_payload USING utf8mb4) AS BINARY) <> in_payload
       OR NOT JSON_VALID(CONVERT(in_payload USING utf8mb4)) OR CHAR_LENGTH('bench') NOT BETWEEN 1 AND 1024 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'floor: bad input';
    END IF;""",
}

# The row changes of a timer's settlement (the only step of its instance: it ends the instance), in the fewest
# statements, with R-13's opening: the candidate's instance found, locked SKIP LOCKED, then the candidate with its
# step and wait read under that lock with the clock.
TIMER_FLOOR = """
CREATE PROCEDURE floor_timer_settle(IN in_checkpoint BIGINT UNSIGNED)
BEGIN
    DECLARE v_inst, v_locked, v_ns, v_step, v_act, v_wait, v_seq BIGINT UNSIGNED;
    DECLARE v_now, v_due DATETIME(6);
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
    START TRANSACTION;
    SELECT instance_id INTO v_inst FROM weave_pending_advances WHERE id = in_checkpoint;
    SELECT id INTO v_locked FROM weave_instances WHERE id = v_inst FOR UPDATE SKIP LOCKED;
    SELECT c.namespace_id, s.id, s.activation_id, w.id, w.due_at, i.event_seq,
           UTC_TIMESTAMP(6) + INTERVAL (SELECT clock_offset_us FROM weave_install WHERE id = 1) MICROSECOND
      INTO v_ns, v_step, v_act, v_wait, v_due, v_seq, v_now
      FROM weave_pending_advances c JOIN weave_instances i ON i.id = c.instance_id
      JOIN weave_steps s ON s.instance_id = c.instance_id AND s.step_key = c.step_key
      JOIN weave_waits w ON w.activation_id = c.activation_id
     WHERE c.id = in_checkpoint FOR UPDATE;
    UPDATE weave_steps s STRAIGHT_JOIN weave_instances i ON i.id = s.instance_id
      STRAIGHT_JOIN weave_activations a ON a.id = v_act STRAIGHT_JOIN weave_waits w ON w.id = v_wait
       SET s.status = 'SUCCEEDED', s.output = 'null', s.updated_at = v_now,
           i.event_seq = i.event_seq + 2, i.finished_at = v_now, i.status = 'SUCCEEDED', i.open_steps = 0,
           i.updated_at = v_now, i.version = i.version + 1,
           a.ended_at = v_now, w.status = 'SATISFIED', w.settled_at = v_now
     WHERE s.id = v_step;
    INSERT INTO weave_events (instance_id, seq, namespace_id, type, step_key, activation_seq, occurred_at, data)
    VALUES (v_inst, v_seq + 1, v_ns, 'TIMER_SETTLED', 'wait', 1, v_now,
            JSON_OBJECT('due_at', DATE_FORMAT(v_due, '%Y-%m-%dT%H:%i:%s.%fZ'))),
           (v_inst, v_seq + 2, v_ns, 'INSTANCE_SUCCEEDED', '', 0, v_now, '{{}}');
    DELETE FROM weave_pending_advances WHERE instance_id = v_inst;
    INSERT INTO weave_audit (namespace_id, instance_id, credential_id, actor, action, accepted_at, deadline_at,
                             details, created_at)
    VALUES (v_ns, v_inst, 0, 'weave.orchestrator', 'timer.settle', v_now, v_due, '{{}}', v_now);
    COMMIT;
    SELECT 'SETTLED' AS outcome;
END
"""

# The row changes of a worker's report that a POLL round's answer is PENDING, consumed in the report as the engine
# consumes it (B-3's costliest decision): the attempt ended, its task SUCCEEDED, its permit released; the outcome
# stored already consumed; the round POLL_PENDING, the poll WAITING until next_poll_at, the instance's event number
# taken; the event and its audit row; the POLL checkpoint moved to next_poll_at; the task's slot given back through
# its release stripes. One plain read finds the instance, which is locked; one locking read takes the rest.
REPORT_FLOOR = """
CREATE PROCEDURE floor_report_pending(IN in_attempt BIGINT UNSIGNED, IN in_result LONGTEXT)
BEGIN
    DECLARE v_task, v_inst, v_locked, v_ns, v_act, v_round, v_event BIGINT UNSIGNED;
    DECLARE v_key VARCHAR(64);
    DECLARE v_seq INT UNSIGNED;
    DECLARE v_now, v_next, v_deadline DATETIME(6);
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
    START TRANSACTION;
    SELECT a.task_id, t.instance_id INTO v_task, v_inst
      FROM pulse_attempts a JOIN pulse_tasks t ON t.id = a.task_id WHERE a.id = in_attempt;
    SELECT id INTO v_locked FROM weave_instances WHERE id = v_inst FOR UPDATE SKIP LOCKED;
    SELECT t.namespace_id, t.step_key, t.activation_id, r.id, s.activation_seq, p.poll_deadline,
           UTC_TIMESTAMP(6) + INTERVAL (SELECT clock_offset_us FROM weave_install WHERE id = 1) MICROSECOND
      INTO v_ns, v_key, v_act, v_round, v_seq, v_deadline, v_now
      FROM pulse_tasks t JOIN pulse_attempts a ON a.id = in_attempt
      JOIN weave_steps s ON s.instance_id = t.instance_id AND s.step_key = t.step_key
      JOIN weave_poll_states p ON p.activation_id = t.activation_id
      JOIN weave_poll_rounds r ON r.activation_id = t.activation_id AND r.round_no = t.round_no
     WHERE t.id = v_task FOR UPDATE;
    SET v_next = LEAST(v_now + INTERVAL (SELECT interval_ms FROM weave_poll_states WHERE activation_id = v_act)
                                        * 1000 MICROSECOND, v_deadline);
    UPDATE pulse_tasks t STRAIGHT_JOIN pulse_attempts a ON a.id = in_attempt AND a.task_id = t.id
      STRAIGHT_JOIN pulse_permits p ON p.attempt_id = a.id AND p.released_at IS NULL
       SET t.status = 'SUCCEEDED', t.result = in_result, t.finished_at = v_now, t.updated_at = v_now,
           a.status = 'SUCCEEDED', a.ended_at = v_now, p.released_at = v_now, p.mutex_held = NULL
     WHERE t.id = v_task;
    INSERT INTO pulse_inbox (namespace_id, task_id, instance_id, kind, result, occurred_at, state, consumed_at,
                             available_at)
    VALUES (v_ns, v_task, v_inst, 'SUCCEEDED', in_result, v_now, 'CONSUMED', v_now, v_now);
    UPDATE weave_poll_rounds r STRAIGHT_JOIN weave_poll_states p ON p.activation_id = v_act
      STRAIGHT_JOIN weave_instances i ON i.id = v_inst
       SET r.outcome = 'POLL_PENDING', r.result = in_result, r.result_at = v_now,
           p.current_task_id = NULL, p.last_outcome = 'POLL_PENDING', p.next_poll_at = v_next, p.state = 'WAITING',
           p.updated_at = v_now,
           i.event_seq = LAST_INSERT_ID(i.event_seq + 1), i.updated_at = v_now, i.version = i.version + 1
     WHERE r.id = v_round;
    SET v_event = LAST_INSERT_ID();
    INSERT INTO weave_events (instance_id, seq, namespace_id, type, step_key, activation_seq, occurred_at, data)
    VALUES (v_inst, v_event, v_ns, 'POLL_ROUND_PENDING', v_key, v_seq, v_now, JSON_OBJECT('outcome', 'POLL_PENDING'));
    INSERT INTO weave_audit (namespace_id, instance_id, credential_id, actor, action, accepted_at, deadline_at,
                             details, created_at)
    VALUES (v_ns, v_inst, 0, 'weave.orchestrator', 'poll.pending', v_now, v_deadline, '{{}}', v_now);
    UPDATE weave_pending_advances SET due_at = v_next, available_at = v_next, version = version + 1
     WHERE instance_id = v_inst AND step_key = v_key;
    UPDATE pulse_tasks t
      STRAIGHT_JOIN pulse_slot_releases r
        ON r.stripe = t.id MOD 16 AND ((r.owner_kind = 'APP' AND r.owner_id = t.app_id)
                                       OR (r.owner_kind = 'QUEUE' AND r.owner_id = t.queue_id))
       SET r.released = r.released + 1
     WHERE t.id = v_task;
    COMMIT;
    SELECT 'PENDING' AS outcome;
END
"""

# The row changes of a POLL round's start (B-3's other decision of the orchestrator): round n+1's task, a copy of
# round n's (P-4: its frozen contract reused) with its deadline, its round record, the poll IN_FLIGHT with the
# instance's event number taken, the POLL checkpoint moved to the poll deadline, the event and its audit row, and the
# task's slot taken from its app and queue. The candidate's instance found and locked, then one locking read.
ROUND_FLOOR = """
CREATE PROCEDURE floor_round_start(IN in_checkpoint BIGINT UNSIGNED)
BEGIN
    DECLARE v_inst, v_locked, v_ns, v_act, v_prev, v_task, v_event, v_app, v_queue BIGINT UNSIGNED;
    DECLARE v_key VARCHAR(64);
    DECLARE v_seq, v_used INT UNSIGNED;
    DECLARE v_now, v_deadline DATETIME(6);
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
    START TRANSACTION;
    SELECT instance_id INTO v_inst FROM weave_pending_advances WHERE id = in_checkpoint;
    SELECT id INTO v_locked FROM weave_instances WHERE id = v_inst FOR UPDATE SKIP LOCKED;
    SELECT c.namespace_id, c.step_key, c.activation_id, s.activation_seq, p.rounds_used,
           LEAST(p.poll_deadline, i.deadline_at), r.task_id, t.app_id, t.queue_id,
           UTC_TIMESTAMP(6) + INTERVAL (SELECT clock_offset_us FROM weave_install WHERE id = 1) MICROSECOND
      INTO v_ns, v_key, v_act, v_seq, v_used, v_deadline, v_prev, v_app, v_queue, v_now
      FROM weave_pending_advances c JOIN weave_instances i ON i.id = c.instance_id
      JOIN weave_steps s ON s.instance_id = c.instance_id AND s.step_key = c.step_key
      JOIN weave_poll_states p ON p.activation_id = c.activation_id
      JOIN weave_poll_rounds r ON r.activation_id = c.activation_id AND r.round_no = p.rounds_used
      JOIN pulse_tasks t ON t.id = r.task_id
     WHERE c.id = in_checkpoint FOR UPDATE;
    INSERT INTO pulse_tasks (namespace_id, app_id, queue_id, instance_id, step_key, activation_id, round_no, handler,
                             handler_version, input, priority, business_key, mutex_key, max_attempts,
                             initial_backoff_ms, backoff_coefficient, max_backoff_ms, timeout_ms, deadline_at, status,
                             attempts_used, cancel_requested, available_at, created_at, updated_at)
    SELECT namespace_id, app_id, queue_id, instance_id, step_key, activation_id, v_used + 1, handler,
           handler_version, input, priority, business_key, mutex_key, max_attempts, initial_backoff_ms,
           backoff_coefficient, max_backoff_ms, timeout_ms,
           LEAST(v_now + INTERVAL timeout_ms * 1000 MICROSECOND, v_deadline), 'QUEUED', 0, 0, v_now, v_now, v_now
      FROM pulse_tasks WHERE id = v_prev;
    SET v_task = LAST_INSERT_ID();
    INSERT INTO weave_poll_rounds (namespace_id, instance_id, activation_id, round_no, task_id, outcome, created_at)
    VALUES (v_ns, v_inst, v_act, v_used + 1, v_task, 'IN_FLIGHT', v_now);
    UPDATE weave_poll_states p STRAIGHT_JOIN weave_instances i ON i.id = v_inst
       SET p.rounds_used = p.rounds_used + 1, p.current_task_id = v_task, p.state = 'IN_FLIGHT',
           p.next_poll_at = NULL, p.updated_at = v_now,
           i.event_seq = LAST_INSERT_ID(i.event_seq + 1), i.updated_at = v_now, i.version = i.version + 1
     WHERE p.activation_id = v_act;
    SET v_event = LAST_INSERT_ID();
    UPDATE weave_pending_advances SET due_at = v_deadline, available_at = v_deadline, version = version + 1
     WHERE id = in_checkpoint;
    INSERT INTO weave_events (instance_id, seq, namespace_id, type, step_key, activation_seq, occurred_at, data)
    VALUES (v_inst, v_event, v_ns, 'POLL_ROUND_STARTED', v_key, v_seq, v_now, JSON_OBJECT('round', v_used + 1));
    INSERT INTO weave_audit (namespace_id, instance_id, credential_id, actor, action, accepted_at, deadline_at,
                             details, created_at)
    VALUES (v_ns, v_inst, 0, 'weave.orchestrator', 'poll.round', v_now, v_deadline, '{{}}', v_now);
    UPDATE weave_apps a STRAIGHT_JOIN weave_queues q ON q.id = v_queue
       SET a.slots_taken = a.slots_taken + 1, q.slots_taken = q.slots_taken + 1
     WHERE a.id = v_app;
    COMMIT;
    SELECT 'ROUND' AS outcome;
END
"""

# The row changes of a worker's claim of one task (B-3's third decision): the attempt, its execution permit, the task
# RUNNING; the task found by the claim's own index order and locked SKIP LOCKED; the claimed task answered with what
# the worker runs.
CLAIM_FLOOR = """
CREATE PROCEDURE floor_claim_one(IN in_worker VARCHAR(128), IN in_queue_id BIGINT UNSIGNED)
BEGIN
    DECLARE v_task, v_ns, v_inst, v_attempt BIGINT UNSIGNED;
    DECLARE v_no INT UNSIGNED;
    DECLARE v_mutex VARCHAR(256);
    DECLARE v_now DATETIME(6);
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
    START TRANSACTION;
    SELECT t.id, t.namespace_id, t.instance_id, t.attempts_used + 1, t.mutex_key,
           UTC_TIMESTAMP(6) + INTERVAL (SELECT clock_offset_us FROM weave_install WHERE id = 1) MICROSECOND
      INTO v_task, v_ns, v_inst, v_no, v_mutex, v_now
      FROM pulse_tasks t FORCE INDEX (ix_task_claim)
     WHERE t.queue_id = in_queue_id AND t.status = 'QUEUED'
     ORDER BY t.priority DESC, t.available_at, t.id LIMIT 1 FOR UPDATE SKIP LOCKED;
    INSERT INTO pulse_attempts (namespace_id, task_id, instance_id, attempt_no, worker_id, status, lease_expires_at,
                                started_at)
    VALUES (v_ns, v_task, v_inst, v_no, in_worker, 'RUNNING', v_now + INTERVAL 30 SECOND, v_now);
    SET v_attempt = LAST_INSERT_ID();
    INSERT INTO pulse_permits (attempt_id, namespace_id, queue_id, task_id, mutex_key, mutex_held, taken_at)
    VALUES (v_attempt, v_ns, in_queue_id, v_task, v_mutex, v_mutex, v_now);
    UPDATE pulse_tasks SET status = 'RUNNING', attempts_used = v_no, updated_at = v_now WHERE id = v_task;
    COMMIT;
    SELECT t.id AS task_id, v_attempt AS attempt_id, t.handler, t.handler_version, t.input, t.deadline_at
      FROM pulse_tasks t WHERE t.id = v_task;
END
"""


Calls = list[Callable[[], object]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=300, help="decisions of each kind per round (default 300)")
    parser.add_argument("--rounds", type=int, default=2,
                        help="rounds of each comparison, its kinds in turn within a round (default 2)")
    args = parser.parse_args()
    n = args.n
    dsn = fresh_database("weave_bench_floor")
    world = world_on(dsn)
    for flow in (SIGNAL, TIMER, POLL):
        world.publish(flow)
    reset_raw(dsn)
    conn = dbmod.connect(dsn)
    with conn.cursor() as cur:
        cur.execute(FLOOR.format(name="floor_send_rows", **ROWS_ALONE))
        cur.execute(FLOOR.format(name="floor_send_rules", **WITH_RULES))
        for floor in (TIMER_FLOOR, CLAIM_FLOOR, REPORT_FLOOR, ROUND_FLOOR):
            cur.execute(floor.format())
    payload = payload_json(1024)
    pending = '{"status":"PENDING"}'
    meter = CpuMeter(conn, payload)
    dbmod.call(conn, "weave_scan", 100)  # the connection opened and the routines' first calls made
    meter.raw_batch(4 * n)

    def compare(title: str, label: str, kinds: dict[str, Callable[[str], tuple[Calls, int]]],
                best_b1: bool = False) -> None:
        """Each kind in turn, ``--rounds`` times: its decisions, prepared by the kind for a tag of their own, made in
        slices next to the raw procedure. ``best_b1`` adds ``best_b1_ratio``, 1 / ratio."""
        for round_no in range(args.rounds):
            for k, (kind, prepare) in enumerate(kinds.items()):
                calls, decisions = prepare(f"{label}{round_no}k{k}")
                slices = meter.measure(calls, decisions=decisions)
                best = {"best_b1_ratio": round(1 / slices.ratio, 2)} if best_b1 else {}
                figure(title, **{label: kind}, round=round_no + 1, **slices.figure(), **best)

    def start(definition: str, tag: str, **input: str) -> set[str]:
        """``--n`` new instances of a definition, started under the tag: their workflow ids."""
        return {routines.instance_start(conn, world.token, world.namespace, definition=definition, app=world.app,
                                        input={k: f"{v}-{tag}-{i}" for k, v in input.items()},
                                        idempotency_key=f"{tag}-{i}", deadline_ms=86_400_000)["workflow_id"]
                for i in range(n)}

    def checkpoints(kind: str, tag: str) -> list[int]:
        return [r["id"] for r in world.db.rows(
            "SELECT c.id FROM weave_pending_advances c JOIN weave_instances i ON i.id = c.instance_id "
            "WHERE c.kind = %s AND i.idempotency_key LIKE %s ORDER BY c.id", kind, f"{tag}-%")]

    def each(procedure: str, ids: list[int], *more: object) -> tuple[Calls, int]:
        return [(lambda i=i: dbmod.call(conn, procedure, i, *more)) for i in ids], len(ids)

    # B-1: a send into each instance's open SIGNAL wait.
    def open_waits(tag: str) -> list[dict]:
        start(SIGNAL["name"], tag, order_id="o")
        return world.db.rows("SELECT id, CONCAT('wf_', id) AS wf, JSON_VALUE(input, '$.order_id') AS corr "
                             "FROM weave_instances WHERE idempotency_key LIKE %s ORDER BY id", f"{tag}-%")

    def floor_sends(procedure: str) -> Callable[[str], tuple[Calls, int]]:
        def prepare(tag: str) -> tuple[Calls, int]:
            return [(lambda w=w: dbmod.call(conn, procedure, world.token, world.namespace, w["id"], f"s-{w['wf']}",
                                            w["corr"], payload)) for w in open_waits(tag)], n
        return prepare

    def sends(tag: str) -> tuple[Calls, int]:
        return [(lambda w=w: signals.send(conn, world.token, world.namespace, w["wf"], idempotency_key=f"s-{w['wf']}",
                                          name="approval.decided", payload_version="1", target_step_key="approval",
                                          target_activation_sequence=1, correlation_key=w["corr"], payload=payload,
                                          reason="bench")) for w in open_waits(tag)], n

    compare("settling send against its floor", "send", {
        "rows alone (the floor procedure)": floor_sends("floor_send_rows"),
        "rows with Send's own rules (authorisation, S-1 checks)": floor_sends("floor_send_rules"),
        "weave_signal_send (settles the open wait)": sends,
    }, best_b1=True)

    # B-2: the settlement of each instance's only step, a TIMER due now.
    def due_timers(tag: str) -> list[int]:
        start(TIMER["name"], tag)
        world.db.advance(1_001)
        return checkpoints("TIMER", tag)

    def batches(tag: str) -> tuple[Calls, int]:
        ids = due_timers(tag)
        return [(lambda b=ids[k:k + 5]: dbmod.call(conn, "weave_candidates_advance", "CHECKPOINT", json.dumps(b)))
                for k in range(0, len(ids), 5)], len(ids)

    compare("timer settlement against its floor", "settle", {
        "rows alone (the floor procedure)": lambda tag: each("floor_timer_settle", due_timers(tag)),
        "weave_checkpoint_advance": lambda tag: each("weave_checkpoint_advance", due_timers(tag)),
        "weave_candidates_advance, 5 per call (each)": batches,
    })

    # B-3: a round's claim, its PENDING report and the next round's start. A kind's setup claims what an earlier
    # kind left queued (those attempts are left running), so that each kind decides on its own rows only.
    def claim_all() -> list[dict]:
        claimed: list[dict] = []
        while more := pulse.task_claim(conn, "w1", "payments", limit=1000):
            claimed += more
        return claimed

    def queued_rounds(claim: Callable[[], object]) -> Callable[[str], tuple[Calls, int]]:
        """``--n`` claims of one task each, of the round 1 tasks of ``--n`` new POLL instances."""
        def prepare(tag: str) -> tuple[Calls, int]:
            claim_all()
            start(POLL["name"], tag)
            return [claim] * n, n
        return prepare

    def one(answer: object) -> None:
        assert answer, "a claim found no task"

    queue_id = world.db.scalar("SELECT id FROM weave_queues WHERE name = 'payments'")
    compare("task claim against its floor", "claim", {
        "rows alone (the floor procedure)": queued_rounds(
            lambda: one(dbmod.call(conn, "floor_claim_one", "w1", queue_id)[0])),
        "pulse_task_claim": queued_rounds(lambda: one(pulse.task_claim(conn, "w1", "payments", limit=1))),
    })

    def held_rounds(tag: str) -> list[int]:
        """Round 1 of ``--n`` new POLL instances, its task claimed: the attempts."""
        started = start(POLL["name"], tag)
        attempts = [c["attempt_id"] for c in claim_all() if c["workflow_id"] in started]
        assert len(attempts) == n, f"{len(attempts)} of {n} rounds claimed"
        return attempts

    compare("POLL report against its floor", "report", {
        "rows alone (the floor procedure)": lambda tag: each("floor_report_pending", held_rounds(tag), pending),
        "pulse_attempt_complete": lambda tag: (
            [(lambda a=a: pulse.attempt_complete(conn, a, "w1", result_json=pending)) for a in held_rounds(tag)], n),
    })

    def due_rounds(tag: str) -> list[int]:
        """``--n`` new POLL instances whose round 1 answered PENDING, the interval over: their POLL checkpoints."""
        for a in held_rounds(tag):
            pulse.attempt_complete(conn, a, "w1", result_json=pending)
        world.db.advance(1_001)
        return checkpoints("POLL", tag)

    compare("POLL round start against its floor", "start", {
        "rows alone (the floor procedure)": lambda tag: each("floor_round_start", due_rounds(tag)),
        "weave_checkpoint_advance": lambda tag: each("weave_checkpoint_advance", due_rounds(tag)),
    })

    # Every decision measured was made: a floor or an engine call that decided nothing would measure nothing.
    made = world.db.row(
        "SELECT (SELECT COUNT(*) FROM weave_waits WHERE status = 'SATISFIED' AND kind = 'SIGNAL') AS sends, "
        "(SELECT COUNT(*) FROM weave_waits WHERE status = 'SATISFIED' AND kind = 'TIMER') AS timers, "
        "(SELECT COUNT(*) FROM weave_poll_rounds WHERE outcome = 'POLL_PENDING') AS reports, "
        "(SELECT COUNT(*) FROM weave_poll_rounds WHERE round_no = 2) AS round_starts")
    # Reports: the two kinds' own, and the setup's of the round starts.
    expected = {"sends": 3 * n, "timers": 3 * n, "reports": 4 * n, "round_starts": 2 * n}
    assert made == {k: v * args.rounds for k, v in expected.items()}, made
    conn.close()
    check_invariants(dsn)


if __name__ == "__main__":
    main()
