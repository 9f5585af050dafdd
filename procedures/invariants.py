"""The M-4 invariants: each is one SQL query that must return zero rows.

Tests run them after every scenario (fixture teardown); process tests and benchmarks run them after
every run; ``weave status --check`` runs them against a live database.
"""

from __future__ import annotations

from dataclasses import dataclass

from .db import Connection
from .reviews import RETRY_CLOSES

# A PENDING signal's next check time while it is kept for its step's recovery: none (weave_signal_process).
KEPT_FOR_RECOVERY = "9999-12-31 00:00:00"


@dataclass(frozen=True)
class Invariant:
    id: str
    promise: str
    sql: str


# The S-4 digest recomputed from a stored signal row by the same function the routines use, so that M-4.10
# checks the stored content itself and not only the digest column written beside it. Signals stored by an earlier
# release carry the digest in an earlier form.
_SIGNAL_FIELDS = "s.name, s.payload_version, s.target_step_key, s.target_activation_seq, s.correlation_key, " \
                 "s.payload, s.reason, s.evidence_ref"
_SIGNAL_DIGEST_MATCHES = (f"(a.request_digest = _weave_signal_digest({_SIGNAL_FIELDS}, 'CANONICAL') "
                          f"OR _weave_signal_digest_earlier({_SIGNAL_FIELDS}, a.request_digest))")

# (table, its id column, a reference column, the table it references): every reference stays in one namespace.
_REFERENCES = [
    ("weave_steps", "id", "instance_id", "weave_instances"),
    ("weave_waits", "id", "instance_id", "weave_instances"),
    ("weave_activations", "id", "instance_id", "weave_instances"),
    ("weave_pending_advances", "id", "instance_id", "weave_instances"),
    ("weave_signals", "id", "instance_id", "weave_instances"),
    ("pulse_tasks", "id", "instance_id", "weave_instances"),
    ("pulse_tasks", "id", "queue_id", "weave_queues"),
    ("pulse_tasks", "id", "app_id", "weave_apps"),
    ("weave_instances", "id", "app_id", "weave_apps"),
    ("weave_instances", "id", "definition_id", "weave_definitions"),
    ("weave_events", "seq", "instance_id", "weave_instances"),
]

