"""Competing senders on one wait (S-4, S-6, S-11, M-4.1, M-4.2, M-4.14): each sender has its own connection,
and they start together behind a barrier."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from orchestrator.loop import Orchestrator
from procedures import db as dbmod
from procedures import errors, signals
from tests.support.signals import HOUR, NAME, VERSION, send, signal_flow


def race(world, n: int, job) -> list:
    barrier = threading.Barrier(n)

    def one(i: int):
        conn = world.db.connect()
        try:
            barrier.wait(timeout=30)
            return job(conn, i)
        finally:
            conn.close()

    with ThreadPoolExecutor(max_workers=n) as pool:
        return list(pool.map(one, range(n)))


@pytest.mark.parametrize("runner_during_race, queued", [(False, True), (True, False), (False, False)],
                         ids=["runners-down", "runner-racing", "settled-at-send"])
def test_S11_64_senders_on_one_wait_make_exactly_one_winner(world, orch, database, runner_during_race, queued):
    """runners-down: every signal is accepted without settling (the outbox entry point) and waits for a runner;
    runner-racing: Send settles at acceptance while an orchestrator races it; settled-at-send: Send alone."""
    world.publish(signal_flow(then_timer=True))
    wf = world.start("approval-flow", {"order_id": "o-1"})
    orch.drain()
    runner = None
    if runner_during_race:
        runner = Orchestrator(database, concurrency=4, idle_probe_ms=5)
        thread = threading.Thread(target=runner.run, daemon=True)
        thread.start()
    receipts = race(world, 64, lambda conn, i: send(world, wf, f"racer-{i}", conn=None if queued else conn,
                                                     queued=queued, payload=f'{{"racer": {i}}}'))
    if runner is not None:
        runner.stop()
        thread.join(timeout=30)
    orch.drain()

    rows = world.db.rows("SELECT id, status, disposition, accepted_at FROM weave_signals ORDER BY accepted_at, id")
    assert len(rows) == 64 and len({r["id"] for r in rows}) == 64
    consumed = [r for r in rows if r["status"] == "CONSUMED"]
    assert len(consumed) == 1
    others = [r for r in rows if r["status"] != "CONSUMED"]
    assert len(others) == 63
    assert all(r["status"] == "REJECTED" and r["disposition"] in ("WAIT_SETTLED", "STEP_SETTLED") for r in others)
    if queued:
        assert all(r["disposition"] == "WAIT_SETTLED" for r in others)
    wait = world.step(wf, "approval")["wait"]
    assert wait["status"] == "SATISFIED" and wait["winner_signal_id"] == f"sig_{consumed[0]['id']}"
    # The winner is the first by (accepted_at, id) among the signals that were accepted PENDING.
    pending_at_acceptance = [r for r in rows if next(x for x in receipts if x["signal_id"] == f"sig_{r['id']}")
                             ["status"] == "PENDING"]
    assert pending_at_acceptance[0]["id"] == consumed[0]["id"]
    output = world.step(wf, "approval")["output"]
    assert output == {"racer": int(next(x for x in receipts if x["signal_id"] == wait["winner_signal_id"])
                                   ["idempotency_key"].removeprefix("racer-"))}
    assert world.db.scalar("SELECT COUNT(*) FROM weave_waits WHERE winner_signal_id IS NOT NULL") == 1
    assert world.step(wf, "after_approval")["status"] == "ACTIVE"


def test_S4_16_senders_replaying_one_key_store_one_signal_with_identical_receipts(world, orch):
    world.publish(signal_flow())
    wf = world.start("approval-flow", {"order_id": "o-1"})
    orch.drain()
    receipts = race(world, 16, lambda conn, i: send(world, wf, "one-key", conn=conn))
    assert world.db.scalar("SELECT COUNT(*) FROM weave_signals") == 1
    assert world.db.scalar("SELECT COUNT(*) FROM weave_audit WHERE action = 'signal.accept'") == 1
    assert len({r["receipt_json"] for r in receipts}) == 1
    assert sorted(r["replayed"] for r in receipts) == [False] + [True] * 15
    orch.drain()
    assert world.step(wf, "approval")["wait"]["winner_signal_id"] == receipts[0]["signal_id"]


def test_R13_checkpoint_deletes_by_instance_use_an_index_so_parallel_consumers_do_not_deadlock(db):
    # Without an index on (instance_id, step_key), settling a step scanned and locked every checkpoint row
    # of every instance, and two orchestrators consuming signals of two instances deadlocked (1213).
    # Either of the instance's indexes (by step, by due time) reads that instance's rows alone.
    for sql in ("EXPLAIN DELETE FROM weave_pending_advances WHERE instance_id = 1 AND step_key = 'approval'",
                "EXPLAIN DELETE FROM weave_pending_advances WHERE instance_id = 1"):
        plan = db.rows(sql)
        assert plan[0]["key"] in ("uq_checkpoint", "ix_checkpoint_instance_due"), plan


def test_R13_a_send_never_waits_on_the_signals_of_other_instances(world):
    # A wait's first match is read through its own instance's signal index. Through the index of every PENDING
    # signal (the scan's), which the optimizer prefers while few signals are PENDING, the locking read took other
    # instances' signals too: a send waited behind another instance's open send, and two such sends deadlocked
    # (1213). Here an uncommitted signal of one instance must not hold up a send that settles another's wait.
    # (The open send runs at READ COMMITTED, as docs/signals.md asks of an outbox transaction.)
    world.publish(signal_flow())
    for i in range(30):  # a settled history: most signals CONSUMED, so the PENDING index looks selective
        wf = world.start("approval-flow", {"order_id": f"o-{i}"})
        send(world, wf, correlation_key=f"o-{i}")
    free, held = (world.start("approval-flow", {"order_id": o}) for o in ("o-free", "o-held"))
    outbox, other = world.db.connect(), world.db.connect()
    try:
        with outbox.cursor() as cur:
            cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
        outbox.begin()
        send(world, held, conn=outbox, in_tx=True, correlation_key="o-held")  # PENDING, locked until commit
        with other.cursor() as cur:
            cur.execute("SET SESSION innodb_lock_wait_timeout = 1")
        assert send(world, free, conn=other, correlation_key="o-free")["status"] == "PENDING"
        assert world.step(free, "approval")["wait"]["status"] == "SATISFIED"
        outbox.commit()
    finally:
        outbox.close()
        other.close()
    assert world.step(held, "approval")["wait"]["status"] == "WAITING"  # its signal waits for a runner


def test_S6_senders_racing_for_the_last_place_store_exactly_one_and_a_racing_replay_still_answers(world):
    world.publish(signal_flow(before_timer_ms=HOUR))
    wf = world.start("approval-flow", {"order_id": "o-1"})  # the step is not active: every signal stays early
    first = send(world, wf, "k-0")
    for i in range(1, 1023):
        signals.send(world.db.conn, world.token, world.namespace, wf, idempotency_key=f"k-{i}", name=NAME,
                     payload_version=VERSION, target_step_key="approval", target_activation_sequence=1,
                     correlation_key="o-1", payload="{}", reason="r")

    def job(conn, i: int):
        try:
            return send(world, wf, "k-0" if i == 0 else f"new-{i}", conn=conn)
        except errors.SignalLimitReached:
            return "LIMIT"

    answers = race(world, 9, job)  # one place left, eight new keys and one replay
    assert answers[0]["replayed"] and answers[0]["receipt_json"] == first["receipt_json"]
    won = [a for a in answers[1:] if a != "LIMIT"]
    assert len(won) == 1 and not won[0]["replayed"] and answers[1:].count("LIMIT") == 7
    assert world.db.scalar("SELECT COUNT(*) FROM weave_signals") == 1024
    assert world.db.scalar("SELECT signal_count FROM weave_instances") == 1024
    assert world.db.scalar("SELECT COUNT(*) FROM weave_audit WHERE action = 'signal.accept'") == 1024


def test_R13_an_admin_change_waits_a_second_at_most_so_the_runners_never_queue_long_behind_it(world, database):
    """A Send inside a caller's transaction (S-16) holds its instance's identity shared until the caller commits. A
    disable of that identity waits for it, and every later shared lock of that row queues behind the disable: the
    runners of every instance of that identity would wait as long as the disable does. The disable waits a second at
    most, then gives up with a lock wait (transient: try again), so a runner behind it waits less than that (R-13);
    once the caller commits, the disable goes through."""
    from procedures import routines
    from procedures.connections import Connections

    world.publish(signal_flow(before_timer_ms=1_000))
    starter = world.credential(["workflows:start", "workflows:read"], actor="starter")
    held, queued = (world.start("approval-flow", {"order_id": "o-1"}, token=starter["token"]) for _ in range(2))
    client, admin = world.db.connect(), world.db.connect()
    orch = Orchestrator(database, concurrency=1, spread=False)

    def impatient():  # a lock wait on a runner's connection fails after 2 s instead of 50 s
        conn = dbmod.connect(database)
        with conn.cursor() as cur:
            cur.execute("SET SESSION innodb_lock_wait_timeout = 2")
        return conn

    orch._connections = Connections(database, open=impatient)
    refused: list = []

    def disable() -> None:
        try:
            routines.credential_disable(admin, world.admin, "acme", starter["credential_id"])
        except Exception as exc:  # judged below
            refused.append(exc)

    try:
        orch.drain()
        client.begin()
        signals.send_in_tx(client, world.token, "acme", held, idempotency_key="s1", name=NAME, payload_version=VERSION,
                           target_step_key="approval", target_activation_sequence=1, correlation_key=b"o-1",
                           payload='{"approved": true}', reason="approved by the desk")
        waiting = threading.Thread(target=disable)
        waiting.start()
        assert world.db.comes_to_wait_for_a_lock(admin)
        world.db.advance(1_001)
        orch.run_once()  # behind the disable: a wait as long as the disable's would fail after 2 s (1205)
        waiting.join(30)
        assert orch.stats["failed"] == 0
        assert world.step(queued, "cool_off")["wait"]["status"] == "SATISFIED"
        assert len(refused) == 1 and errors.is_transient(refused[0]), refused
        with admin.cursor() as cur:  # the session's own lock wait is given back, the refusal's path included
            cur.execute("SELECT @@SESSION.innodb_lock_wait_timeout AS wait, @@GLOBAL.innodb_lock_wait_timeout AS g")
            assert (lambda r: r["wait"] == r["g"])(cur.fetchone())
        assert world.db.scalar("SELECT status FROM weave_credentials WHERE id = %s",
                               int(starter["credential_id"][5:])) == "ACTIVE"
        client.commit()
        assert routines.credential_disable(admin, world.admin, "acme", starter["credential_id"])["status"] == "DISABLED"
    finally:
        client.rollback()
        client.close()
        admin.close()
        orch.close()


def _while_a_caller_holds_a_send(world, workflow_id: str, call) -> tuple[dict, object]:
    """A caller's transaction sends a signal to ``workflow_id`` (S-16) and stays open while ``call(conn)`` runs on a
    connection whose lock waits fail after a second (1205): (the send's receipt, what the call answered)."""
    client, other = world.db.connect(), world.db.connect()
    try:
        client.begin()
        sent = signals.send_in_tx(client, world.token, "acme", workflow_id, idempotency_key="s1", name=NAME,
                                  payload_version=VERSION, target_step_key="approval", target_activation_sequence=1,
                                  correlation_key=b"o-1", payload='{"approved": true}', reason="approved by the desk")
        with other.cursor() as cur:
            cur.execute("SET SESSION innodb_lock_wait_timeout = 1")
        return sent, call(other)
    finally:
        client.rollback()
        client.close()
        other.close()


def test_R13_a_start_replay_never_waits_for_a_transaction_that_holds_its_live_instance(world):
    """A caller's transaction that sent a signal to an instance holds that instance until it commits (S-16). A replay
    of the instance's start answers from a snapshot without waiting for it; only a finished instance, which a
    retention purge could remove under the replay, is held while the replay reads it."""
    from procedures import routines

    world.publish(signal_flow())
    start = {"definition": "approval-flow", "app": world.app, "input": {"order_id": "o-1"},
             "idempotency_key": "start-1", "deadline_ms": HOUR}
    first = routines.instance_start(world.db.conn, world.token, "acme", **start)
    _, again = _while_a_caller_holds_a_send(world, first["workflow_id"],
                                            lambda conn: routines.instance_start(conn, world.token, "acme", **start))
    assert again["workflow_id"] == first["workflow_id"]


def test_R13_a_start_replay_never_waits_for_a_transaction_that_holds_its_finished_instance(world):
    """A signal sent to a finished instance is refused and recorded under the instance's lock, and inside a caller's
    transaction (S-16) that lock is held until the caller commits. A replay of the instance's start does not wait for
    it: what keeps a retention purge away while the replay reads is its hold of the instance's first event, which only
    a purge ever changes."""
    from procedures import routines

    world.publish(signal_flow())
    start = {"definition": "approval-flow", "app": world.app, "input": {"order_id": "o-1"},
             "idempotency_key": "start-1", "deadline_ms": HOUR}
    first = routines.instance_start(world.db.conn, world.token, "acme", **start)
    operator = world.credential(["workflows:control"])["token"]
    routines.instance_cancel(world.db.conn, operator, "acme", first["workflow_id"], "no longer needed", "c-1")
    late, again = _while_a_caller_holds_a_send(world, first["workflow_id"],
                                               lambda conn: routines.instance_start(conn, world.token, "acme", **start))
    assert late["status"] == "REJECTED"
    assert (again["workflow_id"], again["status"], again["created"]) == (first["workflow_id"], "CANCELLED", 0)


def test_R13_a_send_inside_a_caller_transaction_never_holds_its_app_s_task_creations(world):
    """A send inside a caller's transaction (S-16) lasts as long as the caller's transaction. To an instance of a
    definition without queues it took the instance's app shared, and every task creation of that app, which updates
    the app's row, waited for the caller and failed at the lock timeout. It starts no work, so it takes no app."""
    from procedures import routines

    world.publish(signal_flow())
    world.publish({"name": "charge", "steps": [{"key": "charge", "type": "TASK", "queue": "payments",
                                                "handler": "example.echo", "handler_version": "1"}]})
    waiting = world.start("approval-flow", {"order_id": "o-1"})
    _, started = _while_a_caller_holds_a_send(world, waiting, lambda conn: routines.instance_start(
        conn, world.token, "acme", definition="charge", app=world.app, input={"order_id": "o-2"},
        idempotency_key="start-2", deadline_ms=HOUR))
    assert started["status"] == "RUNNING"
    assert world.db.scalar("SELECT COUNT(*) FROM pulse_tasks") == 1


def test_R13_a_send_waiting_for_a_held_instance_holds_up_no_start_or_task_creation_of_its_app(world):
    """A Send to an instance another transaction holds waits for it (R-3). To an instance of a definition without
    queues it waited holding the app's row shared: every task creation of that app (which updates the row) queued
    behind it, every start (which reads the row shared) behind those, and with clients retrying the held instance one
    busy instance stalled its whole app. It takes no app row, so the app's other work goes on meanwhile."""
    from procedures import routines

    world.publish(signal_flow())
    world.publish({"name": "charge", "steps": [{"key": "charge", "type": "TASK", "queue": "payments",
                                                "handler": "example.echo", "handler_version": "1"}]})
    held = world.start("approval-flow", {"order_id": "o-1"})
    with ThreadPoolExecutor(1) as pool:
        with world.held(held):
            sender = world.db.connect()
            waiting = pool.submit(send, world, held, "waits-1", conn=sender)
            assert world.db.comes_to_wait_for_a_lock(sender)  # the Send waits for the instance
            other = world.db.connect()
            with other.cursor() as cur:
                cur.execute("SET SESSION innodb_lock_wait_timeout = 1")  # any wait for the Send's locks fails
            for n in range(3):  # a start, its task's creation (the app's row updated), another start behind it
                started = routines.instance_start(other, world.token, "acme", definition="charge", app=world.app,
                                                  input={"order_id": f"o-{n}"}, idempotency_key=f"busy-app-{n}",
                                                  deadline_ms=HOUR)
                assert started["status"] == "RUNNING"
            other.close()
            assert not waiting.done()  # the Send still waits for the instance
        assert waiting.result(timeout=30)["status"] in ("PENDING", "CONSUMED")  # and goes through once it is free
    assert world.db.scalar("SELECT COUNT(*) FROM pulse_tasks") == 3

