"""R-17 upgrade test for migration 0018 (a credential's console sessions found by the credential), and the lock the
disable that ends them takes: a database with live sessions of two credentials, taken back to level 17 and migrated
again, keeps every session; a disable then ends its credential's sessions through the new index, and while it waits
on one of them it holds up no other credential's sign-in or sign-out."""

from __future__ import annotations

import hashlib
import threading

from procedures import routines
from tests.support.db import index_added_again

MIGRATION = "0018.console-session-credential"


def session(world, token: str, name: str, conn=None) -> str:
    digest = hashlib.sha256(name.encode()).hexdigest()
    routines.console_session_open(conn or world.db.conn, token, world.namespace, digest, b"sealed", 3600)
    return digest


def test_R17_migration_0018_keeps_every_session_and_a_disable_locks_only_its_credentials(world, database):
    leaving = world.credential(["workflows:read"], actor="leaving")
    staying = world.credential(["workflows:read"], actor="staying")
    theirs = [session(world, leaving["token"], f"l{i}") for i in range(2)]
    ours = [session(world, staying["token"], f"s{i}") for i in range(3)]
    theirs.append(session(world, leaving["token"], "l2"))  # after the other credential's, in the table's order

    index_added_again(world, database, MIGRATION, "weave_console_sessions", "ix_console_session_credential")

    # A sign-out of the leaving credential, half done: its last session's row is held. The disable locks the
    # credential, then its sessions, and waits for that one; meanwhile the other credential signs in and out as if
    # nothing were under way (a disable that read every session would hold theirs, read before the one it waits for).
    holder = world.db.connect()
    holder.begin()
    with holder.cursor() as cur:
        cur.execute("SELECT id FROM weave_console_sessions WHERE session_hash = %s FOR UPDATE", (theirs[-1],))
    answer: dict = {}
    admin = world.db.connect()
    with admin.cursor() as cur:  # an admin's SQL session at the server's default level
        cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
    disabling = threading.Thread(target=lambda: answer.update(routines.credential_disable(
        admin, world.admin, world.namespace, leaving["credential_id"])))
    disabling.start()
    try:
        assert world.db.comes_to_wait_for_a_lock(admin)  # the disable holds its locks and waits for the held one
        other = world.db.connect()
        with other.cursor() as cur:
            cur.execute("SET SESSION innodb_lock_wait_timeout = 1")  # any wait for the disable's locks fails
        assert routines.console_session_close(other, ours[0])
        ours.append(session(world, staying["token"], "s-new", other))
        other.close()
    finally:
        holder.rollback()
        holder.close()
        disabling.join(30)
        admin.close()
    assert answer["status"] == "DISABLED"
    left = {r["session_hash"] for r in world.db.rows("SELECT session_hash FROM weave_console_sessions")}
    assert left == set(ours[1:]) and not left & set(theirs)


def test_S2_a_sign_in_sweeps_expired_sessions_by_their_keys_and_waits_for_no_live_one(world):
    """Expired sessions of any namespace go at the next sign-in, a hundred at most; live ones stay. The sweep finds
    them by a plain read and deletes each by its key: a live session another transaction is deleting (a sign-out
    under way, which marks its entry in the expiry index too) keeps no sign-in waiting."""
    short = [hashlib.sha256(f"x{i}".encode()).hexdigest() for i in range(2)]
    for digest in short:
        routines.console_session_open(world.db.conn, world.token, world.namespace, digest, b"sealed", 60)
    live = session(world, world.token, "live")  # an hour: the first entry past the expired ones
    world.db.advance(61_000)
    signing_out = world.db.connect()
    with signing_out.cursor() as cur:  # as weave_console_session_close runs: at READ COMMITTED, deleting by id
        cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
    signing_out.begin()
    with signing_out.cursor() as cur:  # what a sign-out does, not yet committed
        cur.execute("SELECT id FROM weave_console_sessions WHERE session_hash = %s FOR UPDATE", (live,))
        cur.execute("DELETE FROM weave_console_sessions WHERE id = %s", (cur.fetchone()["id"],))
    try:
        other = world.db.connect()
        with other.cursor() as cur:
            cur.execute("SET SESSION innodb_lock_wait_timeout = 1")  # any wait for the sign-out fails
        session(world, world.token, "new", other)
        other.close()
    finally:
        signing_out.rollback()
        signing_out.close()
    left = {r["session_hash"] for r in world.db.rows("SELECT session_hash FROM weave_console_sessions")}
    assert not left & set(short) and live in left and len(left) == 2
    many = [hashlib.sha256(f"y{i}".encode()).hexdigest() for i in range(102)]
    for digest in many:
        routines.console_session_open(world.db.conn, world.token, world.namespace, digest, b"sealed", 60)
    world.db.advance(61_000)
    session(world, world.token, "newer")
    left = {r["session_hash"] for r in world.db.rows("SELECT session_hash FROM weave_console_sessions")}
    assert len(left & set(many)) == 2  # a hundred at a time: two for the next sign-in
