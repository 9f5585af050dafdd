"""``weave migrate``: yoyo migrations for tables, our own loader for routines, and the level check.

Routine bodies stay out of yoyo: it splits files with sqlparse, which cuts compound statements,
and its hooks run only when a migration applied. Each routine file is sent whole as one statement
after DROP (with the blocks of the routines it inlines, see inlining.py), under a pinned sql_mode (a
routine keeps the mode it was created under), and recorded with the digest of what was sent, so that a
re-run replaces exactly the routines whose text changed (R-15).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pymysql

from . import db, errors, inlining

PROCEDURES_DIR = Path(__file__).resolve().parent


def shipped_folder(packaged: Path, checkout: Path) -> Path:
    """A folder a checkout keeps outside the packages (the migrations in sql/, the examples in docs/examples/):
    inside the package in an installed wheel, where pyproject.toml maps it, else in the checkout."""
    return packaged if packaged.is_dir() else checkout


MIGRATIONS_DIR = shipped_folder(PROCEDURES_DIR / "migrations", PROCEDURES_DIR.parent / "sql")
_CREATE = re.compile(r"^\s*CREATE\s+(PROCEDURE|FUNCTION)\s+`?(\w+)`?", re.IGNORECASE | re.MULTILINE)


@dataclass(frozen=True)
class Routine:
    name: str
    kind: str
    path: Path
    text: str  # its file
    installed: str  # what the installer sends: the file with the calls of inlined routines expanded
    digest: str  # of what is installed: a routine is installed again when a routine inlined into it changes

    @property
    def area(self) -> str:
        """The folder the routine lives in: core, instances, timers, polls, signals, pulse, control, admin."""
        return self.path.parent.name

    @property
    def public(self) -> bool:
        """An interface for any SQL client, or called only by other routines (its COMMENT opens 'Internal.')."""
        return not re.search(r"COMMENT\s+'Internal\.", self.text)


@dataclass
class MigrateReport:
    database: str
    migrations_applied: list[str] = field(default_factory=list)
    routines_installed: list[str] = field(default_factory=list)
    routines_dropped: list[str] = field(default_factory=list)
    clock_mode: str = "PRODUCTION"

    @property
    def changed(self) -> bool:
        return bool(self.migrations_applied or self.routines_installed or self.routines_dropped)


def shipped_routines(directory: Path = PROCEDURES_DIR) -> list[Routine]:
    """The routines this code ships: one ``<area>/<name>.sql`` file per routine, named after it, each with the
    calls of the routines marked ``-- Inlined:`` expanded (see procedures/inlining.py). Read once per process, like
    the Python code beside them: a running node checks the database against the build it started with (its start,
    each readiness probe), never against files installed over it since."""
    return list(_routines_in(directory))


@functools.lru_cache(maxsize=4)
def _routines_in(directory: Path) -> tuple[Routine, ...]:
    files = []
    for path in sorted(directory.rglob("*.sql"), key=lambda p: p.stem):
        if MIGRATIONS_DIR in path.parents:
            continue
        text = path.read_text(encoding="utf-8")
        match = _CREATE.search(text)
        if not match or match.group(2) != path.stem:
            raise ValueError(f"{path.name}: must hold exactly one CREATE PROCEDURE {path.stem}(...)")
        files.append((path, match.group(1).upper(), text))
    installed = _installed(tuple((path.stem, text) for path, _, text in files))
    routines = []
    for (path, kind, text), sent in zip(files, installed, strict=True):
        digest = hashlib.sha256(sent.encode("utf-8")).hexdigest()
        routines.append(Routine(path.stem, kind, path, text, sent, digest))
    return tuple(routines)


def _installed(sources: tuple[tuple[str, str], ...]) -> tuple[str, ...]:
    """The texts to install for these (name, file text) pairs."""
    inliner = inlining.Inliner(dict(sources))
    return tuple(inliner.expand(text) for _, text in sources)


def shipped_migrations(directory: Path = MIGRATIONS_DIR) -> list[str]:
    """The migrations this code ships, read once per process (as ``shipped_routines``)."""
    return list(_migrations_in(directory))


@functools.lru_cache(maxsize=4)
def _migrations_in(directory: Path) -> tuple[str, ...]:
    return tuple(sorted(p.stem for p in directory.glob("*.sql") if not p.name.endswith(".rollback.sql")))


def routines_digest(pairs: dict[str, str]) -> str:
    joined = "\n".join(f"{name}:{digest}" for name, digest in sorted(pairs.items()))
    return hashlib.sha256(joined.encode()).hexdigest()


def shipped_level() -> str:
    migrations = shipped_migrations()
    digest = routines_digest({r.name: r.digest for r in shipped_routines()})
    return f"{migrations[-1] if migrations else 'empty'} / routines {digest[:12]}"


def _yoyo_backend(dsn: db.Dsn) -> Any:
    """The migration tool's backend on one ready node, connected as every other connection of the engine is: its
    own connection read the server's sql_mode (a mode such as EMPTY_STRING_IS_NULL or ORACLE failed the schema's
    first statements), time zone and statement time limit, and dropped the DSN's TLS options (an owner made to
    present a certificate could not migrate, and a checked server certificate went unchecked)."""
    from yoyo.backends.core.mysql import MySQLBackend
    from yoyo.connections import default_migration_table, parse_uri

    one = db.pinned(dsn)

    class Backend(MySQLBackend):
        def connect(self, dburi: Any) -> Any:
            return db.migration_connection(one)

    backend = Backend(parse_uri(one.url(options=False)), default_migration_table)
    backend.init_database()
    return backend


def migrate(dsn: db.Dsn, *, test_clock: bool = False,
            progress: Callable[[str], None] = lambda _: None) -> MigrateReport:
    """Bring the database to the level this code ships. Safe to re-run: a second run changes nothing."""
    from yoyo import read_migrations

    shipped = shipped_routines()
    if not shipped_migrations() or not shipped:
        raise errors.InvalidState(
            f"INVALID_STATE: this installation of Weave is incomplete: no migrations in {MIGRATIONS_DIR} or no "
            f"routines in {PROCEDURES_DIR}; reinstall the package")
    report = MigrateReport(database=dsn.database)
    with _migrate_lock(dsn, progress):
        with db.connect(dsn, database=False) as conn, conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE IF NOT EXISTS `{dsn.database}` CHARACTER SET {CHARSET} COLLATE {COLLATION}")
            _own_character_set(cur, dsn.database, progress)
        with db.connect(dsn) as conn:
            _refuse_a_newer_database(conn)
            _refuse_statement_binlog(conn)

        backend = _yoyo_backend(dsn)
        migrations = read_migrations(str(MIGRATIONS_DIR))
        # The migration tool's own lock is a row, which a migrate killed while applying migrations leaves behind
        # (the next one waited for it, then failed). Under the named lock no other migrate runs: a row is stale.
        backend.break_lock()
        failed: BaseException | None = None
        try:
            with backend.lock():
                pending = backend.to_apply(migrations)
                if pending:
                    _ensure_progress_table(backend)
                    _mark_level_changing(backend)
                for migration in pending:
                    try:
                        _apply_resumable(backend, migration, dsn, progress)
                    except MigrationFailed as exc:
                        failed = exc
                        break
                    except KeyboardInterrupt as exc:
                        # Ctrl-C, maybe while a statement runs: the driver drops a session interrupted in a reply,
                        # and the migration tool's lock release then failed on it, its error taking the place of
                        # the interrupt. The session is closed (the statement stands whole or not at all, and stays
                        # in flight in the progress) and the interrupt is what the caller gets.
                        failed = exc
                        with contextlib.suppress(Exception):
                            backend.connection.close()
                        break
                    report.migrations_applied.append(migration.id)
        except pymysql.err.MySQLError:
            if failed is None:
                raise
            # The lock's row is left on a session that is gone; the next migrate breaks it (above).
        if failed is not None:
            raise failed

        with db.connect(dsn) as conn:
            report.clock_mode = _ensure_install_row(conn, test_clock)
            _install_routines(conn, report, progress, shipped)
    return report


# --- Migrations that resume -----------------------------------------------------------------------------------
# A migration's statements are not one transaction: each DDL statement commits by itself. A migrate killed midway
# (a lost ssh session, an upgrade's long ALTER cut off) or stopped by an error (a full disk, a Galera write-set
# limit) used to leave part of a migration applied and none of it recorded, and the next migrate failed on the part
# that stood: the way out was a restore. Each statement's progress is now recorded as it goes, so the next migrate
# goes on from the statement that did not finish. A statement whose answer was lost (the session killed while it
# ran) is marked in flight: on the server a DDL statement is atomic, applied whole or not at all, so it is run
# again, and an answer that what it creates already exists (or what it drops is gone) proves that it was applied.
# Only that statement, and only a DDL statement, is taken as applied so: a data statement is committed together
# with its progress, and is simply run again when it did not commit.
PROGRESS_TABLE = "weave_migration_progress"
# The answers of a DDL statement run a second time after it was applied that show its effect stands: a table,
# column, index or constraint it creates already exists (1050, 1060, 1061, 1826), one it drops is gone (1051, 1091).
# Not "unknown column" or "unknown table" in general (1054, 1146): a rename's source gone says nothing of its
# target, and the engine does not guess.
ALREADY_APPLIED_ERRNOS = frozenset({1050, 1051, 1060, 1061, 1091, 1826})
_DDL = re.compile(r"^(?:\s+|--[^\n]*\n|/\*.*?\*/)*(?:ALTER|CREATE|DROP|RENAME)\b", re.IGNORECASE | re.DOTALL)


# Before a migration changes a table, the recorded digests of the routines are marked as no build's. A node of any
# build, this one or the one before, then refuses the database until a migrate has finished and installed
# the routines again, instead of starting on tables between two levels (a column renamed under the routines it runs)
# and sending instances to review. A migrate stopped part-way leaves the mark, and the next one finishes the level.
CHANGING = "~"


def _mark_level_changing(backend: Any) -> None:
    if backend.execute("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() "
                       "AND TABLE_NAME = 'weave_routines'").fetchone()[0]:  # none yet in a new database
        backend.execute(f"UPDATE weave_routines SET digest = CONCAT('{CHANGING}', LEFT(digest, 63)) "
                        f"WHERE LEFT(digest, 1) <> '{CHANGING}'")
    backend.connection.commit()


def _ensure_progress_table(backend: Any) -> None:
    backend.execute(
        f"CREATE TABLE IF NOT EXISTS {PROGRESS_TABLE} ("
        " migration_id VARCHAR(255) NOT NULL PRIMARY KEY COMMENT 'A migration begun and not yet recorded applied.',"
        " statements_applied INT NOT NULL COMMENT 'How many of its statements, from the first, are applied.',"
        " in_flight BOOLEAN NOT NULL COMMENT 'TRUE: the next statement was sent and its answer not seen (it may "
        "stand).',"
        " statements_digest CHAR(64) NOT NULL COMMENT 'SHA-256 of the statements as that migrate read them: a "
        "migration changed since is not resumed.',"
        " updated_at DATETIME(6) NOT NULL COMMENT 'When the progress was last recorded (UTC).'"
        ") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin "
        "COMMENT='The progress of a weave migrate through a migration, so that a migrate stopped midway resumes.'")
    # A table made by a build that kept no digest: its rows (a migrate stopped midway by that build) cannot be shown
    # to be of these statements, so they get none, and are refused as changed since.
    kept = backend.execute("SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() "
                           "AND TABLE_NAME = :table AND COLUMN_NAME = 'statements_digest'",
                           {"table": PROGRESS_TABLE}).fetchone()[0]
    if not kept:
        backend.execute(f"ALTER TABLE {PROGRESS_TABLE} ADD COLUMN statements_digest CHAR(64) NOT NULL "
                        "COMMENT 'SHA-256 of the statements as that migrate read them: a migration changed since is "
                        "not resumed.' AFTER in_flight")
    backend.connection.commit()


def _record(backend: Any, migration_id: str, digest: str, applied: int, in_flight: bool) -> None:
    backend.execute(f"INSERT INTO {PROGRESS_TABLE} (migration_id, statements_applied, in_flight, statements_digest, "
                    "updated_at) VALUES (:id, :applied, :in_flight, :digest, UTC_TIMESTAMP(6)) ON DUPLICATE KEY "
                    "UPDATE statements_applied = VALUES(statements_applied), in_flight = VALUES(in_flight), "
                    "updated_at = VALUES(updated_at)",
                    {"id": migration_id, "applied": applied, "in_flight": in_flight, "digest": digest})


def _headline(statement: str) -> str:
    """A statement's first line of SQL, without its comments (what an operator watching a long migrate reads)."""
    lines = [line.strip() for line in statement.splitlines() if line.strip() and not line.strip().startswith("--")]
    head = lines[0] if lines else ""
    return head if len(head) <= 100 else head[:99] + "…"


