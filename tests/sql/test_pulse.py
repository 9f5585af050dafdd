"""Pulse tasks (04-polls, K-1..K-7) and the TASK step, at the database level: routines called directly,
tables checked, the test clock moved. The M-4 invariants (M-4.5..M-4.8 are Pulse's) run after each test."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import threading
import time

import pytest

from procedures import db as dbmod
from procedures import errors, invariants, pulse, routines
from tests.benchmarks.bench_scan import seq
from tests.support.threads import run_threads
from tests.support.waiting import wait_for

HOUR = 3_600_000


def task_step(key="work", **fields) -> dict:
    step = {"key": key, "type": "TASK", "queue": "payments", "handler": "example.echo", "handler_version": "1",
            "input": {"order_id": "$.input.order_id"}}
    step.update(fields)
    return step


def task_flow(name="pay", **fields) -> dict:
    return {"name": name, "steps": [task_step(**fields)]}


def claim(world, worker="w1", limit=1, lease_ms=30_000, queues="payments", namespace=None) -> list[dict]:
    return pulse.task_claim(world.db.conn, worker, queues, limit=limit, lease_ms=lease_ms, namespace=namespace)


def task_of(world, wf: str, step_key: str = "work") -> dict:
    return world.db.row("SELECT * FROM pulse_tasks WHERE instance_id = %s AND step_key = %s ORDER BY id DESC LIMIT 1",
                        world.internal_id(wf), step_key)


def tid(public: str) -> int:
    return int(public.removeprefix("tsk_"))


def started(world, orch, definition="pay", n=1, input=None, **kw) -> list[str]:
    """Start n instances and run the orchestrator so that their TASK steps have created their tasks."""
    wfs = [world.start(definition, input if input is not None else {"order_id": f"o-{i}"}, **kw) for i in range(n)]
    orch.drain()
    return wfs


def cancel_task(world, task_id: int) -> str:
    world.db.execute("CALL _pulse_task_cancel(%s, %s, @outcome)", task_id, world.db.now())
    return world.db.scalar("SELECT @outcome")


def review_codes(world, wf: str) -> list[str]:
    return [r["code"] for r in world.instance(wf)["review_reasons"]]


# --- the TASK step --------------------------------------------------------------------------------------------
def test_TASK_step_creates_one_task_from_the_frozen_inputs(world, orch):
    world.publish(task_flow(priority=7, mutex_key="$.input.account", business_key="$.input.order_id",
                            retry={"max_attempts": 5, "initial_backoff_ms": 250, "backoff_coefficient": 1.5,
                                   "max_backoff_ms": 4000}, task_timeout_ms=20_000))
    wf = world.start("pay", {"order_id": "o-1", "account": "acc-9"})
    orch.drain()
    task = task_of(world, wf)
    act = world.db.row("SELECT id, started_at FROM weave_activations WHERE instance_id = %s", world.internal_id(wf))
    assert task["status"] == "QUEUED" and task["round_no"] == 0 and task["activation_id"] == act["id"]
    assert json.loads(task["input"]) == {"order_id": "o-1"}
    assert (task["handler"], task["handler_version"], task["priority"]) == ("example.echo", "1", 7)
    assert (task["business_key"], task["mutex_key"]) == ("o-1", "acc-9")
    assert (task["max_attempts"], task["initial_backoff_ms"], task["backoff_coefficient"], task["max_backoff_ms"]) \
        == (5, 250, 1.5, 4000)
    assert task["deadline_at"] == act["started_at"] + dt.timedelta(milliseconds=20_000)
    assert task["available_at"] == act["started_at"]
    activated = next(e for e in world.events(wf) if e["type"] == "STEP_ACTIVATED")
    assert activated["data"]["task_id"] == f"tsk_{task['id']}"
    assert world.db.scalar("SELECT COUNT(*) FROM weave_audit WHERE action = 'task.create'") == 1


def test_K6_task_deadline_is_capped_by_the_instance_deadline(world, orch):
    world.publish(task_flow(task_timeout_ms=60_000))
    wf, = started(world, orch, deadline_ms=5_000)
    deadline = world.db.scalar("SELECT deadline_at FROM weave_instances WHERE id = %s", world.internal_id(wf))
    assert task_of(world, wf)["deadline_at"] == deadline


def test_TASK_success_sets_the_output_verbatim_and_successors_follow(world, orch):
    world.publish({"name": "two", "steps": [
        task_step("first"),
        task_step("second", after=["first"], input={"prev": "$.steps.first.output.value", "n": 2})]})
    wf = world.start("two", {"order_id": "o-1"})
    orch.drain()
    got, = claim(world)
    pulse.attempt_complete(world.db.conn, got["attempt_id"], "w1", result_json='{"value": [1, 2.50, "x"], "z": null}')
    orch.drain()
    first = world.step(wf, "first")
    assert first["status"] == "SUCCEEDED" and first["output"] == {"value": [1, 2.5, "x"], "z": None}
    assert world.db.scalar("SELECT output FROM weave_steps WHERE step_key = 'first'") == \
        '{"value": [1, 2.50, "x"], "z": null}'
    second, = claim(world)
    assert json.loads(second["input"]) == {"prev": [1, 2.5, "x"], "n": 2}
    pulse.attempt_complete(world.db.conn, second["attempt_id"], "w1", "done")
    orch.drain()
    inst = world.instance(wf)
    assert inst["status"] == "SUCCEEDED" and inst["steps"][1]["output"] == "done"
    types = [e["type"] for e in world.events(wf)]
    assert types.count("TASK_SUCCEEDED") == 2 and types[-1] == "INSTANCE_SUCCEEDED"


# --- K-1 claim --------------------------------------------------------------------------------------------------
def test_K1_claim_orders_by_priority_then_available_time_then_id(world, orch):
    world.publish(task_flow("low", priority=0))
    world.publish(task_flow("high", priority=5))
    world.publish({"name": "pair", "steps": [task_step("a", priority=0), task_step("b", priority=0)]})
    low1, = started(world, orch, "low")
    world.db.advance(1_000)
    high, = started(world, orch, "high")
    world.db.advance(1_000)
    pair, = started(world, orch, "pair")
    world.db.advance(1_000)
    low2, = started(world, orch, "low")
    expected = [task_of(world, high)["id"], task_of(world, low1)["id"], task_of(world, pair, "a")["id"],
                task_of(world, pair, "b")["id"], task_of(world, low2)["id"]]
    assert task_of(world, pair, "a")["available_at"] == task_of(world, pair, "b")["available_at"]
    # One at a time and all at once give the same order.
    one_by_one = [tid(claim(world, worker=f"w{i}")[0]["task_id"]) for i in range(2)]
    rest = [tid(r["task_id"]) for r in claim(world, worker="w9", limit=10)]
    assert one_by_one + rest == expected


def test_K1_a_claim_over_several_queues_keeps_one_order_and_its_limit(world, orch):
    """Each queue's tasks are picked in claim order; the picks of several queues are merged into that one order,
    and only the first ``limit`` of them start (the rest stay QUEUED for the next claim)."""
    routines.queue_put(world.db.conn, world.admin, world.namespace, "refunds", 1000)
    routines.queue_put(world.db.conn, world.admin, world.namespace, "idle", 1000)  # nothing QUEUED in it
    world.publish(task_flow("pay-low", priority=0))
    world.publish(task_flow("refund-low", priority=0, queue="refunds"))
    world.publish(task_flow("refund-high", priority=5, queue="refunds"))
    order = []
    for definition in ("pay-low", "refund-low", "pay-low", "refund-high", "refund-low"):
        wf, = started(world, orch, definition)
        order.append((definition, task_of(world, wf)["id"]))
        world.db.advance(1_000)
    by_id = dict((task, name) for name, task in order)
    high = [task for name, task in order if name == "refund-high"]
    expected = high + [task for name, task in order if name != "refund-high"]
    first = [tid(r["task_id"]) for r in claim(world, worker="w1", limit=3, queues="payments,idle,refunds")]
    assert first == expected[:3], [by_id[t] for t in first]
    assert {r["status"] for r in world.db.rows("SELECT status FROM pulse_tasks WHERE id IN %s", expected[3:])} \
        == {"QUEUED"}
    rest = [tid(r["task_id"]) for r in claim(world, worker="w2", limit=10, queues="refunds,payments")]
    assert rest == expected[3:]
    assert claim(world, worker="w3", limit=10, queues="refunds,payments,idle") == []


@pytest.mark.breaks_invariants("M-4.22")  # its history is made by hand, with no outcomes
def test_K1_a_claim_reads_as_much_beside_a_long_history_and_many_namespaces(world, orch):
    """The claim's list of picked tasks drives its joins, so a claim reads what it takes and never what has
    been: finished tasks and other namespaces stay unread (a plan that started from either read all of it)."""
    world.publish(task_flow())
    first, _ = started(world, orch, n=2)
    db = world.db

    def reads_of_one_claim() -> int:
        def reads() -> int:
            return sum(int(r["Value"]) for r in db.rows("SHOW SESSION STATUS LIKE 'Handler_read%%'"))
        before = reads()
        assert len(claim(world)) == 1
        return reads() - before

    quiet = reads_of_one_claim()
    task = task_of(world, first)
    # 500 finished copies of that task: the history a claim must never read.
    kept = ("namespace_id, app_id, queue_id, instance_id, activation_id, handler, handler_version, input, priority, "
            "max_attempts, initial_backoff_ms, backoff_coefficient, max_backoff_ms, timeout_ms, deadline_at, "
            "available_at, created_at, updated_at")
    db.execute(f"INSERT INTO pulse_tasks ({kept}, step_key, status, attempts_used) "
               f"SELECT {kept}, 'history', 'CANCELLED', 0 FROM pulse_tasks, {seq(500)} AND pulse_tasks.id = %s",
               task["id"])
    db.execute("INSERT INTO weave_namespaces (name, created_at) SELECT CONCAT('elsewhere-', id), created_at "
               "FROM pulse_tasks WHERE step_key = 'history'")
    db.execute("ANALYZE TABLE pulse_tasks, weave_namespaces")
    busy = reads_of_one_claim()
    assert busy <= quiet + 4, (quiet, busy)


def test_K1_a_task_whose_mutex_key_is_held_is_skipped(world, orch):
    world.publish(task_flow(mutex_key="$.input.account"))
    a, b, c = (world.start("pay", {"order_id": f"o-{i}", "account": acc}) for i, acc in enumerate(["x", "x", "y"]))
    orch.drain()
    first = claim(world, limit=1)
    assert [tid(r["task_id"]) for r in first] == [task_of(world, a)["id"]]
    # b shares a's key, which a's running attempt holds: c is claimed instead, b waits.
    assert [tid(r["task_id"]) for r in claim(world, limit=10)] == [task_of(world, c)["id"]]
    assert claim(world, limit=10) == []
    pulse.attempt_complete(world.db.conn, first[0]["attempt_id"], "w1", {"ok": True})
    assert [tid(r["task_id"]) for r in claim(world, limit=10)] == [task_of(world, b)["id"]]


def test_K1_one_claim_never_starts_two_tasks_with_one_mutex_key(world, orch):
    world.publish(task_flow(mutex_key="$.input.account"))
    for i in range(3):
        world.start("pay", {"order_id": f"o-{i}", "account": "same"})
    orch.drain()
    assert len(claim(world, limit=10)) == 1
    assert world.db.scalar("SELECT COUNT(*) FROM pulse_attempts") == 1


@pytest.mark.parametrize("queues", ["one", "two"])
def test_K1_a_task_skipped_for_a_key_its_own_claim_took_leaves_room_for_the_next_in_order(world, orch, queues):
    """A claim for N tasks takes N when N can start: a task whose mutex key the same claim has just taken is skipped,
    and the next tasks in claim order take its place (with one queue and across queues). A claim that comes back
    short has taken every task it could reach, which is what a worker relies on before it rests."""
    routines.queue_put(world.db.conn, world.admin, world.namespace, "refunds", 1000)
    world.publish(task_flow("pay", mutex_key="$.input.account"))
    world.publish(task_flow("refund", mutex_key="$.input.account", queue="refunds" if queues == "two" else "payments"))
    order = []
    for definition, account in (("pay", "x"), ("pay", "x"), ("refund", "x"), ("refund", "y"), ("pay", "z"),
                                ("refund", "w")):
        order.append((world.start(definition, {"order_id": f"o-{len(order)}", "account": account}), account))
        world.db.advance(10)
    orch.drain()
    ids = [task_of(world, wf)["id"] for wf, _ in order]
    got = claim(world, limit=3, queues="payments,refunds")
    assert [tid(r["task_id"]) for r in got] == [ids[0], ids[3], ids[4]]  # x, then y and z in place of the two x
    assert world.db.scalar("SELECT COUNT(*) FROM pulse_attempts") == 3
    assert [tid(r["task_id"]) for r in claim(world, worker="w2", limit=10, queues="payments,refunds")] == [ids[5]]
    pulse.attempt_complete(world.db.conn, got[0]["attempt_id"], "w1", {"n": 1})
    assert [tid(r["task_id"]) for r in claim(world, worker="w3", limit=10, queues="payments,refunds")] == [ids[1]]


def test_K1_K4_K5_a_mutex_key_is_held_across_queues_until_its_attempt_s_end_is_recorded(world, orch):
    """A key is one per namespace, whatever the queue: a refund never runs beside a payment of the same account. A
    running attempt keeps its key after cancellation was asked (K-5) and after its lease ran out, until Pulse records
    its end: the worker may still be acting on it. The lost lease's recovery (K-4) lets the key go."""
    routines.queue_put(world.db.conn, world.admin, world.namespace, "refunds", 1000)
    world.publish(task_flow("pay", mutex_key="$.input.account", task_timeout_ms=HOUR))
    world.publish(task_flow("refund", mutex_key="$.input.account", queue="refunds", task_timeout_ms=HOUR))
    pay = world.start("pay", {"order_id": "o-1", "account": "x"})
    refund = world.start("refund", {"order_id": "o-2", "account": "x"})
    orch.drain()
    got, = claim(world, limit=10, queues="payments,refunds", lease_ms=1_000)
    assert tid(got["task_id"]) == task_of(world, pay)["id"]
    assert claim(world, worker="w2", limit=10, queues="refunds") == []
    assert cancel_task(world, task_of(world, pay)["id"]) == "REQUESTED"
    world.db.advance(1_001)  # the lease has run out, not yet recovered
    assert claim(world, worker="w2", limit=10, queues="refunds") == []
    assert orch.drain()["LEASE:UNKNOWN"] == 1
    assert [tid(r["task_id"]) for r in claim(world, worker="w2", limit=10, queues="refunds")] == \
        [task_of(world, refund)["id"]]


