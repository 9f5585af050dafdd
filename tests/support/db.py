"""The test-side handle on a real database: routine calls, plain reads, the test clock."""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Iterator
from typing import Any

import pymysql
from yoyo import read_migrations

from procedures import db as dbmod
from procedures import installer
from tests.support.server import as_user, create_user, drop_user
from tests.support.waiting import wait_for


def roll_back_migration(dsn: dbmod.Dsn, migration: str) -> None:
    """Takes the database back to the level before ``migration`` (an upgrade test's previous level, R-17) by the
    migration's own rollback: the rows stay, what the migration added goes."""
    backend = installer._yoyo_backend(dsn)
    migrations = read_migrations(str(installer.MIGRATIONS_DIR))
    with backend.lock():
        backend.rollback_migrations(migrations.filter(lambda m: m.id == migration))


def columns(db: Any, table: str) -> set[str]:
    """The columns ``table`` has now: an upgrade test's look at the level its database is at."""
    return {r["c"] for r in db.rows("SELECT COLUMN_NAME AS c FROM information_schema.COLUMNS WHERE "
                                    "TABLE_SCHEMA = DATABASE() AND TABLE_NAME = %s", table)}


def index_added_again(world: Any, dsn: dbmod.Dsn, migration: str, table: str, index: str) -> None:
    """R-17 for a migration that adds ``index`` to ``table``: the database taken back to the level before it (the
    index gone, the rows kept) and migrated again, that migration alone, keeps the table's rows as they were and has
    the index."""

    def indexes() -> set[str]:
        return {r["k"] for r in world.db.rows("SELECT INDEX_NAME AS k FROM information_schema.STATISTICS WHERE "
                                              "TABLE_SCHEMA = DATABASE() AND TABLE_NAME = %s", table)}

    roll_back_migration(dsn, migration)
    assert index not in indexes()  # the previous level
    kept = world.db.rows(f"SELECT * FROM {table} ORDER BY id")
    assert installer.migrate(dsn, test_clock=True).migrations_applied == [migration]
    assert index in indexes()
    assert world.db.rows(f"SELECT * FROM {table} ORDER BY id") == kept


# A conflict on demand: while the session's @test_conflicts is above 0, each audit insert on that session uses one
# up and fails with 1213, as a Galera certification failure does (R-12's retries are tried against it).
CONFLICT_TRIGGER = ("CREATE TRIGGER test_conflict BEFORE INSERT ON weave_audit FOR EACH ROW "
                    "BEGIN IF @test_conflicts > 0 THEN SET @test_conflicts = @test_conflicts - 1; "
                    "SIGNAL SQLSTATE '40001' SET MYSQL_ERRNO = 1213, MESSAGE_TEXT = 'certification conflict'; "
                    "END IF; END")

# MariaDB's default sql_mode (without NO_ZERO_DATE and NO_ZERO_IN_DATE): what a plain SQL client's session runs under.
CLIENT_SQL_MODE = "STRICT_TRANS_TABLES,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION"

# Tables that hold install state rather than scenario data: kept across tests.
KEEP = {"weave_install", "weave_routines"}


@contextlib.contextmanager
def a_user(database: dbmod.Dsn, name: str, options: str) -> Iterator[dbmod.Dsn]:
    """A user of the test database only, created ``WITH`` the given limits (``MAX_USER_CONNECTIONS 1``,
    ``MAX_STATEMENT_TIME 0.5``), for the block: its DSN. Dropped after, whatever happens."""
    admin = dbmod.connect(database)
    try:
        create_user(admin, name, "ALL", database.database, options)
        yield as_user(database, name)
    finally:
        drop_user(admin, name)
        admin.close()