# A session ended under a statement (a lost connection, or KILL CONNECTION: 1927) gives no answer about it.
def _session_lost(exc: BaseException) -> bool:
    return errors.is_connection_lost(exc) or errors.errno_of(exc) == 1927


# How often a statement that waits for a table's metadata lock says so while it waits (seconds).
LOCK_WAIT_REPORT_S = 10.0


@contextlib.contextmanager
def _waits_said(dsn: db.Dsn, migrating: Any, progress: Callable[[str], None]) -> Iterator[None]:
    """While the block runs, a look every LOCK_WAIT_REPORT_S at the migrating session (``migrating``, its
    connection, on one server of ``dsn``): when its statement waits for a table's metadata lock, say so, with the
    sessions that have a transaction open (one that has used the table holds that lock until it ends: a report left
    open, a forgotten console). The statement waited up to the server's lock_wait_timeout, a day by default, and
    said nothing; it still waits, but not silently."""
    stop = threading.Event()
    session = migrating.thread_id()
    server = dsn.single(migrating.host, migrating.port).with_options(
        connect_timeout=LOCK_WAIT_REPORT_S, read_timeout=LOCK_WAIT_REPORT_S, write_timeout=LOCK_WAIT_REPORT_S)

    def watch() -> None:
        conn: db.Connection | None = None
        try:
            while not stop.wait(LOCK_WAIT_REPORT_S):
                try:
                    conn = conn or db.connect(server)
                    with conn.cursor() as cur:
                        # A user sees its own sessions in the process list without PROCESS: the migrate's is one.
                        cur.execute("SELECT STATE AS state, TIME AS seconds, @@lock_wait_timeout AS most "
                                    "FROM information_schema.PROCESSLIST WHERE ID = %s", (session,))
                        row = cur.fetchone()
                    if not row or "metadata lock" not in (row["state"] or ""):
                        continue
                    holders = _open_transactions(conn, session)
                    if not stop.is_set():
                        progress(f"  waiting {row['seconds']} s for the table's metadata lock, which an open "
                                 "transaction that used the table holds (sessions with a transaction open: "
                                 f"{holders}); end them, or the statement waits up to the server's "
                                 f"lock_wait_timeout ({row['most']} s)")
                except Exception:  # noqa: BLE001 - only a report: the migrate goes on whatever it meets
                    if conn is not None:
                        with contextlib.suppress(Exception):
                            conn.close()
                    conn = None
        finally:
            if conn is not None:
                with contextlib.suppress(Exception):
                    conn.close()

    watcher = threading.Thread(target=watch, name="weave-migrate-waits", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        stop.set()
        watcher.join(5)


def _open_transactions(conn: db.Connection, session: int) -> str:
    """The ids of the sessions with a transaction open, but ``session`` (INNODB_TRX needs PROCESS: without it, said)."""
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT trx_mysql_thread_id AS id FROM information_schema.INNODB_TRX "
                        "WHERE trx_mysql_thread_id <> %s ORDER BY trx_started LIMIT 10", (session,))
            return ", ".join(str(r["id"]) for r in cur.fetchall()) or "none"
    except pymysql.err.MySQLError:
        return "this user may not see them without PROCESS; SELECT * FROM information_schema.innodb_trx shows them"


