"""R-17 upgrade test for migration 0019 (the credentials that expire found by their expiry): a database with active,
disabled, expiring and expired credentials, taken back to level 18 and migrated again, keeps every credential as it
was, and the status lists the ones about to expire before those past their time."""

from __future__ import annotations

import datetime as dt

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