def test_K1_mutex_keys_are_per_namespace(world, orch, db):
    from tests.support.world import World

    other = World.create(db, "globex")
    for w in (world, other):
        w.publish(task_flow(mutex_key="$.input.account"))
        w.start("pay", {"order_id": "o", "account": "shared"})
    orch.drain()
    got = claim(world, limit=10)
    assert sorted(r["namespace"] for r in got) == ["acme", "globex"]


def test_K1_claim_starts_attempt_with_lease_and_permit(world, orch):
    world.publish(task_flow(mutex_key="$.input.order_id"))
    wf, = started(world, orch)
    got, = claim(world, worker="worker-a", lease_ms=12_345)
    task = task_of(world, wf)
    assert got["task_id"] == f"tsk_{task['id']}" and got["workflow_id"] == wf and got["namespace"] == "acme"
    assert (got["queue"], got["handler"], got["handler_version"], got["attempt_no"]) == \
        ("payments", "example.echo", "1", 1)
    assert json.loads(got["input"]) == {"order_id": "o-0"} and got["deadline_at"] == task["deadline_at"]
    assert got["lease_expires_at"] == got["started_at"] + dt.timedelta(milliseconds=12_345)
    attempt = world.db.row("SELECT * FROM pulse_attempts WHERE id = %s", got["attempt_id"])
    assert (attempt["status"], attempt["worker_id"], attempt["attempt_no"]) == ("RUNNING", "worker-a", 1)
    permit = world.db.row("SELECT * FROM pulse_permits WHERE attempt_id = %s", got["attempt_id"])
    assert permit["released_at"] is None and permit["mutex_held"] == "o-0" and permit["task_id"] == task["id"]
    assert (task["status"], task["attempts_used"]) == ("RUNNING", 1)


@pytest.mark.breaks_invariants("M-4.6")
@pytest.mark.parametrize("report", ["complete", "fail", "lease"])
def test_M4_6_an_attempt_without_its_permit_never_ends_and_changes_nothing(world, orch, report):
    """The end of an attempt and the release of its permit are one statement: when the permit is gone (released
    out of band), the report is refused as INVALID_STATE and neither the attempt nor the task moves."""
    world.publish(task_flow())
    wf, = started(world, orch)
    got, = claim(world, lease_ms=1_000)
    world.db.execute("UPDATE pulse_permits SET released_at = %s, mutex_held = NULL WHERE attempt_id = %s",
                     world.db.now(), got["attempt_id"])
    with pytest.raises(errors.InvalidState, match="holds no execution permit"):
        if report == "complete":
            pulse.attempt_complete(world.db.conn, got["attempt_id"], "w1", {"ok": True})
        elif report == "fail":
            pulse.attempt_fail(world.db.conn, got["attempt_id"], "w1", "boom", retryable=True)
        else:
            world.db.advance(1_001)
            pulse.lease_recover(world.db.conn, got["attempt_id"])
    attempt = world.db.row("SELECT status, ended_at FROM pulse_attempts WHERE id = %s", got["attempt_id"])
    assert (attempt["status"], attempt["ended_at"]) == ("RUNNING", None)
    assert task_of(world, wf)["status"] == "RUNNING"
    assert world.db.scalar("SELECT COUNT(*) FROM pulse_inbox") == 0


@pytest.mark.breaks_invariants("M-4.6")
def test_M4_6_a_released_permit_that_still_holds_its_mutex_key_is_a_broken_invariant(world, orch):
    """The unique index keeps a key exclusive only while permits give it up as they are released: a released permit
    that kept its key would keep every task of that key from starting, for good, with every other invariant holding."""
    world.publish(task_flow(mutex_key="$.input.account"))
    first = world.start("pay", {"order_id": "o-1", "account": "x"})
    world.start("pay", {"order_id": "o-2", "account": "x"})
    orch.drain()
    got, = claim(world, limit=10)
    pulse.attempt_complete(world.db.conn, got["attempt_id"], "w1", {"n": 1})
    assert world.instance(first)["status"] == "SUCCEEDED" and invariants.violations(world.db.conn) == {}
    world.db.execute("UPDATE pulse_permits SET mutex_held = mutex_key WHERE attempt_id = %s", got["attempt_id"])
    assert invariants.violations(world.db.conn) == {"M-4.6": [got["attempt_id"]]}
    assert claim(world, limit=10) == []  # what the broken invariant costs: the key's next task never starts


@pytest.mark.breaks_invariants("M-4.5", "M-4.6")
def test_K3_a_report_of_an_attempt_whose_task_is_missing_is_refused(world, orch):
    world.publish(task_flow())
    started(world, orch)
    got, = claim(world)
    world.db.execute("UPDATE pulse_attempts SET task_id = task_id + 1000 WHERE id = %s", got["attempt_id"])
    with pytest.raises(errors.InvalidState, match="task does not exist"):
        pulse.attempt_complete(world.db.conn, got["attempt_id"], "w1", {"ok": True})
    assert world.db.scalar("SELECT status FROM pulse_attempts WHERE id = %s", got["attempt_id"]) == "RUNNING"


def test_K1_two_workers_never_claim_the_same_task(world, orch, database):
    world.publish(task_flow())
    for i in range(60):
        world.start("pay", {"order_id": f"o-{i}"})
    orch.drain()
    claimed: list[str] = []
    lock = threading.Lock()
    barrier = threading.Barrier(4)

    def worker(n: int) -> None:
        from procedures import db as dbmod

        conn = dbmod.connect(database)
        try:
            barrier.wait()
            while True:
                got = pulse.task_claim(conn, f"w{n}", "payments", limit=3, lease_ms=60_000)
                if not got:
                    return
                with lock:
                    claimed.extend(r["task_id"] for r in got)
        finally:
            conn.close()

    run_threads(worker, 4)
    assert len(claimed) == 60 and len(set(claimed)) == 60
    assert world.db.scalar("SELECT COUNT(*) FROM pulse_attempts") == 60
    assert world.db.scalar("SELECT MAX(attempts_used) FROM pulse_tasks") == 1


def test_K1_a_worker_reads_back_its_running_attempts_as_its_claims_answered_them(world, orch):
    """pulse_worker_attempts: what a worker whose claim lost its answer runs. The worker's RUNNING attempts, in
    claim order, in the claim's own columns; not another worker's, not one that ended."""
    world.publish(task_flow())
    started(world, orch, n=3)
    mine = claim(world, worker="w1", limit=2)
    theirs = claim(world, worker="w2", limit=1)
    assert pulse.worker_attempts(world.db.conn, "w1") == mine
    assert pulse.worker_attempts(world.db.conn, "w2") == theirs
    pulse.attempt_complete(world.db.conn, mine[0]["attempt_id"], "w1", {"ok": True})
    assert pulse.worker_attempts(world.db.conn, "w1") == mine[1:]
    assert pulse.worker_attempts(world.db.conn, "nobody") == []
    # Only those started since a time: a process that reuses the worker id of one that died never gets its attempts.
    world.db.advance(1000)
    assert pulse.worker_attempts(world.db.conn, "w1", world.db.now()) == []
    assert pulse.worker_attempts(world.db.conn, "w1", mine[1]["started_at"]) == mine[1:]
    with pytest.raises(errors.ValidationFailed) as exc:
        pulse.worker_attempts(world.db.conn, "")
    assert exc.value.field_code == "WORKER_ID_INVALID"


def test_K1_validation_errors_carry_their_codes(world):
    with pytest.raises(errors.ValidationFailed) as exc:
        pulse.task_claim(world.db.conn, "", "payments")
    assert exc.value.field_code == "WORKER_ID_INVALID"
    with pytest.raises(errors.ValidationFailed) as exc:
        pulse.task_claim(world.db.conn, "w", "payments", lease_ms=0)
    assert exc.value.field_code == "LEASE_INVALID"
    with pytest.raises(errors.ValidationFailed) as exc:
        pulse.task_claim(world.db.conn, "w", "payments", limit=0)
    assert exc.value.field_code == "LIMIT_INVALID"
    with pytest.raises(errors.ValidationFailed) as exc:
        pulse.task_claim(world.db.conn, "w", " ")
    assert exc.value.field_code == "QUEUES_INVALID"
    # Not a list of queue names: a quote, an empty name, a name longer than any queue's (the rule of every list).
    for queues in ('payments,"mail', "payments,,mail", "payments,", "q" * 65):
        with pytest.raises(errors.ValidationFailed) as exc:
            pulse.task_claim(world.db.conn, "w", queues)
        assert exc.value.field_code == "QUEUES_INVALID", queues