def _apply_resumable(backend: Any, migration: Any, dsn: db.Dsn, progress: Callable[[str], None]) -> None:
    """Apply ``migration`` statement by statement from where an earlier migrate left it, recording each statement's
    progress, then record the migration applied and forget its progress in one transaction."""
    from yoyo.migrations import read_sql_migration

    statements = read_sql_migration(migration.path)[2]
    backend.connection.autocommit(False)  # a data statement commits with its progress, never before it
    digest = hashlib.sha256("\n;\n".join(statements).encode()).hexdigest()
    row = backend.execute(f"SELECT statements_applied, in_flight, statements_digest FROM {PROGRESS_TABLE} "
                          "WHERE migration_id = :id", {"id": migration.id}).fetchone()
    backend.connection.commit()
    applied, in_flight = (int(row[0]), bool(row[1])) if row else (0, False)
    if row and row[2] != digest:
        raise MigrationFailed(migration.id, None, dsn.database, applied + 1, len(statements))
    if row:
        progress(f"resuming migration {migration.id} at statement {applied + 1} of {len(statements)}: an earlier "
                 f"migrate applied {applied}" + (" and was cut off while the next one ran" if in_flight else ""))
    else:
        progress(f"applying migration {migration.id} ({len(statements)} statements)")
    for number in range(applied, len(statements)):
        statement, ran = statements[number], False
        inherited = number == applied and in_flight  # sent by a migrate that was cut off: it may stand
        progress(f"  statement {number + 1} of {len(statements)}: {_headline(statement)}")
        try:
            _record(backend, migration.id, digest, number, True)
            backend.connection.commit()
            try:
                with contextlib.ExitStack() as watching:
                    if _DDL.match(statement):
                        watching.enter_context(_waits_said(dsn, backend.connection, progress))
                    with contextlib.closing(backend.cursor()) as cur:
                        cur.execute(statement)  # as the migration tool runs it: sent as written, no parameters
            except pymysql.err.MySQLError as exc:
                if not (inherited and _DDL.match(statement) and errors.errno_of(exc) in ALREADY_APPLIED_ERRNOS):
                    raise
                progress(f"statement {number + 1} of migration {migration.id} had been applied by the migrate that "
                         "was cut off")
            ran = True
            _record(backend, migration.id, digest, number + 1, False)  # with a data statement, in its transaction
            backend.connection.commit()
        except pymysql.err.MySQLError as exc:
            with contextlib.suppress(pymysql.err.MySQLError):
                backend.connection.rollback()  # a data statement's work, not committed with its progress
                # Refused with an answer, this run did not apply it; one it inherited in flight may still stand.
                if not ran and not inherited and not _session_lost(exc):
                    _record(backend, migration.id, digest, number, False)
                    backend.connection.commit()
            raise MigrationFailed(migration.id, exc, dsn.database, number + 1, len(statements)) from exc
    backend.ensure_internal_schema_updated()
    backend.log_migration(migration, "apply")
    with backend.transaction():
        backend.mark_one(migration, log=False)
        backend.execute(f"DELETE FROM {PROGRESS_TABLE} WHERE migration_id = :id", {"id": migration.id})


