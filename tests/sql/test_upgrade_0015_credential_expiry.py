"""R-17 upgrade test for migration 0015 (a credential may expire): credentials made at level 14, taken back to it
and migrated again, keep every field, have no expiry, and authenticate as before; a credential made afterwards
may expire."""

from __future__ import annotations

import datetime as dt

import pytest

from procedures import errors, installer, routines
from tests.support.db import roll_back_migration

MIGRATION = "0015.credential-expiry"


def test_R17_migration_0015_keeps_every_credential_working_without_an_expiry(world, database):
    reader = world.credential(["workflows:read"], actor="reader")
    routines.credential_disable(world.db.conn, world.admin, "acme", world.credential(["workflows:read"])[
        "credential_id"])
    columns = "id, namespace_id, actor, token_hash, scopes, queues, status, created_at, disabled_at"
    before = world.db.rows(f"SELECT {columns} FROM weave_credentials ORDER BY id")
    roll_back_migration(database, MIGRATION)
    assert "expires_at" not in {c["Field"] for c in world.db.rows("SHOW COLUMNS FROM weave_credentials")}
    assert installer.migrate(database, test_clock=True).migrations_applied == [MIGRATION]
    assert world.db.rows(f"SELECT {columns} FROM weave_credentials ORDER BY id") == before
    assert world.db.scalar("SELECT COUNT(*) FROM weave_credentials WHERE expires_at IS NOT NULL") == 0
    assert routines.instance_list(world.db.conn, reader["token"], "acme")["items"] == []
    temp = routines.credential_create(world.db.conn, world.admin, "acme", "temp", ["workflows:read"],
                                      expires_at=world.db.now() + dt.timedelta(minutes=1))["token"]
    world.db.advance(60_000)
    with pytest.raises(errors.Unauthenticated):
        routines.instance_list(world.db.conn, temp, "acme")
