"""What a caller's transaction around weave_signal_send_in_tx (S-16) holds until it commits: the target instance's row,
and nothing of any other instance or namespace, at REPEATABLE READ (the server's default) as at READ COMMITTED. A
send's read of its signal, step and wait used to be a locking read: at REPEATABLE READ a key it did not find locked
the gap up to the next row of the index, another instance's or another namespace's, and every send, start or wait
written into that gap waited for the caller's commit (a tenant's open outbox transaction stopped the others')."""

from __future__ import annotations

import threading

import pymysql
import pytest

from procedures import db as dbmod
from procedures import errors, signals
from tests.support.signals import send, signal_flow
from tests.support.world import World

FIELDS = {"name": "approval.decided", "payload_version": "1", "target_step_key": "approval",
          "target_activation_sequence": 1, "correlation_key": "o-1", "payload": '{"approved": true}',
          "reason": "approved by the desk"}


def _outbox(world: World, isolation: str) -> dbmod.Connection:
    """A connection whose next transaction runs at ``isolation``, as an application's outbox transaction does."""
    conn = world.db.connect()
    with conn.cursor() as cur:
        cur.execute(f"SET SESSION TRANSACTION ISOLATION LEVEL {isolation}")
    conn.begin()
    return conn


def _impatient(world: World) -> dbmod.Connection:
    """A connection that gives up on a row lock after a second, instead of the server's fifty."""
    conn = world.db.connect()
    with conn.cursor() as cur:
        cur.execute("SET SESSION innodb_lock_wait_timeout = 1")
    return conn


@pytest.mark.parametrize("isolation", ["REPEATABLE READ", "READ COMMITTED"])
def test_S16_R3_an_open_outbox_transaction_holds_no_other_instance_or_namespace(world, orch, isolation):
    world.publish(signal_flow())
    held = world.start("approval-flow", {"order_id": "o-1"})
    orch.drain()
    other = World.create(world.db, "zeta")  # a later namespace: its rows sort after every row of acme
    other.publish(signal_flow())
    victim = other.start("approval-flow", {"order_id": "o-1"})
    orch.drain()
    outbox = _outbox(world, isolation)
    impatient = _impatient(world)
    try:
        # A step key past every other of the instance, then a key past every other: each missing, so a locking
        # read would lock the gap after it, up to the next instance's rows or the end of the index. A refused send
        # undoes its writes, but the transaction keeps what it locked.
        with pytest.raises(errors.ValidationFailed, match="TARGET_STEP_INVALID"):
            signals.send_in_tx(outbox, world.token, "acme", held, idempotency_key="~nothing",
                               **{**FIELDS, "target_step_key": "~nothing"})
        assert signals.send_in_tx(outbox, world.token, "acme", held, idempotency_key="~hold", **FIELDS)["signal_id"]
        signals.send(impatient, other.token, "zeta", victim, idempotency_key="first", **FIELDS)
        assert other.step(victim, "approval")["wait"]["status"] == "SATISFIED"  # at once, in the send
        started = other.start("approval-flow", {"order_id": "o-2"})  # new steps and waits, after every row
        orch.drain()
        assert other.step(started, "approval")["wait"]["status"] == "WAITING"
    finally:
        outbox.rollback()
        outbox.close()
        impatient.close()


def test_S16_a_repeatable_read_snapshot_older_than_the_instance_still_finds_a_key_sent_since(world, orch):
    """A caller whose snapshot was taken before another send of the same key committed cannot see that signal in
    it: the send reads again, locking, and answers the replay instead of failing on the duplicate key."""
    world.publish(signal_flow())
    wf = world.start("approval-flow", {"order_id": "o-1"})
    orch.drain()
    outbox = _outbox(world, "REPEATABLE READ")
    try:
        with outbox.cursor() as cur:
            cur.execute("SELECT COUNT(*) AS n FROM weave_signals")  # the snapshot, taken now
            assert cur.fetchone()["n"] == 0
        first = send(world, wf, "once")  # committed on another connection, after the snapshot
        again = signals.send_in_tx(outbox, world.token, "acme", wf, idempotency_key="once", **{
            **FIELDS, "payload": '{"approved": true}'})
        assert again["replayed"] and again["signal_id"] == first["signal_id"]
        with pytest.raises(errors.IdempotencyConflict):
            signals.send_in_tx(outbox, world.token, "acme", wf, idempotency_key="once",
                               **{**FIELDS, "payload": '{"approved": false}'})
    finally:
        outbox.rollback()
        outbox.close()
    assert world.db.scalar("SELECT COUNT(*) FROM weave_signals") == 1


def test_S16_an_outbox_transaction_still_holds_its_own_instance_until_it_commits(world, orch):
    """The instance's own row stays locked until the caller commits: another send to it waits, then goes on."""
    world.publish(signal_flow())
    wf = world.start("approval-flow", {"order_id": "o-1"})
    orch.drain()
    outbox = _outbox(world, "READ COMMITTED")
    impatient = _impatient(world)
    try:
        signals.send_in_tx(outbox, world.token, "acme", wf, idempotency_key="outbox", **FIELDS)
        with pytest.raises(errors.TransientDatabaseError) as waited:
            signals.send(impatient, world.token, "acme", wf, idempotency_key="elsewhere", **FIELDS)
        assert isinstance(waited.value.__cause__, pymysql.err.OperationalError)
        assert errors.errno_of(waited.value.__cause__) == 1205
        outbox.commit()
        assert signals.send(impatient, world.token, "acme", wf, idempotency_key="elsewhere", **FIELDS)["signal_id"]
    finally:
        outbox.rollback()
        outbox.close()
        impatient.close()


def test_S16_S4_sends_at_once_from_stale_snapshots_and_fresh_ones_store_each_key_once(world, orch):
    """Outbox transactions at REPEATABLE READ whose snapshots were taken before other sends to the instance
    committed, racing sends of their own transactions, with keys repeated across them: each key is stored once, a
    repeat answers the first receipt, and nothing else fails but a conflict the caller retries."""
    from tests.support.threads import run_threads

    world.publish(signal_flow())
    wf = world.start("approval-flow", {"order_id": "o-1"})
    orch.drain()
    receipts: dict[str, set[str]] = {}
    lock = threading.Lock()

    def sender(part: int) -> None:
        conn = world.db.connect()
        try:
            for n in range(12):
                key = f"k-{(part * 7 + n) % 10}"  # ten keys, each sent by several senders
                for _ in range(5):  # a conflict (1213) undoes the caller's transaction: tried again, whole
                    try:
                        if part % 2:
                            with conn.cursor() as cur:
                                cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                            conn.begin()
                            with conn.cursor() as cur:  # the snapshot, before the lock and other sends
                                cur.execute("SELECT COUNT(*) FROM weave_signals")
                            got = signals.send_in_tx(conn, world.token, "acme", wf, idempotency_key=key,
                                                     **{**FIELDS, "correlation_key": "other"})
                            conn.commit()
                        else:
                            got = signals.send(conn, world.token, "acme", wf, idempotency_key=key,
                                               **{**FIELDS, "correlation_key": "other"})
                        break
                    except errors.TransientDatabaseError:
                        conn.rollback()
                with lock:
                    receipts.setdefault(key, set()).add(got["signal_id"])
        finally:
            conn.close()

    run_threads(sender, 4)
    assert all(len(ids) == 1 for ids in receipts.values()), receipts
    assert world.db.scalar("SELECT COUNT(*) FROM weave_signals") == len(receipts) == 10
