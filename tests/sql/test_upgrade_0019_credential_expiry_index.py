"""R-17 upgrade test for migration 0019 (the credentials that expire found by their expiry): a database with active,
disabled, expiring and expired credentials, taken back to level 18 and migrated again, keeps every credential as it
was, and the status lists the ones about to expire before those past their time."""

from __future__ import annotations

import datetime as dt
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
        assert str(reader.thread_id()) in line and "lock_wait_timeout" in line
        assert not done  # still waiting: the reader's transaction is open
    finally:
        reader.rollback()
        reader.close()
    migrating.join(60)
    assert done and done[0].migrations_applied == [MIGRATION]