def test_K8_unknown_queue_or_namespace_finds_nothing_and_is_no_error(world, orch):
    world.publish(task_flow())
    started(world, orch)
    assert claim(world, queues="nope") == []
    assert claim(world, queues="nope,payments", namespace="ghost") == []
    assert len(claim(world, queues="nope, payments", namespace="acme")) == 1


def _claim_reads(world, **kwargs) -> int:
    """Index entries and rows the storage engine handed up for one claim (deterministic: no timing)."""
    conn = world.db.conn
    read = "SHOW SESSION STATUS WHERE Variable_name LIKE 'Handler\\_read\\_%%'"
    with conn.cursor() as cur:
        cur.execute(read)
        before = sum(int(r["Value"]) for r in cur.fetchall())
        found = claim(world, **kwargs)
        cur.execute(read)
        after = sum(int(r["Value"]) for r in cur.fetchall())
    assert found == []
    return after - before


def test_K1_a_claim_reads_the_queues_it_names_and_no_others(world):
    """An idle worker claims every few hundred milliseconds: its claim looks its queues up by name, so what it
    reads does not grow with the queues of other names or of other namespaces (a claim that matched every queue
    row against its list read them all: 3,001 rows for one queue among 1,000 namespaces of three queues each)."""
    _claim_reads(world)  # the routine loaded (its first call reads its definition)
    base = {"namespace": _claim_reads(world, namespace="acme"), "every": _claim_reads(world)}
    world.db.execute("INSERT INTO weave_namespaces (name, created_at) "
                     f"SELECT CONCAT('tenant-', n), NOW(6) FROM {seq(300)}")
    world.db.execute("INSERT INTO weave_queues (namespace_id, name, capacity, created_at, updated_at) "
                     "SELECT n.id, q.name, 10, NOW(6), NOW(6) FROM weave_namespaces n CROSS JOIN "
                     "(SELECT 'mail' AS name UNION ALL SELECT 'reports' UNION ALL SELECT 'exports') q "
                     "WHERE n.name LIKE 'tenant-%%'")
    assert world.db.scalar("SELECT COUNT(*) FROM weave_queues") == 901
    # No more rows, 900 queues later (one fewer where the server's statistics, recounted after the inserts, let the
    # optimizer start from the other end of its join: seen once in CI).
    assert _claim_reads(world, namespace="acme") <= base["namespace"]
    assert _claim_reads(world) <= base["every"]  # no other queue is named "payments"
    world.db.execute("INSERT INTO weave_queues (namespace_id, name, capacity, created_at, updated_at) "
                     "SELECT id, 'payments', 10, NOW(6), NOW(6) FROM weave_namespaces WHERE name LIKE 'tenant-%%'")
    assert _claim_reads(world, namespace="acme") <= base["namespace"]
    # Across namespaces a claim looks at every queue of the name it serves, and at no other.
    assert base["every"] + 300 <= _claim_reads(world) <= base["every"] + 3 * 300
    # The queues written here by hand get the release stripes that provisioning gives every queue (M-4.7b).
    world.db.execute("INSERT INTO pulse_slot_releases (owner_kind, owner_id, stripe, released) "
                     f"SELECT 'QUEUE', q.id, s.n - 1, 0 FROM weave_queues q CROSS JOIN {seq(16)} AND q.id NOT IN "
                     "(SELECT owner_id FROM pulse_slot_releases WHERE owner_kind = 'QUEUE')")


# --- K-2 heartbeat ------------------------------------------------------------------------------------------------
def test_K2_heartbeat_extends_the_lease_and_tells_about_cancellation(world, orch):
    world.publish(task_flow())
    wf, = started(world, orch)
    got, = claim(world, lease_ms=5_000)
    world.db.advance(4_000)
    beat = pulse.attempt_heartbeat(world.db.conn, got["attempt_id"], "w1", 5_000)
    assert beat["cancel_requested"] is False
    assert beat["lease_expires_at"] == world.db.row(
        "SELECT lease_expires_at FROM pulse_attempts WHERE id = %s", got["attempt_id"])["lease_expires_at"]
    assert beat["lease_expires_at"] > got["lease_expires_at"]
    world.db.advance(3_000)  # past the first lease, within the extended one
    assert orch.drain()["LEASE:UNKNOWN"] == 0
    assert cancel_task(world, task_of(world, wf)["id"]) == "REQUESTED"
    assert pulse.attempt_heartbeat(world.db.conn, got["attempt_id"], "w1", 5_000)["cancel_requested"] is True


def test_K2_heartbeat_of_an_attempt_that_is_not_yours_or_not_running_is_refused(world, orch):
    world.publish(task_flow())
    started(world, orch)
    got, = claim(world, lease_ms=1_000)
    with pytest.raises(errors.AttemptNotCurrent):
        pulse.attempt_heartbeat(world.db.conn, got["attempt_id"], "intruder", 1_000)
    world.db.advance(1_001)
    orch.drain()
    with pytest.raises(errors.AttemptNotCurrent):
        pulse.attempt_heartbeat(world.db.conn, got["attempt_id"], "w1", 1_000)
    with pytest.raises(errors.NotFound):
        pulse.attempt_heartbeat(world.db.conn, 999_999, "w1", 1_000)


# --- K-3 reports -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("instance", ["free", "held"])
def test_K3_success_settles_the_task_releases_the_permit_and_writes_the_inbox(world, orch, instance):
    """With its instance free, the report consumes its own inbox event at once (Settle at Report, K-7): the step
    has its output when the worker hears SUCCEEDED. With the instance held by another transaction (the engine
    deciding about it), the event waits PENDING and the orchestrator consumes it."""
    world.publish(task_flow())
    wf, = started(world, orch)
    got, = claim(world)
    world.db.advance(250)
    with world.held(wf) if instance == "held" else contextlib.nullcontext():
        answer = pulse.attempt_complete(world.db.conn, got["attempt_id"], "w1", {"status": "PAID"})
    assert answer["outcome"] == "SUCCEEDED" and answer["task_status"] == "SUCCEEDED"
    task = task_of(world, wf)
    attempt = world.db.row("SELECT * FROM pulse_attempts WHERE id = %s", got["attempt_id"])
    permit = world.db.row("SELECT * FROM pulse_permits WHERE attempt_id = %s", got["attempt_id"])
    inbox = world.db.row("SELECT * FROM pulse_inbox WHERE task_id = %s", task["id"])
    assert attempt["status"] == "SUCCEEDED" and permit["released_at"] == attempt["ended_at"]
    assert json.loads(task["result"]) == {"status": "PAID"}
    assert inbox["occurred_at"] == attempt["ended_at"] == task["finished_at"]
    if instance == "free":
        assert (inbox["kind"], inbox["state"], inbox["consumed_at"]) == ("SUCCEEDED", "CONSUMED", inbox["occurred_at"])
        assert world.step(wf, "work")["output"] == {"status": "PAID"}
        assert world.instance(wf)["status"] == "SUCCEEDED"
        assert not any(k.startswith("INBOX:") for k in orch.drain())  # nothing left for the orchestrator
        return
    assert (inbox["kind"], inbox["state"]) == ("SUCCEEDED", "PENDING")
    assert world.step(wf, "work")["status"] == "ACTIVE"
    assert orch.drain()["INBOX:SUCCEEDED"] == 1
    assert world.step(wf, "work")["output"] == {"status": "PAID"}
    assert world.db.row("SELECT state, consumed_at FROM pulse_inbox")["state"] == "CONSUMED"


def test_K3_retries_follow_the_frozen_backoff_exactly(world, orch):
    retry = {"max_attempts": 4, "initial_backoff_ms": 1_000, "backoff_coefficient": 3.0, "max_backoff_ms": 5_000}
    world.publish(task_flow(retry=retry, task_timeout_ms=HOUR))
    wf, = started(world, orch)
    # The definition changes after the task was created: the task keeps its frozen policy.
    world.publish(task_flow(retry={**retry, "initial_backoff_ms": 10}, task_timeout_ms=HOUR))
    expected_backoffs = [1_000, 3_000, 5_000]  # min(1000 * 3^(k-1), 5000) for k = 1, 2, 3
    for k, backoff in enumerate(expected_backoffs, start=1):
        got, = claim(world)
        assert got["attempt_no"] == k
        world.db.advance(100)
        answer = pulse.attempt_fail(world.db.conn, got["attempt_id"], "w1", f"timeout {k}", retryable=True)
        assert answer["outcome"] == "RETRY_SCHEDULED" and answer["task_status"] == "QUEUED"
        ended = world.db.scalar("SELECT ended_at FROM pulse_attempts WHERE id = %s", got["attempt_id"])
        task = task_of(world, wf)
        assert task["available_at"] == ended + dt.timedelta(milliseconds=backoff) == answer["available_at"]
        assert world.db.scalar("SELECT COUNT(*) FROM pulse_inbox") == 0  # no inbox event for a retry
        assert world.db.scalar("SELECT released_at FROM pulse_permits WHERE attempt_id = %s", got["attempt_id"])
        world.db.advance(backoff - 200)  # real time runs under the test clock too: keep a margin
        assert claim(world) == []  # not before its time
        world.db.advance(200)
    got, = claim(world)
    assert got["attempt_no"] == 4
    answer = pulse.attempt_fail(world.db.conn, got["attempt_id"], "w1", "timeout 4", retryable=True)
    assert answer["outcome"] == "FAILED" and answer["available_at"] is None
    inbox = world.db.row("SELECT kind, result, state FROM pulse_inbox")
    assert inbox["kind"] == "FAILED" and json.loads(inbox["result"])["reason"] == "ATTEMPTS_EXHAUSTED"
    assert inbox["state"] == "CONSUMED"  # the last attempt's report took the instance and settled the failure
    orch.drain()
    inst = world.instance(wf)
    assert inst["status"] == "NEEDS_REVIEW" and inst["gate"] == "CLOSED"
    assert inst["steps"][0]["status"] == "NEEDS_REVIEW"
    assert world.db.scalar("SELECT ended_at FROM weave_activations WHERE instance_id = %s",
                           world.internal_id(wf)) is not None  # the activation ends with the step's review
    reason, = inst["review_reasons"]
    assert reason["code"] == "TASK_FAILED" and reason["step_key"] == "work"
    assert reason["detail"]["attempts_used"] == 4 and reason["detail"]["last_error"] == "timeout 4"
    assert world.db.scalar("SELECT COUNT(*) FROM pulse_attempts") == 4


def test_K3_non_retryable_failure_fails_at_once(world, orch):
    world.publish(task_flow())
    wf, = started(world, orch)
    got, = claim(world)
    answer = pulse.attempt_fail(world.db.conn, got["attempt_id"], "w1", "card declined", retryable=False)
    assert answer["outcome"] == "FAILED"
    orch.drain()
    reason, = world.instance(wf)["review_reasons"]
    assert reason["code"] == "TASK_FAILED"
    assert reason["detail"]["outcome"]["reason"] == "NON_RETRYABLE" and reason["detail"]["attempts_used"] == 1
    assert "TASK_FAILED" in [e["type"] for e in world.events(wf)]


