"""R-17 upgrade test for migration 0019 (the credentials that expire found by their expiry): a database with active,
disabled, expiring and expired credentials, taken back to level 18 and migrated again, keeps every credential as it
was, and the status lists the ones about to expire before those past their time."""

from __future__ import annotations

import datetime as dt
import os
import re
import threading

from procedures import routines
from tests.support.db import index_added_again

MIGRATION = "0019.credential-expiry-index"


def test_R17_migration_0019_keeps_every_credential_and_lists_the_expiring_ones_first(world, database):
    conn = world.db.conn
    soon = world.db.now() + dt.timedelta(seconds=1)
    expired = [routines.credential_create(conn, world.admin, world.namespace, f"ci-{n}", ["workflows:read"],
                                          expires_at=soon)["credential_id"] for n in range(3)]
    world.db.advance(2_000)
    expiring = routines.credential_create(conn, world.admin, world.namespace, "contractor", ["workflows:read"],
                                          expires_at=world.db.now() + dt.timedelta(days=2))["credential_id"]
    retired = world.credential(["workflows:read"], actor="retired")["credential_id"]
    routines.credential_disable(conn, world.admin, world.namespace, retired)

    index_added_again(world, database, MIGRATION, "weave_credentials", "ix_credential_expiry")
    listed = [c["credential_id"] for c in routines.status(conn)["expiring_credentials"]]
    assert listed == [expiring, *reversed(expired)]


def test_R16_a_migrate_waiting_behind_a_reader_s_open_transaction_says_so(world, database, monkeypatch):
    """A reporting session left open after reading a table holds its metadata lock: the migration that changes the
    table waited behind it up to the server's lock_wait_timeout, a day by default, and said nothing. It still waits,
    and says so while it does, with the sessions that have a transaction open."""
    from procedures import installer
    from tests.support.db import roll_back_migration
    from tests.support.waiting import wait_for

    roll_back_migration(database, MIGRATION)
    monkeypatch.setattr(installer, "LOCK_WAIT_REPORT_S", 0.2)
    reader = world.db.connect()
    said: list[str] = []
    done: list[object] = []
    try:
        reader.begin()
        with reader.cursor() as cur:
            cur.execute("SELECT COUNT(*) FROM weave_credentials")
        migrating = threading.Thread(target=lambda: done.append(installer.migrate(database, test_clock=True,
                                                                                  progress=said.append)))
        migrating.start()
        assert wait_for(lambda: any("metadata lock" in line for line in said), timeout=20), said
        line = next(line for line in said if "metadata lock" in line)
        assert re.search(rf"\b{reader.thread_id()}\b", line) and "lock_wait_timeout" in line, line
        assert not done  # still waiting: the reader's transaction is open
    finally:
        reader.rollback()
        reader.close()
    migrating.join(60)
    assert done and done[0].migrations_applied == [MIGRATION]


def test_R16_an_owner_that_may_not_see_other_sessions_transactions_is_told_where_to_look(db):
    """The documented owner holds privileges on the database only: without PROCESS it may not list the open
    transactions, and the migrate's notice says how to see them instead of failing to say anything."""
    from procedures import db as dbmod
    from procedures import installer
    from tests.support.server import as_user, create_user, drop_user

    name = f"weave_t_{os.getpid()}_owner"
    admin = db.connect()
    drop_user(admin, name)
    create_user(admin, name, "SELECT", db.dsn.database)
    try:
        with dbmod.connect(as_user(db.dsn, name)) as owner:
            assert "without PROCESS" in installer._open_transactions(owner, owner.thread_id())
        assert "without PROCESS" not in installer._open_transactions(db.conn, db.conn.thread_id())  # root sees them
    finally:
        drop_user(admin, name)
        admin.close()
