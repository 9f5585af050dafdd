"""Connections against the real server: a DSN with several hosts skips hosts that do not answer and treats
a server without Galera as ready; no reachable host is a transient error; a conflict that rolled a routine's
own transaction back is retried as a whole decision, inside a caller's transaction it is not (R-12).
The Galera side (readiness, failover, rejoin) is proven on a real cluster in tests/reliability."""

from __future__ import annotations

import json
import os
import select
import socket
import struct
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import pymysql
import pytest

from procedures import db as dbmod
from procedures import errors, routines
from procedures.connections import Connections, retry_transient
from tests.support.db import CONFLICT_TRIGGER, a_user
from tests.support.proxy import two_nodes
from tests.support.waiting import wait_for


def dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again: nothing listens there


def test_R12_several_hosts_skip_a_dead_one_and_a_plain_server_counts_as_ready(database):
    if database.unix_socket:
        pytest.fail("this test needs a TCP server (WEAVE_TEST_DSN=mysql://...@host:port/...)")
    dead = dead_port()
    dsn = dbmod.Dsn.parse(f"mysql://{database.user}@127.0.0.1:{dead},{database.host}:{database.port}/"
                          f"{database.database}?connect_timeout=2")
    conn = dbmod.connect(dsn)
    try:
        assert (conn.host, conn.port) == (database.host, database.port)
        assert "wsrep_local_state" not in dbmod.node_state(conn) and dbmod.node_ready(conn)
        assert dbmod.call_one(conn, "weave_clock_now")["now_at"] is not None
    finally:
        conn.close()
    # The dead host is now a suspect: the next connect goes straight to the live one, without trying it first.
    assert dbmod._candidates(dsn)[0] == (database.host, database.port)


def test_R12_no_reachable_host_is_transient_and_names_every_host():
    a, b = dead_port(), dead_port()
    began = time.monotonic()
    with pytest.raises(errors.TransientDatabaseError) as info:
        dbmod.connect(dbmod.Dsn.parse(f"mysql://root@127.0.0.1:{a},127.0.0.1:{b}/weave?connect_timeout=1"))
    assert time.monotonic() - began < 5
    assert f"127.0.0.1:{a}" in str(info.value) and f"127.0.0.1:{b}" in str(info.value)


def test_R12_every_node_refusing_the_user_or_the_database_is_that_refusal_not_a_node_to_wait_for(nodes):
    """A wrong password or database name in a DSN that lists several nodes is answered by every node alike: it is the
    server's refusal, as with one host (the CLI names it and exits 1, a daemon refuses to start), not "no ready node",
    which tells a script to retry later and has a daemon wait for ever. A node that did not answer may be the one
    that serves, so a refusal from only some nodes stays transient."""
    (_, b), dsn = nodes
    wrongs = ((replace(dsn, password="not-the-password"), 1045), (dsn.with_database("weave_no_such_db"), 1049))
    for wrong, errno in wrongs:
        # (A database that does not exist is the engine's database at no level at all: SCHEMA_MISMATCH, the server's
        # refusal under it.)
        with pytest.raises((pymysql.err.MySQLError, errors.SchemaMismatch)) as refused:
            dbmod.connect(wrong)
        said = refused.value.__cause__ if isinstance(refused.value, errors.SchemaMismatch) else refused.value
        assert errors.errno_of(said) == errno and not errors.is_transient(refused.value), refused.value
        dbmod.forget_nodes()
    b.kill()
    with pytest.raises(errors.TransientDatabaseError, match="NO_READY_NODE"):
        dbmod.connect(dsn.with_database("weave_no_such_db"))