@dataclass
class MigratePlan:
    """What ``migrate`` would do to a database now, read without changing anything."""

    database: str
    exists: bool
    migrations: list[dict[str, Any]] = field(default_factory=list)  # id, statements, resumes_at (None: from the start)
    routines_to_install: list[str] = field(default_factory=list)
    routines_to_drop: list[str] = field(default_factory=list)

    @property
    def changes(self) -> bool:
        return not self.exists or bool(self.migrations or self.routines_to_install or self.routines_to_drop)


def plan(dsn: db.Dsn) -> MigratePlan:
    """What ``migrate(dsn)`` would apply and install now, and where a migration a migrate left midway resumes; reads
    only. A database a newer build migrated is refused as ``migrate`` refuses it."""
    from yoyo.migrations import read_sql_migration

    shipped = shipped_routines()
    with db.connect(dsn, database=False) as conn, conn.cursor() as cur:
        cur.execute("SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = %s", (dsn.database,))
        exists = cur.fetchone() is not None
    result = MigratePlan(database=dsn.database, exists=exists)
    applied: list[str] = []
    stopped: tuple[str, int] | None = None
    if exists:
        with db.connect(dsn) as conn:
            _refuse_a_newer_database(conn)
            _refuse_statement_binlog(conn)
            applied = database_level(conn)[0]
            stopped = _migration_in_progress(conn)
            with conn.cursor() as cur:
                try:
                    install, drop = _routine_changes(cur, shipped)
                except pymysql.err.ProgrammingError:  # no routines recorded yet
                    install, drop = shipped, {}
        result.routines_to_install, result.routines_to_drop = [r.name for r in install], sorted(drop)
    else:
        result.routines_to_install = [r.name for r in shipped]
    for migration in shipped_migrations():
        if migration not in applied:
            statements = len(read_sql_migration(str(MIGRATIONS_DIR / f"{migration}.sql"))[2])
            resumes = stopped[1] + 1 if stopped and stopped[0] == migration else None
            result.migrations.append({"id": migration, "statements": statements, "resumes_at": resumes})
    return result


