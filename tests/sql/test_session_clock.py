"""R-2 against a session's own clock: the engine decides by the server's clock, and a caller cannot set it.

A session may fix its clock with ``SET timestamp``, which needs no privilege, and the routines run in the caller's
session: ``UTC_TIMESTAMP()`` follows it. An outbox user (EXECUTE on one routine) set it three days ahead and its
signal was dated then, the instance's times with it, and the real approval sent through the API later was refused
LATE; set two days back, a signal past its wait's deadline was accepted and won. Every routine that decides now
refuses such a session (CLOCK_FIXED) before it reads or writes anything."""

from __future__ import annotations

import datetime as dt
import re

import pymysql
import pytest

from procedures import db as dbmod
from procedures import errors, routines
from tests.sql.test_caller_transactions import call_text, public_routines
from tests.support.signals import send, signal_flow

DAY_S = 86_400
# Routines that check their arguments before anything else (which reads and writes nothing): called with arguments
# that pass, so that the refusal shown is the clock's.
VALID_FIRST = {"pulse_task_claim": "CALL pulse_task_claim('w1', 'payments', NULL, 1, 60000)",
               "weave_candidates_advance": "CALL weave_candidates_advance('CHECKPOINT', '[1]')"}


def deciding(routine: dict) -> bool:
    """A routine that starts a transaction of its own to write in (not only a snapshot to read from)."""
    return bool(re.search(r"START TRANSACTION\s*;|CALL _weave_transaction_(claim|begin)\(", routine["body"] or ""))


def _fixed(conn, days: float) -> None:
    with conn.cursor() as cur:
        cur.execute("SET timestamp = UNIX_TIMESTAMP(SYSDATE(6)) + %s", (days * DAY_S,))


def _outcome(conn, text: str):
    try:
        with conn.cursor() as cur:
            cur.execute(text)
            while cur.nextset():
                pass
    except pymysql.err.MySQLError as exc:
        return errors.translate(exc)
    return "ran"


@pytest.mark.parametrize("days", [3, -2])
def test_R2_every_routine_that_decides_or_authenticates_refuses_a_session_whose_clock_is_fixed(world, days):
    """Reads too: a token is authenticated on the engine clock, and a credential past its expiry listed every
    credential of its namespace from a session whose clock was set back a day."""
    routines = [r for r in public_routines(world.db)  # the outbox entry point: in a transaction, below
                if (deciding(r) or ("in_token", "IN") in r["params"] or r["name"] == "weave_console_session_get")
                and r["name"] != "weave_signal_send_in_tx"]
    before = world.db.table_counts()
    conn = dbmod.connect(world.db.dsn)
    try:
        _fixed(conn, days)
        outcomes = {r["name"]: _outcome(conn, VALID_FIRST.get(r["name"]) or call_text(r, world.admin, world.namespace))
                    for r in routines}
        assert {n: o for n, o in outcomes.items() if not isinstance(o, errors.ClockFixed)} == {}
        with conn.cursor() as cur:
            cur.execute("SELECT @@in_transaction AS t")
            assert cur.fetchone()["t"] == 0  # refused before anything was started
    finally:
        conn.close()
    assert world.db.table_counts() == before
    assert {"weave_signal_send", "weave_instance_start", "weave_candidates_advance", "pulse_task_claim",
            "pulse_attempt_complete", "weave_instance_pause", "weave_instance_get", "weave_credential_list",
            "weave_console_session_get"} <= {r["name"] for r in routines}


def test_R2_S16_an_outbox_send_in_a_session_whose_clock_is_fixed_is_refused_and_the_callers_work_kept(world, orch):
    """The outbox entry point runs in the caller's transaction: it refuses, writes nothing, and leaves the caller's
    own pending work to its commit. The signal the same caller sends once its clock is the server's again wins."""
    world.publish(signal_flow())
    wf = world.start("approval-flow", {"order_id": "o-1"})
    orch.drain()
    world.db.execute("CREATE TABLE IF NOT EXISTS caller_outbox (id INT PRIMARY KEY) ENGINE=InnoDB")
    before = world.db.table_counts()
    conn = dbmod.connect(world.db.dsn, autocommit=False)
    try:
        _fixed(conn, 3)
        with conn.cursor() as cur:
            cur.execute("INSERT INTO caller_outbox VALUES (1)")
        with pytest.raises(errors.ClockFixed):
            send(world, wf, key="k-1", conn=conn, in_tx=True)
        with conn.cursor() as cur:
            cur.execute("SELECT @@in_transaction AS t, (SELECT COUNT(*) FROM caller_outbox) AS mine")
            assert cur.fetchone() == {"t": 1, "mine": 1}
            cur.execute("SET timestamp = DEFAULT")
        conn.commit()
    finally:
        conn.close()
    assert world.db.scalar("SELECT COUNT(*) FROM caller_outbox") == 1
    world.db.execute("DROP TABLE caller_outbox")
    assert world.db.table_counts() == before
    receipt = send(world, wf, key="k-1")
    assert receipt["status"] == "PENDING"
    orch.drain()
    assert world.instance(wf)["status"] == "SUCCEEDED"


def test_R2_a_session_whose_clock_is_set_back_to_the_server_s_is_served(world, orch):
    world.publish(signal_flow())
    wf = world.start("approval-flow", {"order_id": "o-1"})
    orch.drain()
    conn = dbmod.connect(world.db.dsn)
    try:
        _fixed(conn, 3)
        with pytest.raises(errors.ClockFixed):
            send(world, wf, key="k-1", conn=conn)
        with conn.cursor() as cur:
            cur.execute("SET timestamp = DEFAULT")
        assert send(world, wf, key="k-1", conn=conn)["status"] == "PENDING"
    finally:
        conn.close()
    orch.drain()
    assert world.instance(wf)["status"] == "SUCCEEDED"


def test_R2_S2_a_credential_past_its_expiry_stays_refused_in_a_session_whose_clock_is_set_back(world):
    conn = world.db.conn
    soon = world.db.now() + dt.timedelta(seconds=30)
    made = routines.credential_create(conn, world.admin, world.namespace, "contractor", ["admin"], expires_at=soon)
    world.db.advance(3_600_000)
    with pytest.raises(errors.Unauthenticated):
        routines.config_page(conn, made["token"], world.namespace, "credentials")
    back = dbmod.connect(world.db.dsn)
    try:
        _fixed(back, -1)
        with pytest.raises(errors.ClockFixed):
            routines.config_page(back, made["token"], world.namespace, "credentials")
    finally:
        back.close()