def test_R12_a_server_that_takes_no_more_connections_is_transient_and_the_retry_gets_one(database):
    """A user at its connection limit is refused with 1226 (a server at max_connections: 1040, the same case), and
    a connection frees up as soon as another closes: a retry, not a stop. Daemons used to stop on it (an error no
    retry took up), and the API answered 500 instead of 503."""
    with a_user(database, f"weave_t_{os.getpid()}_limited", "MAX_USER_CONNECTIONS 1") as limited:
        first = dbmod.connect(limited)
        with pytest.raises(errors.TransientDatabaseError) as refused:
            dbmod.connect(limited)
        assert errors.errno_of(refused.value.__cause__) == 1226
        # The retry helper every daemon uses: the holder closes after the first refusal, a later try connects.
        second = retry_transient(lambda: dbmod.connect(limited), on_retry=first.close)
        assert dbmod.call_one(second, "weave_clock_now")["now_at"] is not None
        second.close()


def test_R12_a_conflict_in_a_routines_own_transaction_retries_the_whole_decision(world):
    audits = world.db.scalar("SELECT COUNT(*) FROM weave_audit WHERE action = 'app.put'")
    world.db.execute(CONFLICT_TRIGGER)
    world.db.execute("SET @test_conflicts = 2")  # the first two tries conflict, like a certification failure
    row = routines.app_put(world.db.conn, world.admin, "acme", "retried", 5)
    assert row["name"] == "retried"
    assert world.db.scalar("SELECT @test_conflicts") == 0
    assert world.db.scalar("SELECT COUNT(*) FROM weave_apps WHERE name = 'retried'") == 1
    assert world.db.scalar("SELECT COUNT(*) FROM weave_audit WHERE action = 'app.put'") == audits + 1
    world.db.execute("SET @test_conflicts = 99")  # a conflict that never clears is reported, after bounded tries
    with pytest.raises(errors.TransientDatabaseError):
        routines.app_put(world.db.conn, world.admin, "acme", "never", 5)
    assert world.db.scalar("SELECT @test_conflicts") == 99 - 1 - dbmod.CONFLICT_RETRIES
    assert world.db.scalar("SELECT COUNT(*) FROM weave_apps WHERE name = 'never'") == 0


def test_R12_a_burst_of_conflicts_outlasting_four_tries_is_absorbed_and_a_lasting_one_answers_within_a_second(world):
    """On a cluster whose nodes all take writes, a burst of decisions on one app row conflicts for a while; the
    HTTP API has no retry of its own around a call, so a call's own tries are what keeps a start from a 503."""
    world.db.execute(CONFLICT_TRIGGER)
    world.db.execute("SET @test_conflicts = 6")  # more than the four quick tries a call used to make
    assert routines.app_put(world.db.conn, world.admin, "acme", "burst", 5)["name"] == "burst"
    assert world.db.scalar("SELECT @test_conflicts") == 0
    world.db.execute("SET @test_conflicts = 99")
    began = time.monotonic()
    with pytest.raises(errors.TransientDatabaseError):
        routines.app_put(world.db.conn, world.admin, "acme", "lasting", 5)
    assert time.monotonic() - began < 1.5  # the waits add up to at most about 0.9 s
    assert world.db.scalar("SELECT @test_conflicts") == 99 - 1 - dbmod.CONFLICT_RETRIES


def test_R12_a_conflict_inside_the_callers_transaction_goes_back_to_the_caller(world):
    from tests.support.signals import send, signal_flow

    world.publish(signal_flow())
    wf = world.start("approval-flow", {"order_id": "o-1"})
    world.db.execute(CONFLICT_TRIGGER)
    conn = world.db.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SET @test_conflicts = 1")
            cur.execute("START TRANSACTION")
        with pytest.raises(errors.TransientDatabaseError):
            send(world, wf, "in-tx", conn=conn, in_tx=True)
        with conn.cursor() as cur:
            cur.execute("SELECT @test_conflicts AS n")
            assert cur.fetchone()["n"] == 0  # tried once: the caller decides what to do with its transaction
            cur.execute("ROLLBACK")
    finally:
        conn.close()
    assert world.db.scalar("SELECT COUNT(*) FROM weave_signals") == 0