class MigrationFailed(errors.WeaveError):
    """A statement of a migration failed. The migrations before it are applied and recorded, and so are its own
    statements before the one that failed: the next migrate resumes at that one. The message gives the database's
    own error."""

    code = "MIGRATION_FAILED"

    def __init__(self, migration: str, exc: BaseException | None, database: str, number: int, total: int):
        where = f"migration {migration} failed at statement {number} of {total}"
        if exc is None:  # no statement failed: the migration a migrate stopped in has changed since
            super().__init__(
                f"MIGRATION_FAILED: {where}: a migrate stopped in it at that statement, and its statements have "
                "changed since (another build of Weave). Finish it with the build that began it, or restore the "
                "backup taken before that migrate; then run `weave migrate` again.")
            return
        cause = exc
        while isinstance(cause.__context__, pymysql.err.MySQLError):  # the first error, before a failed rollback
            cause = cause.__context__
        said = cause.args[-1] if cause.args else cause
        if errors.errno_of(cause) in ALREADY_APPLIED_ERRNOS:
            # What the statement makes stands, and no migrate recorded applying it.
            what = ("What it makes already stands, although no migrate recorded applying it: "
                    + ("this is a first install that stopped partway, and the database holds nothing yet. Drop it "
                       f"(DROP DATABASE `{database}`; check first that it is the right one) and run `weave migrate` "
                       "again." if migration == shipped_migrations()[0] and number == 1 else
                       "the database was changed by hand, restored from a copy taken during a migrate, or left "
                       "partway by a migrate of a build older than this one. Restore the backup taken before that "
                       "migrate, then run `weave migrate` again."))
        elif _session_lost(cause):
            what = ("The session was lost while the statement ran: run `weave migrate` again, and it resumes there "
                    "(the statements before it are applied and recorded).")
        else:
            what = ("The statements before it are applied and recorded. Remove the cause the database names (space, "
                    "a limit, a lock held by another session), then run `weave migrate` again: it resumes at this "
                    "statement.")
        super().__init__(f"MIGRATION_FAILED: {where}: the database answered {errors.errno_of(cause)}: {said}. {what}")


# A server with its binary log on refuses CREATE FUNCTION from a user without SUPER, unless
# log_bin_trust_function_creators is set.
FUNCTIONS_NEED_SUPER = 1419


class InstallRefused(errors.WeaveError):
    """The server refused to create a routine for a reason of its configuration, which the message names."""

    code = "INSTALL_REFUSED"

    @classmethod
    def functions_need_super(cls, kind: str, name: str) -> InstallRefused:
        return cls(
            f"INSTALL_REFUSED: the server refused to create {kind} {name}: its binary log is on, and it takes stored "
            "functions from a user without SUPER only with log_bin_trust_function_creators = 1 (the engine's "
            "functions are DETERMINISTIC NO SQL or READS SQL DATA). Set it on the server (SET GLOBAL, and in its "
            "configuration), or migrate as a user with SUPER, then run `weave migrate` again.")