INVARIANTS: tuple[Invariant, ...] = (
    Invariant("M-4.1", "a wait has at most one winner, of its own instance, step and activation", """
        SELECT w.id FROM weave_waits w LEFT JOIN weave_signals s ON s.id = w.winner_signal_id
         WHERE w.winner_signal_id IS NOT NULL
           AND (s.id IS NULL OR s.instance_id <> w.instance_id OR s.target_step_key <> w.step_key
                OR s.target_activation_seq <> w.activation_seq)"""),
    Invariant("M-4.2", "a signal is CONSUMED iff it is the winner of exactly one wait", """
        SELECT s.id FROM weave_signals s
          LEFT JOIN (SELECT winner_signal_id, COUNT(*) AS n FROM weave_waits
                      WHERE winner_signal_id IS NOT NULL GROUP BY winner_signal_id) w
            ON w.winner_signal_id = s.id
         WHERE (s.status = 'CONSUMED') <> (COALESCE(w.n, 0) = 1) OR COALESCE(w.n, 0) > 1"""),
    Invariant("M-4.3", "an activation never has two rounds IN_FLIGHT, and rounds used <= max rounds", """
        SELECT activation_id FROM weave_poll_rounds GROUP BY activation_id
        HAVING SUM(outcome = 'IN_FLIGHT') > 1
        UNION ALL
        SELECT activation_id FROM weave_poll_states WHERE rounds_used > max_rounds"""),
    Invariant("M-4.4", "round numbers of an activation are 1..n without gaps, n = rounds used", """
        SELECT r.activation_id FROM weave_poll_rounds r
          LEFT JOIN weave_poll_states p ON p.activation_id = r.activation_id
         GROUP BY r.activation_id, p.rounds_used
        HAVING MIN(r.round_no) <> 1 OR MAX(r.round_no) <> COUNT(*) OR p.rounds_used IS NULL
            OR p.rounds_used <> COUNT(*)
        UNION ALL
        SELECT p.activation_id FROM weave_poll_states p
         WHERE p.rounds_used > 0
           AND NOT EXISTS (SELECT 1 FROM weave_poll_rounds r WHERE r.activation_id = p.activation_id)"""),
    Invariant("M-4.4b", "a poll activation's task in flight is its latest round's", """
        SELECT u.id FROM pulse_tasks u JOIN weave_poll_states p ON p.activation_id = u.activation_id
         WHERE u.status IN ('QUEUED', 'RUNNING') AND NOT (u.round_no <=> p.rounds_used)"""),
    Invariant("M-4.5", "attempts never exceed the frozen max_attempts; attempt numbers are gap-free", """
        SELECT t.id FROM pulse_tasks t
          LEFT JOIN (SELECT task_id, COUNT(*) AS n, MAX(attempt_no) AS top FROM pulse_attempts
                      GROUP BY task_id) a ON a.task_id = t.id
         WHERE t.attempts_used > t.max_attempts OR COALESCE(a.n, 0) <> t.attempts_used
            OR COALESCE(a.top, 0) <> COALESCE(a.n, 0)"""),
    Invariant("M-4.6", "every RUNNING attempt holds exactly one permit; no permit without a RUNNING attempt; a "
              "permit holds its mutex key exactly while it is held", """
        SELECT a.id FROM pulse_attempts a
          LEFT JOIN pulse_permits p ON p.attempt_id = a.id AND p.released_at IS NULL
         WHERE a.status = 'RUNNING' AND p.attempt_id IS NULL
        UNION ALL
        SELECT p.attempt_id FROM pulse_permits p LEFT JOIN pulse_attempts a ON a.id = p.attempt_id
         WHERE p.released_at IS NULL AND (a.id IS NULL OR a.status <> 'RUNNING')
        UNION ALL
        SELECT t.id FROM pulse_tasks t
          LEFT JOIN pulse_attempts a ON a.task_id = t.id AND a.status = 'RUNNING'
         WHERE (t.status = 'RUNNING') <> (a.id IS NOT NULL)
        UNION ALL
        SELECT p.attempt_id FROM pulse_permits p
         WHERE IF(p.released_at IS NULL, NOT (p.mutex_held <=> p.mutex_key), p.mutex_held IS NOT NULL)"""),
    # At creation time (M-4.7): an operator may lower a capacity or quota below what is in flight, and those tasks
    # run on. More in flight than the limit is a broken promise only when one of them was created at or after the
    # limit's last change (updated_at, read after the row's lock): its slot was then taken under this very limit,
    # with every task still in flight already counted, so the limit held no more than it allows.
    Invariant("M-4.7", "QUEUED+RUNNING tasks per queue <= capacity and per app <= quota (at creation time)", """
        SELECT q.id FROM weave_queues q JOIN pulse_tasks t ON t.queue_id = q.id
         WHERE t.status IN ('QUEUED', 'RUNNING') GROUP BY q.id, q.capacity, q.updated_at
        HAVING COUNT(*) > q.capacity AND MAX(t.created_at) >= q.updated_at
        UNION ALL
        SELECT a.id FROM weave_apps a JOIN pulse_tasks t ON t.app_id = a.id
         WHERE t.status IN ('QUEUED', 'RUNNING') GROUP BY a.id, a.max_in_flight, a.updated_at
        HAVING COUNT(*) > a.max_in_flight AND MAX(t.created_at) >= a.updated_at"""),
    Invariant("M-4.7b", "every app and queue has its 16 release stripes, and its slots taken less its releases "
              "equal its QUEUED+RUNNING tasks", """
        SELECT a.id FROM weave_apps a
          LEFT JOIN (SELECT owner_id, COUNT(*) AS k, MAX(stripe) AS top, SUM(released) AS n FROM pulse_slot_releases
                      WHERE owner_kind = 'APP' GROUP BY owner_id) r ON r.owner_id = a.id
          LEFT JOIN (SELECT app_id, COUNT(*) AS n FROM pulse_tasks WHERE status IN ('QUEUED', 'RUNNING')
                      GROUP BY app_id) t ON t.app_id = a.id
         WHERE COALESCE(r.k, 0) <> 16 OR r.top <> 15 OR a.slots_taken - COALESCE(r.n, 0) <> COALESCE(t.n, 0)
        UNION ALL
        SELECT q.id FROM weave_queues q
          LEFT JOIN (SELECT owner_id, COUNT(*) AS k, MAX(stripe) AS top, SUM(released) AS n FROM pulse_slot_releases
                      WHERE owner_kind = 'QUEUE' GROUP BY owner_id) r ON r.owner_id = q.id
          LEFT JOIN (SELECT queue_id, COUNT(*) AS n FROM pulse_tasks WHERE status IN ('QUEUED', 'RUNNING')
                      GROUP BY queue_id) t ON t.queue_id = q.id
         WHERE COALESCE(r.k, 0) <> 16 OR r.top <> 15 OR q.slots_taken - COALESCE(r.n, 0) <> COALESCE(t.n, 0)"""),
    # a deferral for room waits in the line of what it found full, which a task's end of that app or queue wakes,
    # and one for a disabled identity or app names it, for its enabling to wake; one that names anything else would
    # hold up that line's creators, and never be woken by its own.
    Invariant("M-4.7c", "a deferral waits only for its instance's app (QUOTA_FULL, APP_DISABLED) or identity "
              "(IDENTITY_DISABLED), or a queue of its namespace (QUEUE_FULL)", """
        SELECT c.id FROM weave_pending_advances c
          JOIN weave_instances i ON i.id = c.instance_id
          LEFT JOIN weave_queues q ON q.id = c.deferred_for AND q.namespace_id = c.namespace_id
         WHERE c.deferred_for IS NOT NULL
           AND NOT ((c.deferred_reason IN ('QUOTA_FULL', 'APP_DISABLED') AND c.deferred_for = i.app_id)
                    OR (c.deferred_reason = 'IDENTITY_DISABLED' AND c.deferred_for = i.credential_id)
                    OR (c.deferred_reason = 'QUEUE_FULL' AND q.id IS NOT NULL))"""),
    Invariant("M-4.8", "no task was created for an instance at or after its deadline", """
        SELECT t.id FROM pulse_tasks t JOIN weave_instances i ON i.id = t.instance_id
         WHERE t.created_at >= i.deadline_at"""),
    Invariant("M-4.9", "event sequence numbers are gap-free and match the instance counter", """
        SELECT i.id FROM weave_instances i
          LEFT JOIN (SELECT instance_id, COUNT(*) AS n, MIN(seq) AS lo, MAX(seq) AS hi FROM weave_events
                      GROUP BY instance_id) e ON e.instance_id = i.id
         WHERE COALESCE(e.n, 0) <> i.event_seq OR COALESCE(e.hi, 0) <> i.event_seq
            OR (e.n > 0 AND e.lo <> 1)"""),
    Invariant("M-4.9b", "the open-step count of every instance equals its steps not SUCCEEDED", """
        SELECT i.id FROM weave_instances i
          LEFT JOIN (SELECT instance_id, COUNT(*) AS n FROM weave_steps WHERE status <> 'SUCCEEDED'
                      GROUP BY instance_id) s ON s.instance_id = i.id
         WHERE i.open_steps <> COALESCE(s.n, 0)"""),
    # R-13, F-9: a decision skips the facts of its instance's other steps when those are all PENDING (no activation,
    # so no facts), by this count: one too low would skip the facts of a step that holds some.
    Invariant("M-4.9c", "the pending-step count of every instance equals its steps PENDING", """
        SELECT i.id FROM weave_instances i
          LEFT JOIN (SELECT instance_id, COUNT(*) AS n FROM weave_steps WHERE status = 'PENDING'
                      GROUP BY instance_id) s ON s.instance_id = i.id
         WHERE i.pending_steps <> COALESCE(s.n, 0)"""),
    Invariant("M-4.10", "every accepted signal has an audit row whose request digest matches the stored content", f"""
        SELECT s.id FROM weave_signals s
         WHERE NOT EXISTS (SELECT 1 FROM weave_audit a
                            WHERE a.instance_id = s.instance_id AND a.action = 'signal.accept'
                              AND a.idempotency_key = s.idempotency_key
                              AND a.request_digest = s.request_digest
                              AND {_SIGNAL_DIGEST_MATCHES})"""),
    # S-5: a receipt is stored without its signal_id (the row's own id) and composed on every answer; the receipt
    # so composed is the one the acceptance answered, which its audit row keeps.
    Invariant("M-4.10b", "every signal's receipt, as answered, is the receipt its acceptance answered", """
        SELECT s.id FROM weave_signals s
         WHERE NOT EXISTS (SELECT 1 FROM weave_audit a
                            WHERE a.instance_id = s.instance_id AND a.action = 'signal.accept'
                              AND a.idempotency_key = s.idempotency_key
                              AND a.response = _weave_signal_receipt(s.id, s.receipt))"""),
    Invariant("M-4.11", "a SATISFIED timer settled at or after its due time; due = min(start + delay, deadline)", """
        SELECT w.id FROM weave_waits w JOIN weave_activations a ON a.id = w.activation_id
         WHERE w.kind = 'TIMER'
           AND (w.due_at <> LEAST(w.started_at + INTERVAL
                    CAST(JSON_VALUE(a.frozen, '$.delay_ms') AS UNSIGNED) * 1000 MICROSECOND, a.deadline_at)
                OR (w.status = 'SATISFIED' AND (w.settled_at IS NULL OR w.settled_at < w.due_at)))"""),
    Invariant("M-4.12", "a wait satisfied by a signal has winner.accepted_at < wait.deadline", """
        SELECT w.id FROM weave_waits w JOIN weave_signals s ON s.id = w.winner_signal_id
         WHERE s.accepted_at >= w.deadline_at"""),
    Invariant("M-4.13", "no row references a row of another namespace", "\n        UNION ALL ".join(
        f"SELECT c.{key} FROM {table} c JOIN {parent} p ON p.id = c.{column} WHERE c.namespace_id <> p.namespace_id"
        for table, key, column, parent in _REFERENCES)),
    # A row deleted by hand under the rows that name it (the engine deletes none of them while they are named) leaves
    # those rows to decisions that can only fail, and reads that cannot show them.
    Invariant("M-4.13b", "every row a row references exists", "\n        UNION ALL ".join(
        f"SELECT c.{key} FROM {table} c LEFT JOIN {parent} p ON p.id = c.{column} WHERE p.id IS NULL"
        for table, key, column, parent in _REFERENCES)),
    # The instance an attempt or a task outcome names is read beside its task's to order the instance's decisions
    # (R-13, F-9): one naming another instance would be ordered among that instance's facts, and missing from its own.
    Invariant("M-4.13c", "an attempt's and a task outcome's instance is its task's", """
        SELECT a.id FROM pulse_attempts a JOIN pulse_tasks t ON t.id = a.task_id WHERE a.instance_id <> t.instance_id
        UNION ALL
        SELECT x.id FROM pulse_inbox x JOIN pulse_tasks t ON t.id = x.task_id WHERE x.instance_id <> t.instance_id"""),
    Invariant("M-4.14", "each (namespace, instance, idempotency key) has at most one signal", """
        SELECT namespace_id FROM weave_signals GROUP BY namespace_id, instance_id, idempotency_key
        HAVING COUNT(*) > 1"""),
    # The same for a definition's publish (07-api: every POST that creates something takes a key): a key's audit
    # row is its one answer, and that answer names a version published with its document.
    Invariant("M-4.14b", "each (namespace, idempotency key) answers at most one publish, a version of its digest", """
        SELECT MIN(id) FROM weave_audit WHERE action = 'definition.publish' AND idempotency_key IS NOT NULL
         GROUP BY namespace_id, idempotency_key HAVING COUNT(*) > 1
        UNION ALL
        SELECT a.id FROM weave_audit a
          LEFT JOIN weave_definitions d
            ON d.namespace_id = a.namespace_id AND d.name = JSON_VALUE(a.response, '$.name')
           AND d.version = JSON_VALUE(a.response, '$.version') AND d.digest = a.request_digest
         WHERE a.action = 'definition.publish' AND a.idempotency_key IS NOT NULL AND d.id IS NULL"""),
    # And for the other admin POSTs that take a key: an app's or a queue's put, a credential's creation. A key's audit
    # row holds what it asked and answered, and a create's answer names a credential of its namespace.
    Invariant("M-4.14c", "each (namespace, kind, idempotency key) answers at most one app put, queue put or credential "
              "create, with its request and answer kept", """
        SELECT MIN(id) FROM weave_audit
         WHERE instance_id = 0 AND action IN ('app.put', 'queue.put', 'credential.create')
           AND idempotency_key IS NOT NULL
         GROUP BY namespace_id, action, idempotency_key HAVING COUNT(*) > 1
        UNION ALL
        SELECT a.id FROM weave_audit a
          LEFT JOIN weave_credentials c
            ON a.action = 'credential.create' AND c.namespace_id = a.namespace_id
           AND CONCAT('cred_', c.id) = JSON_VALUE(a.response, '$.credential_id')
         WHERE a.instance_id = 0 AND a.action IN ('app.put', 'queue.put', 'credential.create')
           AND a.idempotency_key IS NOT NULL
           AND (a.request_digest IS NULL OR a.response IS NULL
                OR (a.action = 'credential.create' AND c.id IS NULL))"""),
    Invariant("M-4.15", "an instance has at most 1024 signals", """
        SELECT instance_id FROM weave_signals GROUP BY instance_id HAVING COUNT(*) > 1024
        UNION ALL SELECT id FROM weave_instances WHERE signal_count > 1024"""),
    # each decision reads the clock after the instance lock, so per instance the stored times follow
    # commit order. These two make that visible: events never go back in time, and no earlier matching
    # on-time signal was passed over for the winner (S-11). A match that could never win is no rival: one
    # rejected LATE was at or after the deadline in force when it came, though a POLL's continue (C-4) may move
    # the deadline past it since, and an early one whose expires_at came before the wait opened had expired
    # (S-14), as _weave_signal_pick reads them.
    Invariant("M-4.16", "per instance, event occurred_at never decreases as seq grows", """
        SELECT e.instance_id FROM weave_events e
          JOIN weave_events p ON p.instance_id = e.instance_id AND p.seq = e.seq - 1
         WHERE e.occurred_at < p.occurred_at"""),
    Invariant("M-4.17", "a wait's winner is the first matching on-time signal by (accepted_at, id)", """
        SELECT w.id FROM weave_waits w
          JOIN weave_signals s ON s.id = w.winner_signal_id
          JOIN weave_signals o ON o.instance_id = w.instance_id AND o.target_step_key = w.step_key
                              AND o.target_activation_seq = w.activation_seq AND o.id <> s.id
                              AND o.name = s.name AND o.payload_version = s.payload_version
                              AND o.correlation_key = s.correlation_key
         WHERE (w.deadline_at IS NULL OR o.accepted_at < w.deadline_at)
           AND COALESCE(o.disposition, '') NOT IN ('ACCEPTANCE_PROOF_MISMATCH', 'LATE')
           AND o.expires_at > w.started_at
           AND (o.accepted_at < s.accepted_at OR (o.accepted_at = s.accepted_at AND o.id < s.id))"""),
    # a wait's checkpoint lives exactly as long as the wait: every end of a TIMER or SIGNAL wait removes it
    # (a settled step's goes with its close), so none is left behind to wake a step that no longer waits. A
    # checkpoint of an activation that is no longer current is stale, which its own run removes, and is not
    # looked at here; one whose runs keep failing stays, backing off, while its step waits in review.
    Invariant("M-4.18", "a TIMER or SIGNAL checkpoint of a current activation has its step ACTIVE, its wait WAITING",
              """
        SELECT c.id FROM weave_pending_advances c
          JOIN weave_steps s ON s.instance_id = c.instance_id AND s.step_key = c.step_key
                            AND s.activation_id = c.activation_id
          LEFT JOIN weave_waits w ON w.activation_id = c.activation_id AND w.kind = c.kind
         WHERE c.kind IN ('TIMER', 'SIGNAL')
           AND NOT (w.status <=> 'WAITING'
                    AND (s.status = 'ACTIVE' OR (s.status = 'NEEDS_REVIEW' AND c.attempts > 0)))"""),
    # the sums of /metrics fold each wait, signal and round by the time it became final, read on an index of
    # that time: one final without it would never be counted, one not final with it counted before its end.
    Invariant("M-4.19", "a wait has its settle time, a signal its final time, a round its decision time, exactly "
                        "when final", """
        SELECT id FROM weave_waits WHERE (status = 'WAITING') <> (settled_at IS NULL)
        UNION ALL
        SELECT id FROM weave_signals WHERE (status = 'PENDING') <> (consumed_at IS NULL)
        UNION ALL
        SELECT id FROM weave_poll_rounds WHERE (outcome = 'IN_FLIGHT') <> (decided_at IS NULL)"""),
    # a page of rounds or signals is cut by the sizes kept with the results and payloads; one that does not match
    # would cut a page past 8 MiB, or short of it.
    Invariant("M-4.19b", "a round's kept result size is its result's size, a signal's its payload's", """
        SELECT id FROM weave_poll_rounds
         WHERE result_bytes IS NOT NULL AND NOT result_bytes <=> OCTET_LENGTH(result)
        UNION ALL
        SELECT id FROM weave_signals
         WHERE payload_bytes IS NOT NULL AND NOT payload_bytes <=> OCTET_LENGTH(payload)"""),
    # new work is never left without a look. A step whose after-steps have all SUCCEEDED is activated by
    # the walk that made it ready, or the walk leaves the ROOT checkpoint to go on (more than a walk's budget, a
    # deferral for room, a pause): a RUNNING instance with a ready step and no ROOT checkpoint would stall, and
    # say nothing.
    Invariant("M-4.20", "a RUNNING instance with a ready PENDING step has its ROOT checkpoint", """
        SELECT DISTINCT i.id FROM weave_instances i
          JOIN weave_steps s ON s.instance_id = i.id AND s.status = 'PENDING'
         WHERE i.status = 'RUNNING'
           AND NOT EXISTS (SELECT 1 FROM weave_definition_edges e
                             JOIN weave_steps p ON p.instance_id = i.id AND p.step_key = e.after_key
                                               AND p.status <> 'SUCCEEDED'
                            WHERE e.definition_id = i.definition_id AND e.step_key = s.step_key)
           AND NOT EXISTS (SELECT 1 FROM weave_pending_advances c
                            WHERE c.instance_id = i.id AND c.step_key = '' AND c.kind = 'ROOT')"""),
    # what a step waits for is never left without a look, the converse of M-4.18. An open TIMER or SIGNAL
    # step of a live instance is woken by its checkpoint alone (its due time, its deadline), a POLL by its checkpoint
    # (its next round, its deadline) or by its round's task: without them, the step would wait past every deadline,
    # and the instance would say nothing.
    Invariant("M-4.21", "an ACTIVE TIMER, SIGNAL or POLL step of a live instance has its activation's checkpoint, or "
                        "a POLL its round's task", """
        SELECT s.id FROM weave_steps s
          JOIN weave_instances i ON i.id = s.instance_id AND i.status IN ('RUNNING', 'NEEDS_REVIEW')
         WHERE s.status = 'ACTIVE' AND s.type IN ('TIMER', 'SIGNAL', 'POLL')
           AND NOT EXISTS (SELECT 1 FROM weave_pending_advances c
                            WHERE c.instance_id = s.instance_id AND c.step_key = s.step_key
                              AND c.activation_id = s.activation_id)
           AND NOT (s.type = 'POLL' AND EXISTS (
                    SELECT 1 FROM pulse_tasks t
                     WHERE t.activation_id = s.activation_id
                       AND (t.status IN ('QUEUED', 'RUNNING')
                            OR EXISTS (SELECT 1 FROM pulse_inbox x
                                        WHERE x.task_id = t.id AND x.state = 'PENDING'))))"""),
    # K-7, R-18: an open TASK step is ended by its task's outcome, which every end of a task stores in the inbox: a
    # step whose task is gone, or whose ended task has no outcome there, would stay ACTIVE for ever.
    Invariant("M-4.22", "an ACTIVE TASK step has its task, and an ended task its outcome in the inbox", """
        SELECT s.id FROM weave_steps s
          JOIN weave_instances i ON i.id = s.instance_id AND i.status IN ('RUNNING', 'NEEDS_REVIEW')
         WHERE s.status = 'ACTIVE' AND s.type = 'TASK'
           AND (NOT EXISTS (SELECT 1 FROM pulse_tasks t WHERE t.activation_id = s.activation_id)
                OR EXISTS (SELECT 1 FROM pulse_tasks t
                            WHERE t.activation_id = s.activation_id AND t.status NOT IN ('QUEUED', 'RUNNING')
                              AND NOT EXISTS (SELECT 1 FROM pulse_inbox x WHERE x.task_id = t.id)))"""),
    # M-3: the review queue and the status figures find the instances in review by their status and show each with
    # its open reasons, waiting since the earliest. A CANCELLING or CANCELLED instance may keep a reason opened while
    # its cancel ran (the fact is kept): no one reviews it, and it is not in review.
    Invariant("M-4.23", "an instance is NEEDS_REVIEW exactly while it has an open review reason", """
        SELECT i.id FROM weave_instances i
         WHERE i.status IN ('RUNNING', 'SUCCEEDED', 'NEEDS_REVIEW')
           AND (i.status = 'NEEDS_REVIEW') <> EXISTS (SELECT 1 FROM weave_review_reasons r
                                                       WHERE r.instance_id = i.id AND r.closed_at IS NULL)"""),
    # C-4, R-18: a person can always end a review. A step's reason is closed by that step's reactivate or resolve,
    # which act on a step in review only; while a task of the instance is unsettled they wait for it (TASK_IN_FLIGHT),
    # and its outcome decides the step. The instance's own reasons are closed by deadline (INSTANCE_DEADLINE) and
    # retry (CANDIDATE_FAILING, OWNERSHIP_MISMATCH). A reason no action can close leaves a cancel the only way out.
    Invariant("M-4.24", "every open review reason of an instance in review is one an action can close", f"""
        SELECT r.id FROM weave_review_reasons r
          JOIN weave_instances i ON i.id = r.instance_id AND i.status = 'NEEDS_REVIEW'
          LEFT JOIN weave_steps s ON s.instance_id = r.instance_id AND s.step_key = r.step_key
         WHERE r.closed_at IS NULL
           AND IF(r.step_key = '', r.code NOT IN ('INSTANCE_DEADLINE', {", ".join(f"'{c}'" for c in RETRY_CLOSES)}),
                  NOT s.status <=> 'NEEDS_REVIEW'
                  AND NOT EXISTS (SELECT 1 FROM pulse_tasks t
                                   WHERE t.instance_id = i.id AND t.status IN ('QUEUED', 'RUNNING'))
                  AND NOT EXISTS (SELECT 1 FROM pulse_inbox x WHERE x.instance_id = i.id AND x.state = 'PENDING'))"""),
    # S-13, R-18: a signal accepted on time for an open wait whose step is in review is kept for that step's recovery,
    # looked at no more (weave_signal_process); every way out of the review answers it (reactivate, resolve, cancel)
    # or makes it due again (retry, continue). One kept past that would never be looked at again.
    Invariant("M-4.25", "a signal kept for its step's recovery targets an open wait of that step, in review", f"""
        SELECT g.id FROM weave_signals g
          LEFT JOIN weave_steps s ON s.instance_id = g.instance_id AND s.step_key = g.target_step_key
          LEFT JOIN weave_waits w ON w.activation_id = s.activation_id AND w.kind IN ('SIGNAL', 'POLL_FINAL')
         WHERE g.status = 'PENDING' AND g.available_at = '{KEPT_FOR_RECOVERY}'
           AND NOT (s.status <=> 'NEEDS_REVIEW' AND s.activation_seq <=> g.target_activation_seq
                    AND w.status <=> 'WAITING')"""),
)

BY_ID = {inv.id: inv for inv in INVARIANTS}


def violations(conn: Connection, skip: frozenset[str] | set[str] = frozenset()) -> dict[str, list]:
    """Every invariant that does not hold, with (up to 10 of) the offending row ids."""
    found: dict[str, list] = {}
    with conn.cursor() as cur:
        for inv in INVARIANTS:
            if inv.id in skip:
                continue
            cur.execute(inv.sql + " LIMIT 10" if "UNION" not in inv.sql else inv.sql)
            rows = cur.fetchall()
            if rows:
                found[inv.id] = [next(iter(r.values())) if isinstance(r, dict) else r[0] for r in rows[:10]]
    return found


def check(conn: Connection, skip: frozenset[str] | set[str] = frozenset()) -> None:
    broken = violations(conn, skip)
    if broken:
        lines = [f"{k} ({BY_ID[k].promise}): rows {v}" for k, v in broken.items()]
        raise AssertionError("M-4 invariants broken:\n  " + "\n  ".join(lines))