def test_R12_a_hung_host_costs_connect_timeout_not_read_timeout(database):
    """A server that accepts the TCP connection and then says nothing (SIGSTOP, a frozen VM): the greeting is
    awaited for connect_timeout only, and the next host is used."""
    if database.unix_socket:
        pytest.fail("this test needs a TCP server (WEAVE_TEST_DSN=mysql://...@host:port/...)")
    hung = socket.socket()
    hung.bind(("127.0.0.1", 0))
    hung.listen(8)  # the kernel completes every handshake; nobody ever answers
    try:
        port = hung.getsockname()[1]
        dsn = dbmod.Dsn.parse(f"mysql://{database.user}@127.0.0.1:{port},{database.host}:{database.port}/"
                              f"{database.database}?connect_timeout=1&read_timeout=120&failover=sequential")
        dbmod._suspect(("127.0.0.1", port), False)
        began = time.monotonic()
        conn = dbmod.connect(dsn)
        elapsed = time.monotonic() - began
        try:
            assert (conn.host, conn.port) == (database.host, database.port)
            assert 0.9 <= elapsed < 5, elapsed
            assert conn._read_timeout == 120  # the work after the handshake keeps the long timeout
        finally:
            conn.close()
    finally:
        hung.close()


# --- What a process knows of each node, shared by all its connections ----------------------------------------
# Two forwarders in front of the one real server stand for two nodes of a cluster (tests/support/proxy.py):
# killing or hanging one never touches the server.


@pytest.fixture
def nodes(database):
    """Two "nodes" in front of the test server, and a DSN listing both (one-second timeouts)."""
    with two_nodes(database, connect_timeout=1, read_timeout=1, write_timeout=1) as pair:
        yield pair


def pools(dsn: dbmod.Dsn, n: int = 4) -> list[Connections]:
    """``n`` connection holders, as ``n`` serving threads of one process have."""
    return [Connections(dsn) for _ in range(n)]


def test_R12_a_node_that_died_is_left_by_every_connection_of_the_process_before_a_statement_fails(nodes):
    (a, b), dsn = nodes
    held = pools(dsn)
    first = [p.get() for p in held]
    assert {c.port for c in first} == {a.port}  # failover=stable: one writer, the first listed of equal age
    a.kill()
    assert wait_for(lambda: dbmod._idle_state(first[0]) != "open", timeout=5)
    for p in held:  # every holder gets a connection on the survivor, and no statement fails
        assert dbmod.call_one(p.get(), "weave_clock_now")["now_at"] is not None
        assert p.get().port == b.port
    assert dbmod._nodes[("127.0.0.1", a.port)].down  # until a probe sees it ready again


def test_R12_a_hung_node_costs_one_timeout_to_the_process_not_one_per_connection(nodes):
    (a, b), dsn = nodes
    held = pools(dsn)
    assert {p.get().port for p in held} == {a.port}
    a.hang()
    began = time.monotonic()
    with pytest.raises(errors.TransientDatabaseError):
        held[0].call("weave_clock_now", attempts=1)  # read_timeout: the one connection that finds out
    assert 0.9 <= time.monotonic() - began < 5
    waits = []
    for p in held:
        began = time.monotonic()
        assert dbmod.call_one(p.get(), "weave_clock_now")["now_at"] is not None and p.get().port == b.port
        waits.append(time.monotonic() - began)
    # The others never send it a statement: at most one of them probes it once (connect_timeout).
    assert sum(w >= 0.9 for w in waits) <= 1 and all(w < 5 for w in waits), waits