def _refuse_statement_binlog(conn: db.Connection) -> None:
    """A server that logs statements (binlog_format = STATEMENT) refuses every write of a READ COMMITTED transaction
    (1665), which is how the engine's decisions run: installed there, every due timer went to review within a
    second. Refused before anything is changed, naming the setting."""
    if db.logs_statements(db.write_settings(conn)):
        raise InstallRefused("INSTALL_REFUSED: the database server logs statements (binlog_format = STATEMENT), and "
                             "refuses every write of the engine's READ COMMITTED transactions (1665). Set "
                             "binlog_format = ROW on the server (SET GLOBAL, and in its configuration), then run "
                             "`weave migrate` again.")


MIGRATE_LOCK_WAIT_S = 300
# The database's defaults: every table names its own, but a routine's string parameters and variables take the
# database's default character set when the routine is created.
CHARSET, COLLATION = "utf8mb4", "utf8mb4_bin"


def _own_character_set(cur: Any, database: str, progress: Callable[[str], None]) -> None:
    """A database created beforehand (by a DBA, or on a server whose default is latin1) may default to another
    character set; the routines created in it would then refuse or convert any text outside it (a reason with
    a "✓" answered "Incorrect string value"). Its defaults become utf8mb4_bin; tables are unchanged."""
    cur.execute("SELECT DEFAULT_CHARACTER_SET_NAME AS cs, DEFAULT_COLLATION_NAME AS co "
                "FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = %s", (database,))
    row = cur.fetchone()
    if row and (row["cs"], row["co"]) != (CHARSET, COLLATION):
        progress(f"setting the database's default character set to {CHARSET} ({COLLATION}), from {row['cs']} "
                 f"({row['co']}): routines take it for their text")
        cur.execute(f"ALTER DATABASE `{database}` CHARACTER SET {CHARSET} COLLATE {COLLATION}")


def migrate_lock_name(database: str) -> str:
    """The server-wide name of the lock that one migrate of ``database`` holds (GET_LOCK names are 64 chars)."""
    return "weave.migrate." + hashlib.sha256(database.encode()).hexdigest()[:32]


@contextlib.contextmanager
def _migrate_lock(dsn: db.Dsn, progress: Callable[[str], None]) -> Iterator[None]:
    """One ``weave migrate`` of a database at a time: routines are installed by DROP and CREATE, and two
    installers at once fail on each other's CREATE (1304, "already exists"). yoyo's lock covers only its
    migrations. This is a named lock of the server, held by a session of its own, so a migrate killed midway
    frees it with its connection instead of leaving a row that blocks every later one."""
    name = migrate_lock_name(dsn.database)
    # Its session waits for the lock up to MIGRATE_LOCK_WAIT_S: a shorter read timeout in the DSN would end it.
    waiting = dsn.with_options(read_timeout=max(dsn.timeout("read_timeout"), MIGRATE_LOCK_WAIT_S + 30))
    conn = db.connect(waiting, database=False)
    try:
        with conn.cursor() as cur:
            def take(wait_s: int) -> bool:
                cur.execute("SELECT GET_LOCK(%s, %s) AS got", (name, wait_s))
                row = cur.fetchone()
                return row is not None and row["got"] == 1

            if not take(0):
                progress("waiting for another weave migrate of this database to finish")
                if not take(MIGRATE_LOCK_WAIT_S):
                    raise errors.InvalidState(
                        f"INVALID_STATE: another weave migrate of {dsn.database} has held its lock for "
                        f"{MIGRATE_LOCK_WAIT_S} s; run this one again once that one has finished")
        yield
    finally:
        conn.close()  # the lock goes with its session


def _ensure_install_row(conn: db.Connection, test_clock: bool) -> str:
    wanted = "TEST" if test_clock else "PRODUCTION"
    with conn.cursor() as cur:
        cur.execute("INSERT IGNORE INTO weave_install (id, clock_mode, clock_offset_us, installed_at) "
                    "VALUES (1, %s, 0, UTC_TIMESTAMP(6))", (wanted,))
        cur.execute("SELECT clock_mode FROM weave_install WHERE id = 1")
        row = cur.fetchone()
        assert row is not None  # the row was just inserted if it was missing
        mode = row["clock_mode"]
    if test_clock and mode != "TEST":
        # The clock mode is chosen when a database is first installed: turning a production database
        # into a test one would let anyone move its clock.
        raise errors.InvalidState(
            "INVALID_STATE: this database was installed without --test-clock; the test clock can only "
            "be enabled on a fresh install")
    return mode


