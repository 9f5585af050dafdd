"""R-17 upgrade test of migration 0002.console_sessions: a database at level 0001 with data in it migrates
to the shipped level, keeps its rows, and then serves console sessions."""

from __future__ import annotations

import shutil

import pytest
from yoyo import get_backend, read_migrations

from procedures import db as dbmod
from procedures import installer, routines


@pytest.fixture
def level_one(database, tmp_path):
    dsn = database.with_database(f"{database.database}_upg")
    with dbmod.connect(dsn, database=False) as conn, conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{dsn.database}`")
        cur.execute(f"CREATE DATABASE `{dsn.database}` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
    old = tmp_path / "sql"
    old.mkdir()
    shutil.copy(installer.MIGRATIONS_DIR / "0001.schema.sql", old)
    backend = get_backend(dsn.url())
    with backend.lock():
        backend.apply_migrations(backend.to_apply(read_migrations(str(old))))
    yield dsn
    with dbmod.connect(dsn, database=False) as conn, conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{dsn.database}`")


def test_R17_upgrade_to_0002_console_sessions_keeps_rows_and_serves_sessions(level_one):
    with dbmod.connect(level_one) as conn, conn.cursor() as cur:
        cur.execute("SHOW TABLES LIKE 'weave_console_sessions'")
        assert list(cur.fetchall()) == []
        cur.execute("INSERT INTO weave_namespaces (name, created_at) VALUES ('kept', UTC_TIMESTAMP(6))")
    report = installer.migrate(level_one, test_clock=True)
    assert "0002.console_sessions" in report.migrations_applied
    assert report.migrations_applied == installer.shipped_migrations()[1:]
    with dbmod.connect(level_one) as conn:
        installer.check_level(conn)  # exactly the shipped level now
        with conn.cursor() as cur:
            cur.execute("SELECT name FROM weave_namespaces")
            assert [r["name"] for r in cur.fetchall()] == ["kept"]
            cur.execute("SHOW INDEX FROM weave_instances WHERE Key_name = 'ix_instance_business_key'")
            assert [r["Column_name"] for r in cur.fetchall()] == ["namespace_id", "business_key", "id"]
        admin = routines.namespace_bootstrap(conn, "fresh")["token"]
        token = routines.credential_create(conn, admin, "fresh", "ops", ["workflows:read"])["token"]
        opened = routines.console_session_open(conn, token, "fresh", "a" * 64, b"sealed", 600)
        assert opened["scopes"] == ["workflows:read"]
        assert routines.console_session_get(conn, "a" * 64)["namespace"] == "fresh"
    assert not installer.migrate(level_one, test_clock=True).changed