def test_K3_a_retry_that_could_not_start_before_the_deadline_is_final(world, orch):
    """A retryable failure with attempts left takes no lock of its instance's (it would only requeue the task); when
    the deadline ends the task after all, its outcome waits in the inbox and the candidate path settles it."""
    world.publish(task_flow(task_timeout_ms=1_500))
    wf, = started(world, orch)
    got, = claim(world)
    world.db.advance(600)  # next start would be at +1600 ms, after the deadline at +1500 ms
    answer = pulse.attempt_fail(world.db.conn, got["attempt_id"], "w1", "flaky", retryable=True)
    assert (answer["outcome"], answer["task_status"]) == ("FAILED", "FAILED")
    inbox = world.db.row("SELECT result, state FROM pulse_inbox")
    assert json.loads(inbox["result"])["reason"] == "DEADLINE" and inbox["state"] == "PENDING"
    assert orch.drain()["INBOX:REVIEW"] == 1
    reason, = world.instance(wf)["review_reasons"]
    assert reason["code"] == "TASK_FAILED" and reason["detail"]["outcome"]["reason"] == "DEADLINE"


def test_K3_only_the_holder_of_the_attempt_can_report(world, orch):
    world.publish(task_flow())
    wf, = started(world, orch)
    got, = claim(world)
    before = world.db.table_counts()
    with pytest.raises(errors.AttemptNotCurrent):
        pulse.attempt_complete(world.db.conn, got["attempt_id"], "intruder", {"x": 1})
    with pytest.raises(errors.AttemptNotCurrent):
        pulse.attempt_fail(world.db.conn, got["attempt_id"], "intruder", "no")
    with pytest.raises(errors.NotFound):
        pulse.attempt_complete(world.db.conn, 999_999, "w1", {"x": 1})
    with pytest.raises(errors.ValidationFailed) as exc:
        pulse.attempt_complete(world.db.conn, got["attempt_id"], "w1", result_json="{not json")
    assert exc.value.field_code == "RESULT_INVALID"
    assert world.db.table_counts() == before and task_of(world, wf)["status"] == "RUNNING"


def test_K3_report_of_an_attempt_that_is_no_longer_current_is_stored_and_changes_nothing(world, orch):
    world.publish(task_flow(task_timeout_ms=HOUR))
    wf, = started(world, orch)
    first, = claim(world)
    pulse.attempt_fail(world.db.conn, first["attempt_id"], "w1", "try again", retryable=True)
    world.db.advance(1_000)
    second, = claim(world, worker="w2")
    before = task_of(world, wf)
    answer = pulse.attempt_complete(world.db.conn, first["attempt_id"], "w1", {"late": True})
    assert answer["outcome"] == "LATE" and answer["task_status"] == "RUNNING"
    late = world.db.row("SELECT * FROM pulse_late_reports")
    assert (late["attempt_id"], late["worker_id"], late["kind"]) == (first["attempt_id"], "w1", "SUCCEEDED")
    assert json.loads(late["body"]) == {"late": True}
    assert task_of(world, wf) == before
    assert world.db.scalar("SELECT COUNT(*) FROM pulse_inbox") == 0
    assert pulse.attempt_complete(world.db.conn, second["attempt_id"], "w2", 1)["outcome"] == "SUCCEEDED"