class Db:
    def __init__(self, dsn: dbmod.Dsn):
        self.dsn = dsn
        self.conn = dbmod.connect(dsn)

    def close(self) -> None:
        self.conn.close()

    def connect(self) -> pymysql.Connection:
        """A second, independent connection (for concurrency tests)."""
        return dbmod.connect(self.dsn)

    def client(self, sql_mode: str = CLIENT_SQL_MODE) -> pymysql.Connection:
        """A connection as a plain SQL client's session, under ``sql_mode`` rather than the one the engine's own
        connections pin: routine arguments are converted under the caller's mode."""
        conn = self.connect()
        with conn.cursor() as cur:
            cur.execute("SET SESSION sql_mode = %s", (sql_mode,))
        return conn

    def call(self, routine: str, *args: Any) -> list[list[dict]]:
        return dbmod.call(self.conn, routine, *args)

    def one(self, routine: str, *args: Any) -> dict | None:
        return dbmod.call_one(self.conn, routine, *args)

    def rows(self, sql: str, *args: Any) -> list[dict]:
        with self.conn.cursor() as cur:
            cur.execute(sql, args)
            return list(cur.fetchall())

    def row(self, sql: str, *args: Any) -> dict | None:
        rows = self.rows(sql, *args)
        return rows[0] if rows else None

    def scalar(self, sql: str, *args: Any) -> Any:
        row = self.row(sql, *args)
        return None if row is None else next(iter(row.values()))

    def execute(self, sql: str, *args: Any) -> int:
        with self.conn.cursor() as cur:
            return cur.execute(sql, args)

    def now(self) -> dt.datetime:
        return self.one("weave_clock_now")["now_at"]

    def advance(self, ms: int) -> dt.datetime:
        """Move the database test clock (R-2); tests never sleep for a due time."""
        return self.one("weave_test_clock_advance", ms)["now_at"]

    def advance_to(self, moment: dt.datetime) -> dt.datetime:
        gap = moment - self.now()
        ms = max(0, int(gap.total_seconds() * 1000) + 1)
        return self.advance(ms)

    def comes_to_wait_for_a_lock(self, conn: pymysql.Connection, timeout: float = 30.0) -> bool:
        """Whether ``conn``'s transaction is seen waiting for a lock within ``timeout`` seconds."""
        # The server refreshes INNODB_TRX only when it was last read over 0.1 s ago: a faster poll sees it stale.
        return wait_for(lambda: self.scalar(
            "SELECT COUNT(*) FROM information_schema.INNODB_TRX WHERE trx_mysql_thread_id = %s "
            "AND trx_state = 'LOCK WAIT'", conn.thread_id()) == 1, timeout=timeout, interval=0.2)

    def in_flight(self, owner: str = "app", name: str | None = None) -> int:
        """The tasks in flight of an app or queue by the engine's own count (its slots taken less the releases of
        every stripe, M-4.7b); ``name`` may be left out when the scenario has only one."""
        table, kind = {"app": ("weave_apps", "APP"), "queue": ("weave_queues", "QUEUE")}[owner]
        return int(self.scalar(
            f"SELECT o.slots_taken - (SELECT SUM(r.released) FROM pulse_slot_releases r WHERE r.owner_kind = %s "
            f"AND r.owner_id = o.id) FROM {table} o WHERE %s IS NULL OR o.name = %s", kind, name, name))

    def table_counts(self) -> dict[str, int]:
        counts = {}
        for table in scenario_tables(self.conn):
            counts[table] = self.scalar(f"SELECT COUNT(*) FROM `{table}`")
        return counts


def scenario_tables(conn: pymysql.Connection) -> list[str]:
    with conn.cursor() as cur:
        cur.execute("SELECT TABLE_NAME AS t FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() "
                    "AND (TABLE_NAME LIKE 'weave\\_%%' OR TABLE_NAME LIKE 'pulse\\_%%') ORDER BY TABLE_NAME")
        return [r["t"] for r in cur.fetchall() if r["t"] not in KEEP]


def reset(conn: pymysql.Connection) -> None:
    """A clean scenario: every data row gone, test triggers dropped, the test clock back at zero."""
    with conn.cursor() as cur:
        cur.execute("SELECT TRIGGER_NAME AS t FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = DATABASE()")
        for row in cur.fetchall():
            cur.execute(f"DROP TRIGGER IF EXISTS `{row['t']}`")
        tables = scenario_tables(conn)
        for table in tables:
            cur.execute(f"DELETE FROM `{table}`")
        cur.execute("UPDATE weave_install SET clock_offset_us = 0 WHERE id = 1")
        if "weave_metric_folds" in tables:  # as installed: nothing folded into the sums of /metrics yet
            cur.execute("INSERT INTO weave_metric_folds (id, folded_until, folded_at) "
                        "VALUES (1, '1000-01-01', '1000-01-01')")