def chosen_by_a_new_process(dsn: dbmod.Dsn) -> int:
    """The port a process started now connects to through ``dsn`` (a view of the nodes of its own)."""
    script = ("import sys; from procedures import db; "
              "print(db.connect(db.Dsn.parse(sys.argv[1])).port)")
    done = subprocess.run([sys.executable, "-c", script, dsn.url()], capture_output=True, text=True, timeout=60,
                          cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0, done.stderr
    return int(done.stdout)


def test_Z6_stable_a_process_that_left_a_node_which_did_not_restart_goes_back_to_it_with_every_other(nodes):
    """failover=stable keeps one writer only if every process chooses the same node. A process that left its node
    for a moment (a statement timed out on it; for a whole cluster, a node cut off and healed, or a donor of a full
    copy) must come back once the node is ready again: the node did not restart, so it is still the oldest, and a
    process started now writes to it. Staying on the survivor would keep two writers for as long as both live."""
    (a, b), dsn = nodes
    held = pools(dsn, 2)
    assert {p.get().port for p in held} == {a.port}
    a.hang()
    with pytest.raises(errors.TransientDatabaseError):
        held[0].call("weave_clock_now", attempts=1)  # read_timeout: this process leaves the node
    assert held[1].get().port == b.port
    a.resume()
    assert chosen_by_a_new_process(dsn) == a.port
    assert wait_for(lambda: {p.get().port for p in held} == {a.port}, timeout=15), \
        {p.get().port for p in held}
    assert dbmod.call_one(held[1].get(), "weave_clock_now")["now_at"] is not None


def test_Z6_stable_a_node_at_its_connection_limit_is_full_not_down_and_nobody_moves_off_it(nodes):
    """A writer at max_connections refuses a new connection (1040) and serves every open one: it is busy, not down.
    Counting it down moved every connection of the process to another node (each was dropped before its next
    statement), a second writer for as long as the limit held; now the connect that met the limit fails as transient
    (retried with backoff, or a 503), and the process stays where every other process writes."""
    (a, b), dsn = nodes
    held = pools(dsn, 2)
    assert {p.get().port for p in held} == {a.port}
    a.full()
    with pytest.raises(errors.TransientDatabaseError) as refused:
        dbmod.connect(dsn)
    assert "1040" in str(refused.value)
    assert not dbmod._nodes[("127.0.0.1", a.port)].down
    for p in held:
        assert p.get().port == a.port and dbmod.call_one(p.get(), "weave_clock_now")["now_at"] is not None
    a.resume()
    assert dbmod.connect(dsn).port == a.port


def test_R12_a_session_the_server_dropped_is_replaced_and_its_node_stays_up(nodes, database):
    (a, _), dsn = nodes
    held = pools(dsn, 2)
    dropped, kept = held[0].get(), held[1].get()
    with dbmod.connect(database) as admin, admin.cursor() as cur:
        cur.execute(f"KILL {dropped.thread_id()}")
    assert wait_for(lambda: dbmod._idle_state(dropped) != "open", timeout=5)
    fresh = held[0].get()
    assert fresh is not dropped and fresh.port == a.port
    assert not dbmod._nodes[("127.0.0.1", a.port)].down
    assert held[1].get() is kept  # a node that is up keeps its connections


def test_R12_while_every_node_is_down_a_connect_fails_at_once_until_the_next_probe(nodes):
    (a, b), dsn = nodes
    a.hang()
    b.kill()
    began = time.monotonic()
    with pytest.raises(errors.TransientDatabaseError):
        dbmod.connect(dsn)
    assert 0.9 <= time.monotonic() - began < 5  # the hung node's connect_timeout, once
    began = time.monotonic()
    with pytest.raises(errors.TransientDatabaseError) as again:
        dbmod.connect(dsn)
    assert time.monotonic() - began < 0.3 and "NO_READY_NODE" in str(again.value)
    assert f"127.0.0.1:{a.port} down" in str(again.value) and f"127.0.0.1:{b.port} down" in str(again.value)


def test_R12_reconnects_share_one_tls_context_made_once_per_process(database):
    """Every reconnect after a lost connection (R-12) used to build PyMySQL's default TLS context anew, loading
    the CA store each time; the context is now made once, with the same settings (TLS when the server offers
    it, no certificate check)."""
    import ssl

    first, second = dbmod.connect(database), dbmod.connect(database)
    try:
        assert first.ctx is second.ctx  # type: ignore[attr-defined]
        assert first.ctx.verify_mode == ssl.CERT_NONE and not first.ctx.check_hostname  # type: ignore[attr-defined]
        assert dbmod.call_row(first, "weave_clock_now") and dbmod.call_row(second, "weave_clock_now")
    finally:
        first.close()
        second.close()


def test_column_descriptors_are_parsed_once_and_read_as_pymysql_reads_them(database, db, world, monkeypatch):
    """A routine's result sets describe the same columns call after call: each distinct descriptor packet is
    parsed once per process and shared. What a call answers is what PyMySQL's own parse of every packet gives,
    for every kind of column an answer has (JSON, binary, text, dates, integers, NULL)."""
    import pymysql.connections

    world.publish({"name": "d", "steps": [{"key": "wait", "type": "TIMER", "delay_ms": 60_000}]})
    wf = world.start("d", {"order": "o-1", "amount": 12.5})

    def instance_get(conn) -> tuple[list, list]:
        """The instance read's result sets, and the descriptors of their columns."""
        sets, fields = [], []
        with conn.cursor() as cur:
            cur.execute("CALL weave_instance_get(%s, %s, %s)", (world.token, "acme", wf))
            while True:
                if cur.description is not None:
                    fields += cur._result.fields
                    sets.append(cur.fetchall())
                if not cur.nextset():
                    return sets, fields

    conn = dbmod.connect(database)
    try:
        shared, described = instance_get(conn)
        again, described_again = instance_get(conn)
        monkeypatch.setattr(pymysql.connections, "FieldDescriptorPacket", dbmod._parse_field)
        own, parsed_anew = instance_get(conn)
    finally:
        conn.close()
    assert len(described) > 40 and [id(f) for f in described_again] == [id(f) for f in described]
    assert not {id(f) for f in parsed_anew} & {id(f) for f in described}
    assert shared == again == own and [list(rows) for rows in shared] == [list(rows) for rows in own]
    instance = shared[0][0]
    assert json.loads(instance["input"]) == {"order": "o-1", "amount": 12.5} and instance["finished_at"] is None
    assert instance["created_at"].year >= 2000 and shared[1][0]["step_key"] == "wait"
    for field, fresh in zip(described, parsed_anew, strict=True):
        assert (fresh.name, fresh.table_name, fresh.type_code, fresh.charsetnr, fresh.flags, fresh.scale,
                fresh.length) == (field.name, field.table_name, field.type_code, field.charsetnr, field.flags,
                                  field.scale, field.length)


def test_a_connection_released_by_an_ended_thread_serves_the_next_thread_and_a_dead_one_is_not_reused(database):
    """A worker's task threads end with each run: what they release serves the next run's threads, its routines
    still parsed, instead of a connection opened and warmed anew; one the server closed meanwhile is replaced."""
    pool = Connections(database)

    def in_thread(fn) -> object:
        out: list[object] = []
        thread = threading.Thread(target=lambda: out.append(fn()))
        thread.start()
        thread.join()
        return out[0]

    def use_and_release() -> int:
        conn = pool.get()
        dbmod.call_row(conn, "weave_clock_now")
        pool.release()
        return conn.thread_id()

    try:
        first = in_thread(use_and_release)
        assert in_thread(use_and_release) == first  # the next thread got the same session
        with dbmod.connect(database) as admin, admin.cursor() as cur:
            cur.execute(f"KILL {first}")
        assert wait_for(lambda: dbmod._idle_state(pool._idle[0]) != "open", timeout=5)
        assert in_thread(use_and_release) != first  # a session the server ended is closed, not handed on
        assert len(pool._all) == 1
    finally:
        pool.close_all()
    assert not pool._all and not pool._idle


def _raising_once(monkeypatch, first) -> list[int]:
    """``db._call_once`` with its first call replaced by ``first(conn)``; the calls made, counted."""
    made: list[int] = []
    original = dbmod._call_once

    def call_once(conn, routine, args):
        made.append(1)
        if len(made) == 1:
            first(conn)
        return original(conn, routine, args)

    monkeypatch.setattr(dbmod, "_call_once", call_once)
    return made


def _socket_readable(conn) -> bool:
    poller = select.poll()
    poller.register(conn._sock, select.POLLIN)
    return bool(poller.poll(0))


@pytest.mark.parametrize("waiting_in", ["socket", "reader"])
def test_R12_a_conflict_whose_reply_left_packets_unread_is_not_tried_again_on_that_connection(database, monkeypatch,
                                                                                               waiting_in):
    """Tried again on a connection with a reply still unread, a call would read another statement's answer (and
    every statement after it on that connection would too): the connection is closed instead and the failure is
    a lost connection's, which every caller retries on a fresh one. The unread reply may wait on the socket, or
    already in the driver's reader (it reads the socket in blocks), where a look at the socket does not see it."""
    from pymysql.constants import COMMAND

    def conflict_with_a_reply_left(conn) -> None:
        conn._execute_command(COMMAND.COM_QUERY, "SELECT 1")  # its answer is never parsed
        assert wait_for(lambda: _socket_readable(conn), timeout=5, interval=0.001)
        if waiting_in == "reader":
            assert conn._rfile.peek(1)  # taken into the driver's reader: the socket is empty again
            assert not _socket_readable(conn)
        raise pymysql.err.OperationalError(1213, "Deadlock found when trying to get lock")

    made = _raising_once(monkeypatch, conflict_with_a_reply_left)
    conn = dbmod.connect(database)
    with pytest.raises(errors.ConnectionOutOfStep) as info:
        dbmod.call(conn, "weave_clock_now")
    assert "out of step after 1 conflict" in str(info.value) and not conn.open and len(made) == 1


def test_R12_a_connection_idle_with_nothing_buffered_stays_usable_after_the_look(database):
    conn = dbmod.connect(database)
    try:
        timeout = conn._sock.gettimeout()
        assert not dbmod._reply_left(conn)
        assert conn._sock.gettimeout() == timeout  # the look left the socket as the driver set it
        assert dbmod.call_row(conn, "weave_clock_now")["clock_mode"] == "TEST"
    finally:
        conn.close()


def test_R12_a_call_whose_connection_fell_out_of_step_is_repeated_once_on_a_fresh_one_when_safe(nodes,
                                                                                               monkeypatch):
    """A request safe to repeat (a read, or writes under an idempotency key) is run once more on a fresh connection
    when its connection fell out of step, as when its node was lost: the API answers it instead of a 503."""
    _, dsn = nodes
    made = _raising_once(monkeypatch, lambda conn: (_ for _ in ()).throw(struct.error("unpack_from requires a buffer")))
    pool = Connections(dsn)
    try:
        first = pool.get()
        row = pool.elsewhere_once(lambda: dbmod.call_row(pool.get(), "weave_clock_now"), lambda: True)
        assert row["clock_mode"] == "TEST" and len(made) == 2 and not first.open and pool.get() is not first
        made.clear()
        with pytest.raises(errors.ConnectionOutOfStep):  # not safe to repeat: the failure goes to the caller
            pool.elsewhere_once(lambda: dbmod.call_row(pool.get(), "weave_clock_now"), lambda: False)
        assert len(made) == 1
    finally:
        pool.close_all()


@pytest.mark.parametrize("garbled", [struct.error("unpack_from requires a buffer of at least 9 bytes"),
                                     pymysql.err.InternalError("Packet sequence number wrong - got 3 expected 1")])
def test_R12_a_reply_the_driver_cannot_read_closes_the_connection_as_a_lost_one(database, monkeypatch, garbled):
    def unreadable(conn) -> None:
        raise garbled

    made = _raising_once(monkeypatch, unreadable)
    pool = Connections(database)
    try:
        conn = pool.get()
        with pytest.raises(errors.TransientDatabaseError):
            dbmod.call(conn, "weave_clock_now")
        assert not conn.open
        again = pool.get()  # the pool replaces it before the next statement
        assert again is not conn and dbmod.call_row(again, "weave_clock_now")["clock_mode"] == "TEST"
        assert len(made) == 2
    finally:
        pool.close_all()