# An executable comment (`/*M!100301 SET STATEMENT ... FOR */`): the server keeps a routine's body with the markers of
# those it runs taken out, and MySQL keeps them whole; a body is compared with both taken out.
EXECUTABLE_COMMENT = re.compile(r"/\*M?!\d{5,6}(.*?)\*/", re.S)


def _body(text: str) -> str:
    """A routine's body, from its BEGIN line, as the server keeps it, executable comments opened."""
    return EXECUTABLE_COMMENT.sub(r"\1", text[text.find("\nBEGIN"):]).rstrip()


def _changed_by_hand(cur: Any, routines: list[Routine], *, unreadable: bool = True) -> list[Routine]:
    """Of ``routines``, present with the digests this build recorded, those whose body on the server is not the one
    it installed: replaced by hand (a hot fix, another build's routine created over it). Their records still say
    this build's, so only their bodies tell. Their parameters and characteristics are not compared: a change there
    fails every caller at once, where a body's change can fail one decision in a thousand. A body the session may not
    read (a user that is not the routines' owner) counts as changed when ``unreadable``."""
    changed = []
    for routine in routines:
        cur.execute(f"SHOW CREATE {routine.kind} `{routine.name}`")
        row = cur.fetchone() or {}
        text = row.get(f"Create {routine.kind.title()}")
        if text is None and not unreadable:
            continue
        if text is None or _body(text) != _body(routine.installed):
            changed.append(routine)
    return changed


def routines_changed_by_hand(conn: db.Connection) -> list[str]:
    """The routines recorded as this build's whose body on the server is another (``weave status --check``, after
    the level check, which names a missing one); those this session may not read are left out."""
    shipped = {r.name: r for r in shipped_routines()}
    with conn.cursor() as cur:
        cur.execute("SELECT name, digest FROM weave_routines")
        recorded = [shipped[row["name"]] for row in cur.fetchall()
                    if row["name"] in shipped and shipped[row["name"]].digest == row["digest"]]
        return sorted(r.name for r in _changed_by_hand(cur, recorded, unreadable=False))


def _routine_changes(cur: Any, shipped: list[Routine]) -> tuple[list[Routine], dict[str, str]]:
    """The shipped routines to install (new, changed, changed by hand, or not installed as the migrating user would
    install them), and the recorded ones to drop (name -> kind), on the database of ``cur``."""
    cur.execute("SELECT name, kind, digest FROM weave_routines")
    recorded = {row["name"]: row for row in cur.fetchall()}
    # A routine created under other database defaults (see _own_character_set) is installed again, and so is one
    # another user owns (restored from a dump with its routines, maybe of a user this server does not have): the
    # routines run with their definer's rights, and are owned by whoever migrates.
    cur.execute("SELECT ROUTINE_NAME AS name FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = DATABASE() "
                "AND DATABASE_COLLATION = %s AND DEFINER = CURRENT_USER()", (COLLATION,))
    present = {row["name"] for row in cur.fetchall()}
    install = [r for r in shipped if not (recorded.get(r.name) and recorded[r.name]["digest"] == r.digest
                                          and r.name in present)]
    installing = {r.name for r in install}
    install += _changed_by_hand(cur, [r for r in shipped if r.name not in installing])
    names = {r.name for r in shipped}
    return install, {name: row["kind"] for name, row in recorded.items() if name not in names}


def _install_routines(conn: db.Connection, report: MigrateReport, progress: Callable[[str], None],
                      shipped: list[Routine]) -> None:
    with conn.cursor() as cur:
        install, drop = _routine_changes(cur, shipped)
        for routine in install:
            progress(f"installing {routine.kind.lower()} {routine.name}")
            cur.execute(f"DROP {routine.kind} IF EXISTS `{routine.name}`")
            try:
                cur.execute(routine.installed)
            except pymysql.err.MySQLError as exc:
                if errors.errno_of(exc) == FUNCTIONS_NEED_SUPER:
                    raise InstallRefused.functions_need_super(routine.kind.lower(), routine.name) from exc
                raise
            cur.execute(
                "REPLACE INTO weave_routines (name, kind, digest, installed_at) "
                "VALUES (%s, %s, %s, UTC_TIMESTAMP(6))",
                (routine.name, routine.kind, routine.digest))
            report.routines_installed.append(routine.name)
        for name, kind in drop.items():
            progress(f"dropping {kind.lower()} {name}")
            cur.execute(f"DROP {kind} IF EXISTS `{name}`")
            cur.execute("DELETE FROM weave_routines WHERE name = %s", (name,))
            report.routines_dropped.append(name)