# --- K-4 lost leases ----------------------------------------------------------------------------------------------
def test_K4_lost_lease_ends_unknown_and_is_never_retried(world, orch):
    world.publish(task_flow(task_timeout_ms=HOUR, retry={"max_attempts": 5}))
    wf, = started(world, orch)
    got, = claim(world, lease_ms=5_000)
    world.db.advance(4_500)
    assert orch.drain()["LEASE:UNKNOWN"] == 0
    world.db.advance(600)
    outcomes = orch.drain()
    assert outcomes["LEASE:UNKNOWN"] == 1 and outcomes["INBOX:REVIEW"] == 1
    attempt = world.db.row("SELECT * FROM pulse_attempts WHERE id = %s", got["attempt_id"])
    task = task_of(world, wf)
    inbox = world.db.row("SELECT * FROM pulse_inbox")
    assert attempt["status"] == "UNKNOWN" and attempt["error"] == "LEASE_LOST"
    assert task["status"] == "UNKNOWN" and task["attempts_used"] == 1
    assert world.db.scalar("SELECT released_at FROM pulse_permits") == attempt["ended_at"]
    assert inbox["kind"] == "UNKNOWN" and inbox["occurred_at"] == attempt["lease_expires_at"]
    inst = world.instance(wf)
    assert inst["status"] == "NEEDS_REVIEW" and review_codes(world, wf) == ["TASK_UNKNOWN"]
    assert inst["review_reasons"][0]["detail"]["outcome"]["worker_id"] == "w1"
    world.db.advance(HOUR // 2)
    orch.drain()
    assert claim(world, limit=10) == []
    assert world.db.scalar("SELECT COUNT(*) FROM pulse_attempts") == 1


def test_K4_late_report_from_a_lost_attempt_is_stored_and_ignored(world, orch):
    world.publish(task_flow())
    wf, = started(world, orch)
    got, = claim(world, lease_ms=1_000)
    world.db.advance(1_001)
    orch.drain()
    events = len(world.events(wf))
    answer = pulse.attempt_complete(world.db.conn, got["attempt_id"], "w1", {"status": "PAID"})
    assert answer["outcome"] == "LATE" and answer["task_status"] == "UNKNOWN"
    fail = pulse.attempt_fail(world.db.conn, got["attempt_id"], "w1", "boom", retryable=True)
    assert fail["outcome"] == "LATE"
    assert world.db.scalar("SELECT COUNT(*) FROM pulse_late_reports") == 2
    orch.drain()
    assert task_of(world, wf)["status"] == "UNKNOWN" and task_of(world, wf)["result"] is None
    assert len(world.events(wf)) == events and world.step(wf, "work")["status"] == "NEEDS_REVIEW"


def test_K3_a_report_sent_again_after_its_answer_was_lost_answers_as_the_first_and_stores_nothing(world, orch):
    """A report whose answer was lost after its commit (a connection cut, a failover) is sent again by the worker.
    It was kept as a late report and answered LATE, which says the lease had been lost: the worker warned, and
    people looked for a result that had been recorded. The same end from the same worker answers as the first did;
    a different one is still a late report that changes nothing."""
    world.publish(task_flow(retry={"max_attempts": 2, "initial_backoff_ms": 1_000}))
    done, retried, failed = started(world, orch, n=3)
    paid = {"status": "PAID", "amount": 12.5}
    got = {c["workflow_id"]: c for c in claim(world, limit=3)}

    first = pulse.attempt_complete(world.db.conn, got[done]["attempt_id"], "w1", paid)
    again = pulse.attempt_complete(world.db.conn, got[done]["attempt_id"], "w1", paid)
    assert first["outcome"] == again["outcome"] == "SUCCEEDED" and again["task_status"] == "SUCCEEDED"
    other = pulse.attempt_complete(world.db.conn, got[done]["attempt_id"], "w1", {"status": "PAID", "amount": 13})
    assert other["outcome"] == "LATE"

    first = pulse.attempt_fail(world.db.conn, got[retried]["attempt_id"], "w1", "PSP 503", retryable=True)
    again = pulse.attempt_fail(world.db.conn, got[retried]["attempt_id"], "w1", "PSP 503", retryable=True)
    assert (first["outcome"], first["task_status"]) == (again["outcome"], again["task_status"]) == \
        ("RETRY_SCHEDULED", "QUEUED")
    world.db.advance(1_000)
    claim(world)  # the retry runs: the first attempt's report, sent again, still answers what it decided
    assert pulse.attempt_fail(world.db.conn, got[retried]["attempt_id"], "w1", "PSP 503",
                              retryable=True)["outcome"] == "RETRY_SCHEDULED"
    # A retry scheduled, then the queued task cancelled: the report sent again still answers the retry it scheduled.
    world.publish(task_flow("cancelled-later", retry={"max_attempts": 2, "initial_backoff_ms": 1_000}))
    (later,) = started(world, orch, "cancelled-later")
    (attempt,) = claim(world)
    pulse.attempt_fail(world.db.conn, attempt["attempt_id"], "w1", "PSP 503", retryable=True)
    assert cancel_task(world, task_of(world, later)["id"]) == "CANCELLED"
    again = pulse.attempt_fail(world.db.conn, attempt["attempt_id"], "w1", "PSP 503", retryable=True)
    assert (again["outcome"], again["task_status"]) == ("RETRY_SCHEDULED", "QUEUED")

    first = pulse.attempt_fail(world.db.conn, got[failed]["attempt_id"], "w1", "declined", retryable=False)
    again = pulse.attempt_fail(world.db.conn, got[failed]["attempt_id"], "w1", "declined", retryable=False)
    assert (first["outcome"], first["task_status"]) == (again["outcome"], again["task_status"]) == ("FAILED", "FAILED")

    assert world.db.rows("SELECT kind, body FROM pulse_late_reports") == [
        {"kind": "SUCCEEDED", "body": '{"status":"PAID","amount":13}'}]
    assert task_of(world, done)["result"] == '{"status":"PAID","amount":12.5}'
    orch.drain()
    assert world.instance(done)["status"] == "SUCCEEDED" and world.instance(failed)["status"] == "NEEDS_REVIEW"


# --- K-5 cancel ---------------------------------------------------------------------------------------------------
def test_K5_cancel_of_a_queued_task_is_immediate(world, orch):
    world.publish(task_flow())
    wf, = started(world, orch)
    task = task_of(world, wf)
    assert cancel_task(world, task["id"]) == "CANCELLED"
    assert task_of(world, wf)["status"] == "CANCELLED"
    assert world.db.row("SELECT kind, state FROM pulse_inbox") == {"kind": "CANCELLED", "state": "PENDING"}
    assert claim(world) == []
    assert world.db.scalar("SELECT COUNT(*) FROM pulse_permits") == 0
    assert orch.drain()["INBOX:CANCELLED"] == 1
    assert "TASK_CANCELLED" in [e["type"] for e in world.events(wf)]
    assert cancel_task(world, task["id"]) == "CANCELLED"  # already final: unchanged
    assert world.db.scalar("SELECT COUNT(*) FROM pulse_inbox") == 1


def test_K5_cancel_of_a_running_task_keeps_its_permit_until_the_worker_reports(world, orch):
    world.publish(task_flow(task_timeout_ms=HOUR))
    wf, = started(world, orch)
    got, = claim(world)
    assert cancel_task(world, task_of(world, wf)["id"]) == "REQUESTED"
    task = task_of(world, wf)
    assert task["status"] == "RUNNING" and task["cancel_requested"] == 1
    assert world.db.scalar("SELECT released_at FROM pulse_permits") is None
    assert world.db.scalar("SELECT COUNT(*) FROM pulse_inbox") == 0
    # A retryable failure would queue it again; with cancellation requested it ends CANCELLED instead.
    answer = pulse.attempt_fail(world.db.conn, got["attempt_id"], "w1", "interrupted", retryable=True)
    assert answer["outcome"] == "CANCELLED" and answer["task_status"] == "CANCELLED"
    assert world.db.scalar("SELECT released_at FROM pulse_permits") is not None
    assert world.db.row("SELECT kind FROM pulse_inbox")["kind"] == "CANCELLED"


def test_K5_a_retryable_failure_after_a_cancellation_ends_cancelled_on_the_last_attempt_too(world, orch):
    """A handler told of the cancellation stops with a retryable failure: the task ends CANCELLED whichever
    attempt it was, not FAILED for attempts exhausted on the last one."""
    world.publish(task_flow(task_timeout_ms=HOUR, retry={"max_attempts": 1}))
    wf, = started(world, orch)
    got, = claim(world)
    assert cancel_task(world, task_of(world, wf)["id"]) == "REQUESTED"
    answer = pulse.attempt_fail(world.db.conn, got["attempt_id"], "w1", "stopped on cancel", retryable=True)
    assert answer["outcome"] == "CANCELLED" and answer["task_status"] == "CANCELLED"
    assert world.db.row("SELECT kind FROM pulse_inbox")["kind"] == "CANCELLED"
    # A failure that is no retry's to forgo stays what it is.
    world.publish(task_flow(name="pay2", task_timeout_ms=HOUR, retry={"max_attempts": 1}))
    other = world.start("pay2", {"order_id": "b"})
    orch.drain()
    got, = claim(world)
    cancel_task(world, task_of(world, other)["id"])
    assert pulse.attempt_fail(world.db.conn, got["attempt_id"], "w1", "declined", retryable=False)["outcome"] == \
        "FAILED"


def test_K5_a_running_task_whose_cancellation_was_requested_may_still_succeed(world, orch):
    world.publish(task_flow())
    wf, = started(world, orch)
    got, = claim(world)
    cancel_task(world, task_of(world, wf)["id"])
    assert pulse.attempt_complete(world.db.conn, got["attempt_id"], "w1", {"done": 1})["outcome"] == "SUCCEEDED"
    assert world.db.row("SELECT kind FROM pulse_inbox")["kind"] == "SUCCEEDED"


# --- K-6 deadlines ------------------------------------------------------------------------------------------------
def test_K6_queued_task_past_its_deadline_expires_and_never_starts(world, orch):
    world.publish(task_flow(task_timeout_ms=5_000))
    wf, = started(world, orch)
    task = task_of(world, wf)
    world.db.advance_to(task["deadline_at"])  # at (or just past) the deadline
    assert claim(world) == []
    outcomes = orch.drain()
    assert outcomes["TASK_EXPIRY:EXPIRED"] == 1 and outcomes["INBOX:REVIEW"] == 1
    inbox = world.db.row("SELECT kind, occurred_at FROM pulse_inbox")
    assert inbox == {"kind": "EXPIRED", "occurred_at": task["deadline_at"]}
    assert task_of(world, wf)["status"] == "EXPIRED" and world.db.scalar("SELECT COUNT(*) FROM pulse_attempts") == 0
    assert review_codes(world, wf) == ["TASK_EXPIRED"] and world.step(wf, "work")["status"] == "NEEDS_REVIEW"
    assert pulse.task_expire(world.db.conn, task["id"]) == "GONE"
    reason, = world.instance(wf)["review_reasons"]
    assert reason["detail"]["outcome"]["why"].startswith("no worker took it before its deadline")
    assert reason["detail"]["outcome"]["mutex_key"] is None


def test_K6_a_task_that_expired_waiting_for_its_mutex_key_says_so(world, orch):
    """A task whose key another attempt held until its deadline never started: its review says which key, held since
    when, where one that no worker took says that instead."""
    world.publish(task_flow(task_timeout_ms=5_000, mutex_key="$.input.account"))
    holder = world.start("pay", {"order_id": "a", "account": "acct-1"})
    waiter = world.start("pay", {"order_id": "b", "account": "acct-1"})
    orch.drain()
    got, = claim(world, lease_ms=60_000)
    assert got["workflow_id"] == holder
    world.db.advance(5_001)
    pulse.attempt_heartbeat(world.db.conn, got["attempt_id"], "w1", 60_000)
    orch.drain()
    reason, = world.instance(waiter)["review_reasons"]
    outcome = reason["detail"]["outcome"]
    assert reason["code"] == "TASK_EXPIRED" and outcome["mutex_key"] == "acct-1"
    assert outcome["why"] == ("it waited for its mutex key, which another attempt has held since "
                              + got["started_at"].isoformat(timespec="microseconds") + "Z")


def test_K6_an_attempt_renewed_past_its_task_deadline_runs_on_and_only_a_retry_is_refused(world, orch):
    """The deadline forbids starting an attempt (K-6), not finishing one: heartbeats keep a running attempt's lease
    past the task's deadline, nothing expires it, and its success counts. A retryable failure there is final
    (reason DEADLINE): no next attempt could start."""
    world.publish({"name": "two", "steps": [task_step("a", task_timeout_ms=3_000),
                                             task_step("b", task_timeout_ms=3_000)]})
    wf = world.start("two", {"order_id": "o"})
    orch.drain()
    first, second = claim(world, limit=2, lease_ms=2_000)
    for _ in range(4):  # 6 s: twice the deadline, each lease renewed before it runs out
        world.db.advance(1_500)
        for got in (first, second):
            pulse.attempt_heartbeat(world.db.conn, got["attempt_id"], "w1", 2_000)
        outcomes = orch.drain()
        assert outcomes["LEASE:UNKNOWN"] == outcomes["TASK_EXPIRY:EXPIRED"] == 0
    assert {t["status"] for t in world.db.rows("SELECT status FROM pulse_tasks")} == {"RUNNING"}
    assert pulse.attempt_complete(world.db.conn, first["attempt_id"], "w1", {"n": 1})["outcome"] == "SUCCEEDED"
    answer = pulse.attempt_fail(world.db.conn, second["attempt_id"], "w1", "flaky", retryable=True)
    assert (answer["outcome"], answer["available_at"]) == ("FAILED", None)
    orch.drain()
    assert world.step(wf, "a")["status"] == "SUCCEEDED" and world.step(wf, "b")["status"] == "NEEDS_REVIEW"
    reason, = world.instance(wf)["review_reasons"]
    assert reason["code"] == "TASK_FAILED" and reason["detail"]["outcome"]["reason"] == "DEADLINE"


def test_K6_a_retry_no_worker_started_by_the_deadline_expires_at_it_with_its_last_failure(world, orch):
    """A retry is scheduled only to start before the deadline (K-3), but nothing makes a worker come: queued again
    and never claimed, the task expires at its deadline like one that never started, its outcome stamped with the
    deadline and carrying the attempts used and the last failure; the next attempt never starts."""
    world.publish(task_flow(task_timeout_ms=5_000, retry={"max_attempts": 3, "initial_backoff_ms": 1_000}))
    wf, = started(world, orch)
    got, = claim(world)
    answer = pulse.attempt_fail(world.db.conn, got["attempt_id"], "w1", "flaky", retryable=True)
    assert answer["outcome"] == "RETRY_SCHEDULED" and answer["available_at"] < task_of(world, wf)["deadline_at"]
    world.db.advance_to(task_of(world, wf)["deadline_at"])
    assert claim(world) == []
    assert orch.drain()["TASK_EXPIRY:EXPIRED"] == 1
    task = task_of(world, wf)
    assert (task["status"], task["attempts_used"]) == ("EXPIRED", 1)
    inbox = world.db.row("SELECT kind, occurred_at, result FROM pulse_inbox")
    assert (inbox["kind"], inbox["occurred_at"]) == ("EXPIRED", task["deadline_at"])
    facts = json.loads(inbox["result"])
    assert (facts["attempts_used"], facts["last_error"]) == (1, "flaky")
    assert review_codes(world, wf) == ["TASK_EXPIRED"] and world.db.in_flight() == 0


def test_K6_expiry_leaves_a_task_that_is_not_due_or_not_queued(world, orch):
    world.publish(task_flow(task_timeout_ms=5_000))
    wf, = started(world, orch)
    task = task_of(world, wf)
    assert pulse.task_expire(world.db.conn, task["id"]) == "NOT_DUE"
    claim(world)
    world.db.advance(6_000)
    assert pulse.task_expire(world.db.conn, task["id"]) == "GONE"  # running: its lease decides (K-4)


# --- K-7 inbox ----------------------------------------------------------------------------------------------------
def test_K7_consumption_is_idempotent(world, orch):
    world.publish(task_flow())
    wf, = started(world, orch)
    got, = claim(world)
    with world.held(wf):  # the orchestrator consumes it
        pulse.attempt_complete(world.db.conn, got["attempt_id"], "w1", {"n": 1})
    inbox_id = world.db.scalar("SELECT id FROM pulse_inbox")
    assert pulse.inbox_consume(world.db.conn, inbox_id) == "SUCCEEDED"
    events = world.events(wf)
    assert pulse.inbox_consume(world.db.conn, inbox_id) == "GONE"
    assert world.events(wf) == events
    assert world.instance(wf)["status"] == "SUCCEEDED"


def test_K7_outcomes_of_a_task_are_consumed_in_outcome_time_order(world, orch):
    world.publish(task_flow())
    wf, = started(world, orch)
    got, = claim(world)
    world.db.advance(1_000)
    with world.held(wf):  # the orchestrator consumes it
        pulse.attempt_complete(world.db.conn, got["attempt_id"], "w1", {"n": 1})
    later = world.db.row("SELECT * FROM pulse_inbox")
    # An outcome with an earlier time of its own that arrived later (a higher id).
    world.db.execute("INSERT INTO pulse_inbox (namespace_id, task_id, instance_id, kind, result, occurred_at, state, "
                     "available_at) SELECT namespace_id, task_id, instance_id, 'FAILED', '{\"error\": \"earlier\"}', "
                     "occurred_at - INTERVAL 500 MICROSECOND, 'PENDING', available_at FROM pulse_inbox")
    assert pulse.inbox_consume(world.db.conn, later["id"]) == "RECORDED"
    types = [e["type"] for e in world.events(wf)]
    assert types.index("TASK_FAILED") < types.index("TASK_OUTCOME_RECORDED")
    assert world.db.scalar("SELECT COUNT(*) FROM pulse_inbox WHERE state = 'CONSUMED'") == 2
    assert review_codes(world, wf) == ["TASK_FAILED"]



def test_K1_a_claim_over_several_queues_whose_picks_pass_the_aggregate_cap_claims_them_in_order(world, orch):
    """The picks of several queues are merged into claim order by one aggregate, which MariaDB caps at the session's
    group_concat_max_len (1 MiB by default: in_limit picks of each of a few busy queues pass it). Here the cap is
    lowered so that twelve picks pass it: the claim still takes them all, in order, and the session keeps its own."""
    routines.queue_put(world.db.conn, world.admin, "acme", "refunds", 100)
    world.publish({"name": "two-queues", "steps": [task_step("a"), task_step("b", queue="refunds")]})
    started(world, orch, definition="two-queues", n=6)
    conn = world.db.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SET SESSION group_concat_max_len = 1024")
        got = pulse.task_claim(conn, "w1", "payments,refunds", limit=12, lease_ms=30_000)
        assert len(got) == 12 and {g["queue"] for g in got} == {"payments", "refunds"}
        assert [tid(g["task_id"]) for g in got] == sorted(tid(g["task_id"]) for g in got)
        with conn.cursor() as cur:
            cur.execute("SELECT @@group_concat_max_len AS cap")
            assert cur.fetchone()["cap"] == 1024
    finally:
        conn.close()

def test_K7_a_list_of_task_outcomes_is_consumed_each_in_its_own_decision(world, orch):
    """weave_candidates_advance takes INBOX lists as the loop cuts them from a batch: each outcome consumed as
    weave_inbox_consume would, in order, one transaction each; an outcome already consumed answers GONE."""
    world.publish(task_flow())
    wfs = started(world, orch, n=3)
    for got in claim(world, limit=3):
        with world.held(attempt_id=got["attempt_id"]):  # the orchestrator consumes them
            pulse.attempt_complete(world.db.conn, got["attempt_id"], "w1", {"paid": True})
    inbox = [world.db.scalar("SELECT id FROM pulse_inbox WHERE task_id = %s", task_of(world, wf)["id"]) for wf in wfs]
    rows = dbmod.call(world.db.conn, "weave_candidates_advance", "INBOX", json.dumps(inbox + inbox[:1]))[0]
    assert [(r["id"], r["outcome"]) for r in rows] == [(i, "SUCCEEDED") for i in inbox] + [(inbox[0], "GONE")]
    assert [world.instance(wf)["status"] for wf in wfs] == ["SUCCEEDED"] * 3
    assert {r["state"] for r in world.db.rows("SELECT state FROM pulse_inbox")} == {"CONSUMED"}
    with pytest.raises(errors.ValidationFailed, match="INVALID_ARGUMENT"):
        dbmod.call(world.db.conn, "weave_candidates_advance", "SIGNAL", json.dumps(inbox))



@pytest.mark.parametrize("bad", ["1.5", '"7"', "-1", "null", "[1]", "1e3", "18446744073709551616"])
def test_K7_a_list_with_anything_but_ids_is_LIMIT_INVALID_before_any_decision(world, orch, bad):
    """The list is checked whole before its first decision: an element that is no id must not fail the call with a
    server error halfway, after the outcomes before it were consumed, nor be read as another id or as none."""
    world.publish(task_flow())
    wf, = started(world, orch)
    got, = claim(world)
    with world.held(attempt_id=got["attempt_id"]):  # the outcome is left for the orchestrator
        pulse.attempt_complete(world.db.conn, got["attempt_id"], "w1", {"paid": True})
    inbox = world.db.scalar("SELECT id FROM pulse_inbox")
    with pytest.raises(errors.ValidationFailed) as info:
        dbmod.call(world.db.conn, "weave_candidates_advance", "INBOX", f"[{inbox}, {bad}]")
    assert info.value.field_code == "LIMIT_INVALID"
    assert world.db.scalar("SELECT state FROM pulse_inbox") == "PENDING"
    assert world.instance(wf)["status"] == "RUNNING"
    rows = dbmod.call(world.db.conn, "weave_candidates_advance", "INBOX", f"[ {inbox} ,\n{10**18} ]")[0]
    assert [(r["id"], r["outcome"]) for r in rows] == [(inbox, "SUCCEEDED"), (10**18, "GONE")]

@pytest.mark.breaks_invariants("M-4.22")  # the second generation is made by hand, with no task
def test_K7_stale_outcome_is_recorded_and_changes_nothing_else(world, orch):
    world.publish(task_flow())
    wf, = started(world, orch)
    iid = world.internal_id(wf)
    got, = claim(world)
    # A second generation of the step (what recovery creates): the running task serves the first one.
    world.second_activation(wf)
    with world.held(wf):  # the orchestrator consumes it
        pulse.attempt_complete(world.db.conn, got["attempt_id"], "w1", {"n": 1})
    before = {t: c for t, c in world.db.table_counts().items()}
    step_before = world.db.row("SELECT * FROM weave_steps WHERE instance_id = %s", iid)
    assert orch.drain()["INBOX:STALE"] == 1
    assert world.db.row("SELECT state FROM pulse_inbox")["state"] == "STALE"
    assert world.db.table_counts() == before
    assert world.db.row("SELECT * FROM weave_steps WHERE instance_id = %s", iid) == step_before
    assert world.instance(wf)["status"] == "RUNNING"


def test_K7_failed_consumption_backs_off_and_leaves_nothing_partial(world, orch):
    """A consumption that fails in the report's own transaction is undone alone (its savepoint): the report
    stands and the event waits PENDING; the orchestrator's consumption then fails too and backs off, leaving
    nothing partial, and succeeds once the cause is gone."""
    world.publish({"name": "two", "steps": [task_step("first"), task_step("second", after=["first"])]})
    wf = world.start("two", {"order_id": "o"})
    orch.drain()
    got, = claim(world)
    world.db.execute(
        "CREATE TRIGGER test_audit_fails BEFORE INSERT ON weave_audit FOR EACH ROW "
        "BEGIN IF NEW.action = 'task.settle' THEN "
        "SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'audit store down'; END IF; END")
    events = world.events(wf)
    answer = pulse.attempt_complete(world.db.conn, got["attempt_id"], "w1", {"n": 1})
    assert (answer["outcome"], answer["task_status"]) == ("SUCCEEDED", "SUCCEEDED")
    assert world.db.row("SELECT state, attempts FROM pulse_inbox") == {"state": "PENDING", "attempts": 0}
    assert world.events(wf) == events  # nothing of the consumption remains
    assert world.step(wf, "first")["status"] == "ACTIVE" and world.step(wf, "second")["status"] == "PENDING"
    inbox_before = world.db.row("SELECT * FROM pulse_inbox")
    before = world.db.table_counts()
    assert orch.drain(max_rounds=3)["INBOX:FAILED"] >= 1
    assert world.db.table_counts() == before
    inbox = world.db.row("SELECT * FROM pulse_inbox")
    assert inbox["state"] == "PENDING" and inbox["attempts"] == 1 and "audit store down" in inbox["last_error"]
    assert inbox["occurred_at"] == inbox_before["occurred_at"] and inbox["available_at"] > world.db.now()
    assert world.step(wf, "first")["status"] == "ACTIVE" and world.step(wf, "second")["status"] == "PENDING"
    world.db.execute("DROP TRIGGER test_audit_fails")
    world.db.advance(1_000)
    orch.drain()
    assert world.step(wf, "first")["status"] == "SUCCEEDED" and world.step(wf, "second")["status"] == "ACTIVE"


def test_K7_R12_a_deadlock_in_the_reports_consumption_fails_the_whole_report_and_its_retry_decides_once(world, orch):
    """A real deadlock inside the consumption at report (the successor's task creation waits on a queue row held
    by a transaction that then waits on the reported task) rolls the report's whole transaction back: there is no
    savepoint left to return to, so the report fails as a whole instead of half-standing, and the client's
    conflict retry (R-12) repeats it once the other transaction is gone. It then decides exactly once."""
    world.publish({"name": "two", "steps": [task_step("first"), task_step("second", after=["first"])]})
    wf = world.start("two", {"order_id": "o"})
    orch.drain()
    got, = claim(world)
    first = tid(got["task_id"])
    world.db.execute("CREATE TABLE test_ballast (id INT PRIMARY KEY) ENGINE=InnoDB")
    other = world.db.connect()
    reporter = world.db.connect()
    answers: list[dict] = []
    try:
        other.begin()
        with other.cursor() as cur:
            # Heavier than the report in undo records, so the deadlock detector rolls the report back.
            cur.executemany("INSERT INTO test_ballast (id) VALUES (%s)", [(i,) for i in range(3000)])
            cur.execute("UPDATE weave_queues SET capacity = capacity WHERE name = 'payments'")
        thread = threading.Thread(target=lambda: answers.append(
            pulse.attempt_complete(reporter, got["attempt_id"], "w1", {"n": 1})))
        thread.start()

        def waiting() -> bool:  # the successor's task creation, in the consumption, waits for the queue row
            info = world.db.scalar("SELECT INFO FROM information_schema.PROCESSLIST WHERE ID = %s",
                                   reporter.thread_id())
            return bool(info) and "STRAIGHT_JOIN weave_queues" in info and "slots_taken + 1" in info

        assert wait_for(waiting, timeout=20), "the report never reached the queue row"
        with other.cursor() as cur:
            cur.execute("SET SESSION innodb_lock_wait_timeout = 30")
            began = time.monotonic()
            cur.execute("SELECT id FROM pulse_tasks WHERE id = %s FOR UPDATE", (first,))  # the cycle closes here
            assert cur.fetchone()["id"] == first and time.monotonic() - began < 20  # the report was the victim
        other.rollback()
        thread.join(30)
        assert not thread.is_alive()
    finally:
        other.close()
        reporter.close()
        world.db.execute("DROP TABLE test_ballast")
    assert (answers[0]["outcome"], answers[0]["task_status"]) == ("SUCCEEDED", "SUCCEEDED")
    assert world.db.rows("SELECT task_id, state FROM pulse_inbox") == [{"task_id": first, "state": "CONSUMED"}]
    assert [e["type"] for e in world.events(wf)].count("TASK_SUCCEEDED") == 1
    assert world.step(wf, "first")["status"] == "SUCCEEDED" and world.step(wf, "second")["status"] == "ACTIVE"
    assert world.db.scalar("SELECT COUNT(*) FROM pulse_tasks WHERE step_key = 'second'") == 1


@pytest.mark.breaks_invariants("M-4.22")  # an ownership corrupted by hand
@pytest.mark.parametrize("corruption", ["step", "activation", pytest.param(
    "instance", marks=pytest.mark.breaks_invariants("M-4.13c"))])  # and its attempt names the one before
def test_R6_corrupt_task_ownership_sends_the_instance_to_review(world, orch, corruption):
    world.publish({"name": "two", "steps": [task_step("first"), {"key": "other", "type": "TIMER", "delay_ms": HOUR}]})
    wf = world.start("two", {"order_id": "o"})
    victim = world.start("two", {"order_id": "v"})
    orch.drain()
    iid = world.internal_id(wf)
    got = [g for g in claim(world, limit=10) if g["workflow_id"] == wf][0]
    task_id = tid(got["task_id"])
    if corruption == "step":
        world.db.execute("UPDATE pulse_tasks SET step_key = 'other' WHERE id = %s", task_id)
    elif corruption == "activation":
        other = world.db.scalar("SELECT activation_id FROM weave_steps WHERE instance_id = %s AND step_key = 'other'",
                                iid)
        world.db.execute("UPDATE pulse_tasks SET activation_id = %s WHERE id = %s", other, task_id)
    else:
        world.db.execute("UPDATE pulse_tasks SET instance_id = %s WHERE id = %s", world.internal_id(victim), task_id)
    with world.held(attempt_id=got["attempt_id"]):  # the orchestrator's verification (the report's is the same)
        pulse.attempt_complete(world.db.conn, got["attempt_id"], "w1", {"n": 1})
    assert orch.drain()["INBOX:MISMATCH"] == 1
    target = victim if corruption == "instance" else wf
    inst = world.instance(target)
    assert inst["status"] == "NEEDS_REVIEW" and inst["gate"] == "CLOSED"
    assert review_codes(world, target) == ["OWNERSHIP_MISMATCH"]
    assert [s["status"] for s in inst["steps"]] == ["ACTIVE", "ACTIVE"]  # nothing of the outcome applied
    assert world.db.scalar("SELECT state FROM pulse_inbox") == "MISMATCH"


# --- R-8 / M-4.7 room for tasks -----------------------------------------------------------------------------------
@pytest.mark.parametrize("limit", ["capacity", "quota"])
def test_R8_full_queue_or_quota_defers_the_task_step_and_consumes_nothing(world, orch, limit):
    if limit == "capacity":
        routines.queue_put(world.db.conn, world.admin, world.namespace, "payments", 1)
    else:
        routines.app_put(world.db.conn, world.admin, world.namespace, "billing", 1)
    world.publish(task_flow())
    first = world.start("pay", {"order_id": "a"})
    orch.drain()
    second = world.start("pay", {"order_id": "b"})  # the start's own ROOT advance finds no room and defers
    iid = world.internal_id(second)
    root = world.db.row("SELECT * FROM weave_pending_advances WHERE instance_id = %s", iid)
    assert root["due_at"] == world.db.scalar("SELECT created_at FROM weave_instances WHERE id = %s", iid)
    world.db.advance(1_000)
    assert orch.drain()["CHECKPOINT:DEFERRED"] == 1  # and again: still full
    root = world.db.row("SELECT * FROM weave_pending_advances WHERE instance_id = %s", iid)
    assert root["due_at"] == world.db.scalar("SELECT created_at FROM weave_instances WHERE id = %s", iid)
    assert root["available_at"] > world.db.now()
    assert ("full" in root["last_error"]) and root["attempts"] == 0
    assert world.db.scalar("SELECT COUNT(*) FROM weave_activations WHERE instance_id = %s", iid) == 0
    assert world.db.scalar("SELECT COUNT(*) FROM pulse_tasks") == 1
    assert world.step(second, "work")["status"] == "PENDING"
    got, = claim(world)
    assert world.db.scalar("SELECT COUNT(*) FROM pulse_tasks WHERE status IN ('QUEUED', 'RUNNING')") == 1
    pulse.attempt_complete(world.db.conn, got["attempt_id"], "w1", {"n": 1})
    world.db.advance(1_000)
    orch.drain()
    assert world.instance(first)["status"] == "SUCCEEDED"
    assert world.step(second, "work")["status"] == "ACTIVE"


def test_R8_a_deferral_for_room_looks_again_at_the_instance_deadline_at_the_latest(world, orch):
    """Waiting for room is new work waiting: at the instance deadline it is a review (R-8), on time, not at the next
    second's look."""
    routines.app_put(world.db.conn, world.admin, world.namespace, "billing", 1)
    world.publish(task_flow())
    world.start("pay", {"order_id": "a"})
    orch.drain()
    late = world.start("pay", {"order_id": "b"}, deadline_ms=400)
    iid = world.internal_id(late)
    deadline = world.db.scalar("SELECT deadline_at FROM weave_instances WHERE id = %s", iid)
    root = world.db.row("SELECT available_at, deferred_reason FROM weave_pending_advances WHERE instance_id = %s", iid)
    assert (root["deferred_reason"], root["available_at"]) == ("QUOTA_FULL", deadline)
    world.db.advance(400)
    orch.drain()
    assert review_codes(world, late) == ["INSTANCE_DEADLINE"]


def test_R8_M4_7_a_report_gives_its_slot_back_before_it_settles_so_its_successor_takes_it_at_once(world, orch):
    """The report releases its task's slot before it consumes its outcome: a successor it activates takes the slot
    that has just come back, in the report's own transaction, never one task too many, instead of waiting a second
    for ROOT's next look at a full quota."""
    routines.app_put(world.db.conn, world.admin, world.namespace, "billing", 1)
    world.publish({"name": "two", "steps": [task_step("first"), task_step("second", after=["first"])]})
    wf = world.start("two", {"order_id": "o"})
    orch.drain()
    got, = claim(world)
    pulse.attempt_complete(world.db.conn, got["attempt_id"], "w1", {"n": 1})
    assert world.step(wf, "first")["status"] == "SUCCEEDED" and world.step(wf, "second")["status"] == "ACTIVE"
    assert world.db.in_flight() == 1
    assert world.db.scalar("SELECT COUNT(*) FROM weave_pending_advances WHERE step_key = ''") == 0


def test_K3_M4_7_a_report_never_waits_for_a_task_creation_of_its_app(world, orch):
    """A creation holds its app's and queue's rows until it commits: the slot is taken there, exactly, one creator
    of the app at a time. A task's end never writes those rows; it releases the slot into a release stripe, so a
    worker's report goes through while a creation of its app is still open (it waited for the creation's commit
    before, and every report of a busy app queued behind every creation of it)."""
    world.publish(task_flow())
    wf, = started(world, orch)
    got, = claim(world)
    creator = world.db.connect()
    reporter = world.db.connect()
    try:
        with creator.cursor() as cur:  # a creation in progress: its guarded update holds both rows
            cur.execute("START TRANSACTION")
            cur.execute("UPDATE weave_apps a STRAIGHT_JOIN weave_queues q ON q.namespace_id = a.namespace_id "
                        "SET a.slots_taken = a.slots_taken + 1, q.slots_taken = q.slots_taken + 1")
        with reporter.cursor() as cur:
            cur.execute("SET SESSION innodb_lock_wait_timeout = 1")
        assert pulse.attempt_complete(reporter, got["attempt_id"], "w1", {"n": 1})["outcome"] == "SUCCEEDED"
    finally:
        creator.rollback()
        creator.close()
        reporter.close()
    assert world.instance(wf)["status"] == "SUCCEEDED"
    assert world.db.in_flight("app") == 0 and world.db.in_flight("queue") == 0


def test_M4_7_the_app_and_queue_lists_count_tasks_in_flight_from_their_counters(world, orch):
    """What an operator lists (weave_app_list, weave_queue_list; `weave apps`, `weave queues`) comes from the
    counters the room check reads, slots taken less those given back, so the lists do not read the backlog; the
    running tasks are counted (no more than the capacity) and the queued ones are the rest."""

    def lists() -> tuple[int, tuple[int, int]]:
        (app,) = routines.app_list(world.db.conn, world.admin, world.namespace)
        queue = next(q for q in routines.queue_list(world.db.conn, world.admin, world.namespace)
                     if q["name"] == "payments")
        return app["in_flight"], (queue["queued"], queue["running"])

    world.publish(task_flow())
    started(world, orch, n=3)
    assert lists() == (3, (3, 0))
    done, failing = claim(world, limit=2)
    assert lists() == (3, (1, 2))
    pulse.attempt_complete(world.db.conn, done["attempt_id"], "w1", {"n": 1})
    assert lists() == (2, (1, 1))
    pulse.attempt_fail(world.db.conn, failing["attempt_id"], "w1", "boom", retryable=False)
    assert lists() == (1, (1, 0))
    orch.drain()
    assert lists() == (1, (1, 0)) and world.db.in_flight() == 1
    reads = _least_reads(world, lists)
    started(world, orch, n=50)
    assert lists() == (51, (51, 0)) and _least_reads(world, lists) == reads  # flat however long the queue


@pytest.mark.breaks_invariants("M-4.7b")
def test_M4_7_without_its_release_stripes_an_app_takes_and_gives_back_no_slot_and_says_why(world, orch):
    """Room cannot be known without the stripes that provisioning gives every app: a report of the app's task and
    a start that would create one are refused INVALID_STATE, and nothing of either is written (R-6: left for an
    operator, never guessed)."""
    world.publish(task_flow())
    started(world, orch)
    got, = claim(world)
    world.db.execute("DELETE FROM pulse_slot_releases WHERE owner_kind = 'APP'")
    before = world.db.table_counts()
    with pytest.raises(errors.WeaveError, match="INVALID_STATE: the app or queue of the task has no release stripe"):
        pulse.attempt_complete(world.db.conn, got["attempt_id"], "w1", {"n": 1})
    with pytest.raises(errors.WeaveError, match="INVALID_STATE: the app or queue has no release stripes"):
        world.start("pay", {"order_id": "o-2"})
    assert world.db.table_counts() == before
    assert world.db.scalar("SELECT status FROM pulse_attempts WHERE id = %s", got["attempt_id"]) == "RUNNING"


def _handler_reads(world, act) -> int:
    """Index entries and rows the storage engine handed up for ``act()`` on the scenario's connection."""
    read = "SHOW SESSION STATUS WHERE Variable_name LIKE 'Handler\\_read\\_%%'"
    before = sum(int(r["Value"]) for r in world.db.rows(read))
    act()
    return sum(int(r["Value"]) for r in world.db.rows(read)) - before


def _least_reads(world, act, runs: int = 3) -> int:
    """The least of ``runs`` measures of ``act()``: a table the server opens again (evicted from its table cache by
    other databases' work on a shared server) reads its statistics once, into the session's counters."""
    return min(_handler_reads(world, act) for _ in range(runs))


def test_M4_7_a_task_s_end_and_creation_read_the_same_stripes_however_many_apps_and_queues_there_are(world, orch):
    """A task's end releases into its app's and queue's stripes through the primary key (two rows), and a creation
    sums the stripes of its own app and queue (sixteen each): neither reads more when other apps and queues, each
    with its stripes, are added."""
    world.publish(task_flow())

    def one_task() -> tuple[int, int]:
        started: list[str] = []  # the start creates its task itself (its slot taken there)
        creation = _handler_reads(world, lambda: started.append(world.start("pay", {"order_id": "o"})))
        wf, = started
        got, = claim(world)
        end = _handler_reads(world, lambda: pulse.attempt_complete(world.db.conn, got["attempt_id"], "w1", {"n": 1}))
        assert world.instance(wf)["status"] == "SUCCEEDED"
        return creation, end

    def least() -> tuple[int, ...]:  # each figure's least of three tasks (see _least_reads)
        return tuple(min(figures) for figures in zip(*(one_task() for _ in range(3)), strict=True))

    one_task()  # the routines loaded (a first call reads their definitions)
    before = least()
    for i in range(100):
        routines.app_put(world.db.conn, world.admin, world.namespace, f"other-{i}", 10)
        routines.queue_put(world.db.conn, world.admin, world.namespace, f"other-{i}", 10)
    assert world.db.scalar("SELECT COUNT(*) FROM pulse_slot_releases") == 16 * 202
    assert least() == before


def test_R8_M4_7_a_release_not_committed_yet_still_counts_and_no_creation_waits_for_it(world, orch):
    """A creation reads the release stripes without a lock: a task's end that has not committed yet still counts
    as a task in flight, so a full quota is never over-filled and the start defers at once (R-8); with room left,
    the creation takes its slot at once instead of waiting for the release. Once the release commits, the next
    look finds the room."""
    routines.app_put(world.db.conn, world.admin, world.namespace, "billing", 1)
    world.publish(task_flow())
    started(world, orch)  # the quota's one slot is taken
    got, = claim(world)
    releasing = world.db.connect()
    try:
        with releasing.cursor() as cur:  # a task's end of the app, not committed yet, on every stripe it could use
            cur.execute("START TRANSACTION")
            cur.execute("UPDATE pulse_slot_releases SET released = released + 1")
        # Any wait for the release's locks would end in a lock wait error (1205): they are held until the end.
        world.db.execute("SET SESSION innodb_lock_wait_timeout = 2")
        second = world.start("pay", {"order_id": "o-2"})
        root = world.db.row("SELECT * FROM weave_pending_advances WHERE instance_id = %s AND step_key = ''",
                            world.internal_id(second))
        assert root["last_error"].startswith("QUOTA_FULL") and world.step(second, "work")["status"] == "PENDING"
        routines.app_put(world.db.conn, world.admin, world.namespace, "billing", 3)
        third = world.start("pay", {"order_id": "o-3"})  # room for one more than waits: its task is created at once
        assert world.step(third, "work")["status"] == "ACTIVE"
        assert world.db.scalar("SELECT COUNT(*) FROM pulse_tasks") == 2
    finally:
        releasing.rollback()
        releasing.close()
        world.db.execute("SET SESSION innodb_lock_wait_timeout = DEFAULT")
    assert world.db.in_flight() == 2
    pulse.attempt_complete(world.db.conn, got["attempt_id"], "w1", {"n": 1})
    world.db.advance(1_000)
    orch.drain()
    assert world.step(second, "work")["status"] == "ACTIVE" and world.db.in_flight() == 2


def test_M4_7_a_limit_lowered_below_the_tasks_in_flight_lets_each_end_by_every_path_and_counts_it_exactly(
        world, orch):
    """An operator may lower a quota and a capacity below what is in flight: those tasks run on and end by every path
    (success, failure, retry, cancel queued and running, lost lease, expiry), each giving its slot back exactly once,
    and nothing new is created until there is room under the new limit. M-4.7 holds at creation time: the tasks
    created before the change do not break it, and one created after it beyond the limit would."""
    world.publish(task_flow(task_timeout_ms=HOUR))
    world.publish(task_flow("short", task_timeout_ms=5_000))
    wfs = started(world, orch, n=6)
    short, = started(world, orch, "short")
    routines.app_put(world.db.conn, world.admin, world.namespace, "billing", 2)
    routines.queue_put(world.db.conn, world.admin, world.namespace, "payments", 2)

    def in_flight() -> tuple[int, int]:
        return world.db.in_flight("app"), world.db.in_flight("queue")

    assert in_flight() == (7, 7) and invariants.violations(world.db.conn) == {}
    waiting = world.start("pay", {"order_id": "late"})
    assert world.step(waiting, "work")["status"] == "PENDING"  # deferred: no room under the new limits
    # A task created after the change beyond the limit is what M-4.7 forbids (looked at, never committed).
    other = world.db.connect()
    try:
        other.begin()
        with other.cursor() as cur:
            cur.execute("UPDATE pulse_tasks t JOIN weave_apps a ON a.id = t.app_id SET t.created_at = a.updated_at "
                        "WHERE t.id = %s", (task_of(world, short)["id"],))
        assert "M-4.7" in invariants.violations(other)
    finally:
        other.rollback()
        other.close()

    done, failed, retried, cancelled = claim(world, limit=4, lease_ms=HOUR)
    lost, = claim(world, worker="w2", lease_ms=1_000)
    assert [tid(r["task_id"]) for r in (done, failed, retried, cancelled, lost)] == \
        [task_of(world, wf)["id"] for wf in wfs[:5]]
    pulse.attempt_complete(world.db.conn, done["attempt_id"], "w1", {"n": 1})
    assert in_flight() == (6, 6)
    pulse.attempt_fail(world.db.conn, failed["attempt_id"], "w1", "declined", retryable=False)
    assert in_flight() == (5, 5)
    assert pulse.attempt_fail(world.db.conn, retried["attempt_id"], "w1", "flaky",
                              retryable=True)["outcome"] == "RETRY_SCHEDULED"
    assert in_flight() == (5, 5)  # queued again: still in flight
    assert cancel_task(world, task_of(world, wfs[3])["id"]) == "REQUESTED"
    assert in_flight() == (5, 5)  # its permit and its slot stay until the worker reports
    assert pulse.attempt_fail(world.db.conn, cancelled["attempt_id"], "w1", "stopped",
                              retryable=True)["outcome"] == "CANCELLED"
    assert in_flight() == (4, 4)
    assert cancel_task(world, task_of(world, wfs[5])["id"]) == "CANCELLED"
    assert in_flight() == (3, 3)
    world.db.advance(5_001)  # the lease of `lost` and the deadline of `short` pass
    outcomes = orch.drain()
    assert outcomes["LEASE:UNKNOWN"] == 1 and outcomes["TASK_EXPIRY:EXPIRED"] == 1
    assert task_of(world, short)["status"] == "EXPIRED" and task_of(world, wfs[4])["status"] == "UNKNOWN"
    # The retry, and the deferred start's task: the first slot given back under the new limit woke it.
    assert world.step(waiting, "work")["status"] == "ACTIVE" and in_flight() == (2, 2)
    for got in claim(world, limit=10, lease_ms=HOUR):
        pulse.attempt_complete(world.db.conn, got["attempt_id"], "w1", {"n": 2})
    assert in_flight() == (0, 0)
    assert world.instance(waiting)["status"] == world.instance(wfs[2])["status"] == "SUCCEEDED"


def test_R8_M4_7_a_disabled_app_creates_nothing_but_its_tasks_in_flight_run_on_and_give_their_slots_back(world, orch):
    world.publish(task_flow(task_timeout_ms=HOUR))
    first, second = started(world, orch, n=2)
    routines.app_put(world.db.conn, world.admin, world.namespace, "billing", 1000, "DISABLED")
    waiting = world.start("pay", {"order_id": "late"})
    assert world.step(waiting, "work")["status"] == "PENDING"
    a, b = claim(world, limit=10, lease_ms=HOUR)
    pulse.attempt_complete(world.db.conn, a["attempt_id"], "w1", {"n": 1})
    pulse.attempt_fail(world.db.conn, b["attempt_id"], "w1", "declined", retryable=False)
    assert world.db.in_flight("app") == world.db.in_flight("queue") == 0
    assert world.instance(first)["status"] == "SUCCEEDED" and world.instance(second)["status"] == "NEEDS_REVIEW"
    routines.app_put(world.db.conn, world.admin, world.namespace, "billing", 1000, "ACTIVE")
    world.db.advance(60_000)
    orch.drain()
    assert world.step(waiting, "work")["status"] == "ACTIVE" and world.db.in_flight("app") == 1


def test_R2_M4_7_a_limit_s_change_is_timed_after_the_slots_taken_before_it(world, orch):
    """A quota change waits for a task creation that holds its app's row (the creation takes its slot there); its
    updated_at is read once it holds the row, so no task whose slot was taken under the old limit looks created
    after the change (M-4.7 judges the tasks in flight against the limit they were created under)."""
    creator = world.db.connect()
    putter = world.db.connect()
    try:
        creator.begin()
        with creator.cursor() as cur:  # a creation taking its slot, not committed yet
            cur.execute("UPDATE weave_apps SET slots_taken = slots_taken WHERE name = 'billing'")
        answer: list[dict] = []
        put = threading.Thread(target=lambda: answer.append(routines.app_put(
            putter, world.admin, world.namespace, "billing", 5)))
        put.start()
        assert world.db.comes_to_wait_for_a_lock(putter)
        released = world.db.now()  # the creation's time is before this
        creator.commit()
        put.join(30)
    finally:
        creator.rollback()
        creator.close()
        putter.close()
    assert answer and world.db.scalar("SELECT updated_at FROM weave_apps WHERE name = 'billing'") >= released


def test_K1_concurrent_claims_keep_mutex_keys_exclusive(world, orch, database):
    world.publish(task_flow(mutex_key="$.input.account"))
    for i in range(40):
        world.start("pay", {"order_id": f"o-{i}", "account": f"acc-{i % 3}"})
    orch.drain()
    finished: list[str] = []
    held: set[str] = set()
    overlaps: list[str] = []
    lock = threading.Lock()
    barrier = threading.Barrier(4)

    def worker(n: int) -> None:
        from procedures import db as dbmod

        conn = dbmod.connect(database)
        give_up = time.monotonic() + 60  # a bounded loop: a bug must fail this test, never hang the suite
        try:
            barrier.wait()
            while time.monotonic() < give_up:
                try:
                    got = pulse.task_claim(conn, f"w{n}", "payments", limit=3, lease_ms=60_000)
                except errors.TransientDatabaseError:
                    continue  # a deadlock between two claims racing for keys: the claim is simply retried
                with lock:
                    overlaps.extend(r["mutex_key"] for r in got if r["mutex_key"] in held)
                    held.update(r["mutex_key"] for r in got)
                    if not got and len(finished) == 40:
                        return
                for r in got:
                    with lock:  # let go of the key before the release can commit
                        held.discard(r["mutex_key"])
                        finished.append(r["task_id"])
                    for _ in range(20):  # a transient error on the report is retried, as the worker does
                        try:
                            pulse.attempt_complete(conn, r["attempt_id"], f"w{n}", {"n": n})
                            break
                        except errors.TransientDatabaseError:
                            conn.close()
                            conn = dbmod.connect(database)
        finally:
            conn.close()

    run_threads(worker, 4)
    assert overlaps == []
    assert len(finished) == 40 and len(set(finished)) == 40
    assert world.db.scalar("SELECT COUNT(*) FROM pulse_tasks WHERE status = 'SUCCEEDED'") == 40


def test_R14_the_scan_reports_the_next_lease_expiry_as_a_time(world, orch):
    assert orch.scan().next_at is None  # nothing at all to look at later
    world.publish(task_flow(task_timeout_ms=HOUR))
    started(world, orch)
    got, = claim(world, lease_ms=7_000)
    result = orch.scan()
    assert result.candidates == [] and result.next_at == got["lease_expires_at"]
    assert 0 < orch.idle_seconds(result) <= orch.idle_probe_ms / 1000


def test_K3_a_result_refused_says_whether_it_is_too_large_or_not_json_nested_as_the_server_reads_it(world, orch):
    """A result nested deeper than the 32 levels the server reads, a few bytes long, was refused as "JSON of at most
    1 MiB": the handler's author looked at its size. Each refusal now names what the result broke."""
    world.publish(task_flow())
    wf, = started(world, orch)
    got, = claim(world)
    refusals = {}
    for what, text in {"deep": "[" * 33 + "]" * 33, "not_json": "{not json",
                       "large": json.dumps("x" * (1024 * 1024))}.items():
        with pytest.raises(errors.ValidationFailed) as exc:
            pulse.attempt_complete(world.db.conn, got["attempt_id"], "w1", result_json=text)
        assert exc.value.field_code == "RESULT_INVALID"
        refusals[what] = exc.value.detail
    assert refusals["deep"] == refusals["not_json"] == \
        "the result must be one JSON value, nested at most 32 levels deep, no key twice, no number past a double"
    assert refusals["large"] == "the result must be JSON of at most 1 MiB"
    assert task_of(world, wf)["status"] == "RUNNING"


def test_K1_a_task_created_before_a_review_still_starts_its_retry_while_the_gate_is_closed(world, orch):
    """The gate forbids creating tasks, not starting one already created: a retry queued on one branch starts
    after another branch sent the instance to review, and its outcome settles its step (docs/concepts.md)."""
    world.publish({"name": "branches", "steps": [
        task_step("charge", retry={"max_attempts": 3, "initial_backoff_ms": 10_000, "max_backoff_ms": 60_000}),
        {"key": "approval", "type": "SIGNAL", "signal": {"name": "approval.decided", "payload_version": "1"},
         "correlation": "$.input.order_id", "timeout_ms": 5_000},
        task_step("notify", after=["approval"])]})
    wf = world.start("branches", {"order_id": "o-1"})
    orch.drain()
    got, = claim(world)
    assert pulse.attempt_fail(world.db.conn, got["attempt_id"], "w1", "503", retryable=True)["task_status"] == "QUEUED"
    world.db.advance(5_001)
    orch.drain()
    inst = world.instance(wf)
    assert (inst["status"], inst["gate"], review_codes(world, wf)) == ("NEEDS_REVIEW", "CLOSED", ["SIGNAL_TIMEOUT"])
    world.db.advance(5_000)
    retry, = claim(world)
    assert (retry["step_key"], retry["attempt_no"]) == ("charge", 2)
    pulse.attempt_complete(world.db.conn, retry["attempt_id"], "w1", {"charged": True})
    orch.drain()
    inst = world.instance(wf)
    assert [(s["key"], s["status"]) for s in inst["steps"]] == [
        ("charge", "SUCCEEDED"), ("approval", "NEEDS_REVIEW"), ("notify", "PENDING")]
    assert world.db.scalar("SELECT COUNT(*) FROM pulse_tasks") == 1  # no task was created while the gate was closed