def database_level(conn: db.Connection) -> tuple[list[str], dict[str, str]]:
    """Applied migration ids and recorded routine digests of the connected database."""
    with conn.cursor() as cur:
        try:
            cur.execute("SELECT migration_id FROM _yoyo_migration ORDER BY migration_id")
            applied = [row["migration_id"] for row in cur.fetchall()]
            cur.execute("SELECT name, digest FROM weave_routines")
            digests = {row["name"]: row["digest"] for row in cur.fetchall()}
        except pymysql.err.ProgrammingError:
            return [], {}
        except pymysql.err.MySQLError as exc:
            # A server that does not answer (or drops the session) is transient, not a level: a process that
            # checks at boot starts and answers 503 until it answers, instead of failing to boot.
            raise errors.translate(exc) from exc
    return applied, digests


def _missing_routines(conn: db.Connection, routines: dict[str, str]) -> list[str]:
    """The routines recorded as installed that the database does not have (a dump restored without them)."""
    with conn.cursor() as cur:
        try:
            cur.execute("SELECT ROUTINE_NAME AS name FROM information_schema.ROUTINES "
                        "WHERE ROUTINE_SCHEMA = DATABASE()")
            present = {row["name"] for row in cur.fetchall()}
        except pymysql.err.MySQLError as exc:
            raise errors.translate(exc) from exc
    return sorted(set(routines) - present)


def _unknown_migrations(applied: list[str]) -> list[str]:
    """The migrations applied to a database that this code does not ship: a newer build migrated it."""
    shipped = set(shipped_migrations())
    return [m for m in applied if m not in shipped]


def _newer(applied: list[str], unknown: list[str]) -> errors.SchemaMismatch:
    return errors.SchemaMismatch(
        f"SCHEMA_MISMATCH: database is at level {applied[-1]}, newer than this code: it ships level "
        f"{shipped_level()}, without the migration(s) {', '.join(unknown[:8])}. Run the build that migrated the "
        "database; to go back to this one, restore the backup taken before that migrate.")


def _refuse_a_newer_database(conn: db.Connection) -> None:
    """An older build's migrate would put its routines back over a newer build's tables and drop the routines it
    does not know, then say the database was at its level: it changes nothing instead."""
    applied, _ = database_level(conn)
    unknown = _unknown_migrations(applied)
    if unknown:
        raise _newer(applied, unknown)


def check_level(conn: db.Connection) -> None:
    """Refuse to run against a database that is not at exactly the level this code ships (R-16)."""
    applied, digests = database_level(conn)
    unknown = _unknown_migrations(applied)
    if unknown:
        raise _newer(applied, unknown)
    shipped = shipped_migrations()
    routines = {r.name: r.digest for r in shipped_routines()}
    if applied == shipped and digests == routines:
        missing = _missing_routines(conn, routines)
        if not missing:
            return
        if len(missing) == len(routines):  # the server shows a user only the routines it may run
            raise errors.SchemaMismatch(
                f"SCHEMA_MISMATCH: database is at level {shipped_level()}, but this user sees none of its "
                f"{len(routines)} routines (routines missing: {', '.join(missing[:8])}): they were not restored "
                "with a backup (run `weave migrate` to install them, then start the nodes), or this user may not "
                "execute them (GRANT EXECUTE ON the database to it, as docs/operations.md sets it up).")
        raise errors.SchemaMismatch(
            f"SCHEMA_MISMATCH: database is at level {shipped_level()}, but {len(missing)} of its {len(routines)} "
            f"routines are not installed (routines missing: {', '.join(missing[:8])}), as after a restore of a "
            "backup without routines. Run `weave migrate` to install them, then start the nodes.")
    routines_have = routines_digest(digests)[:12] if digests else "none"
    have = f"{applied[-1] if applied else 'empty'} / routines {routines_have}"
    want = shipped_level()
    changing = bool(digests) and all(d.startswith(CHANGING) for d in digests.values())
    differing = sorted(set(digests.items()) ^ set(routines.items()))
    hint = (f" (routines differing: {', '.join(sorted({n for n, _ in differing})[:8])})"
            if differing and not changing else "")
    stopped = _migration_in_progress(conn)
    if stopped:
        hint += (f"; a migrate of {stopped[0]} stopped after {stopped[1]} of its statements, and `weave migrate` "
                 "resumes it there")
    elif changing:
        hint += "; a `weave migrate` began changing its tables and has not finished, and `weave migrate` finishes it"
    raise errors.SchemaMismatch(
        f"SCHEMA_MISMATCH: database is at level {have}; this code ships level {want}{hint}. "
        "Stop the old nodes, run `weave migrate`, then start the new ones.")


def _migration_in_progress(conn: db.Connection) -> tuple[str, int] | None:
    """The migration a migrate began and did not finish, and how many of its statements it applied, if any."""
    with conn.cursor() as cur:
        try:
            cur.execute(f"SELECT migration_id, statements_applied FROM {PROGRESS_TABLE} "
                        "ORDER BY migration_id LIMIT 1")
        except pymysql.err.ProgrammingError:  # a database migrated before progress was recorded
            return None
        row = cur.fetchone()
    return (row["migration_id"], row["statements_applied"]) if row else None
