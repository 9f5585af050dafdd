"""The schema and its installation (M-1, R-15, R-16)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import threading
import time
from collections.abc import Iterator

import pymysql
import pytest
from yoyo.migrations import read_sql_migration

from procedures import db as dbmod
from procedures import errors, installer, routines
from tests.support.db import roll_back_migration
from tests.support.server import drop_user
from tests.support.waiting import wait_for, wait_for_value


@contextlib.contextmanager
def scratch_database(database: dbmod.Dsn, suffix: str) -> Iterator[dbmod.Dsn]:
    """A database of the test's own beside the suite's, dropped after it, whatever happened."""
    fresh = database.with_database(f"{database.database}_{suffix}")
    try:
        yield fresh
    finally:
        with dbmod.connect(fresh, database=False) as conn, conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{fresh.database}`")


def test_M1_every_table_and_column_has_a_comment(db):
    tables = db.rows("SELECT TABLE_NAME AS t, TABLE_COMMENT AS c FROM information_schema.TABLES "
                     "WHERE TABLE_SCHEMA = DATABASE() AND (TABLE_NAME LIKE 'weave%%' OR TABLE_NAME LIKE 'pulse%%')")
    assert len(tables) >= 20
    assert [r["t"] for r in tables if not r["c"].strip()] == []
    columns = db.rows("SELECT TABLE_NAME AS t, COLUMN_NAME AS c FROM information_schema.COLUMNS "
                      "WHERE TABLE_SCHEMA = DATABASE() AND (TABLE_NAME LIKE 'weave%%' OR TABLE_NAME LIKE 'pulse%%') "
                      "AND COLUMN_COMMENT = ''")
    assert columns == []


def test_M1_no_foreign_keys_anywhere(db):
    fks = db.rows("SELECT CONSTRAINT_NAME FROM information_schema.REFERENTIAL_CONSTRAINTS "
                  "WHERE CONSTRAINT_SCHEMA = DATABASE()")
    assert fks == []


def test_M1_correlation_keys_are_exact_bytes(db):
    types = db.rows("SELECT TABLE_NAME AS t, DATA_TYPE AS d FROM information_schema.COLUMNS "
                    "WHERE TABLE_SCHEMA = DATABASE() AND COLUMN_NAME = 'correlation_key'")
    assert {r["t"]: r["d"] for r in types} == {
        "weave_activations": "varbinary", "weave_waits": "varbinary", "weave_signals": "varbinary"}


def test_R15_second_migrate_changes_nothing(database):
    report = installer.migrate(database, test_clock=True)
    assert not report.changed
    assert report.migrations_applied == [] and report.routines_installed == []


def test_R15_migrates_run_at_once_install_everything_once_and_never_fail_on_each_other(database):
    """Routines are installed by DROP and CREATE: two installers at once used to fail on each other's CREATE
    (1304, already exists). Three migrates of one fresh database now take turns: one installs everything, the
    others wait for it and find nothing to do."""
    with scratch_database(database, "race") as fresh:
        reports: list[installer.MigrateReport] = []
        failures: list[BaseException] = []

        def migrate() -> None:
            try:
                reports.append(installer.migrate(fresh))
            except BaseException as exc:  # noqa: BLE001 - reported below
                failures.append(exc)

        threads = [threading.Thread(target=migrate) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert failures == [] and len(reports) == 3
        installed = sorted(name for r in reports for name in r.routines_installed)
        assert installed == sorted(r.name for r in installer.shipped_routines())  # each exactly once
        assert sorted(len(r.migrations_applied) for r in reports) == [0, 0, len(installer.shipped_migrations())]
        with dbmod.connect(fresh) as conn:
            installer.check_level(conn)


def test_R15_migrate_plan_says_what_a_first_install_would_do_and_does_none_of_it(database, capsys):
    from orchestrator.cli import main

    with scratch_database(database, "plan") as fresh:
        assert main(["migrate", "--plan", "--dsn", fresh.url(), "--json"]) == 0
        planned = json.loads(capsys.readouterr().out)
        assert planned["exists"] is False and planned["changes"] is True
        assert [m["id"] for m in planned["migrations"]] == installer.shipped_migrations()
        assert planned["routines_to_install"] == [r.name for r in installer.shipped_routines()]
        with dbmod.connect(fresh, database=False) as conn, conn.cursor() as cur:
            cur.execute("SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = %s",
                        (fresh.database,))
            assert not cur.fetchall()  # not even created
        assert main(["migrate", "--plan", "--dsn", fresh.url()]) == 0
        said = capsys.readouterr().out
        assert f"create the database {fresh.database}" in said and "apply migration 0001.schema (25 statements)" \
            in said
        installer.migrate(fresh)
        assert main(["migrate", "--plan", "--dsn", fresh.url()]) == 0
        assert "weave migrate has nothing to do" in capsys.readouterr().out


def test_R15_a_migrate_waits_for_another_and_says_so_and_a_lost_holder_frees_it(database):
    """The turn is a named lock of the server held by the migrating session: a migrate that finds it taken says
    that it waits, and one whose holder's session ends (a migrate killed midway) goes on."""
    holder = dbmod.connect(database, database=False)
    said: list[str] = []
    done: list[installer.MigrateReport] = []
    name = installer.migrate_lock_name(database.database)
    with holder.cursor() as cur:
        cur.execute("SELECT GET_LOCK(%s, 0) AS got", (name,))
        assert cur.fetchone()["got"] == 1
    thread = threading.Thread(target=lambda: done.append(installer.migrate(database, test_clock=True,
                                                                          progress=said.append)))
    thread.start()
    try:
        assert wait_for(lambda: "waiting for another weave migrate of this database to finish" in said, timeout=30)
        assert done == []
    finally:
        holder.close()  # as a killed migrate's session ends
    thread.join(60)
    assert len(done) == 1 and not done[0].changed


def test_R15_a_migrate_killed_while_applying_migrations_does_not_stop_the_next(database):
    """A migrate killed while it applied migrations (an upgrade's long ALTER, a lost ssh session) left the migration
    tool's own lock row behind: the next migrate waited 10 s and died with a traceback telling the operator to run
    a tool the manual never mentions. The named lock already keeps migrates apart, so a row found while holding it
    was left by a migrate that is gone: the next migrate goes on at once."""
    with dbmod.connect(database) as conn, conn.cursor() as cur:
        cur.execute("INSERT INTO yoyo_lock (locked, ctime, pid) VALUES (1, UTC_TIMESTAMP(), 4242)")
    began = time.monotonic()
    report = installer.migrate(database, test_clock=True)
    assert not report.changed and time.monotonic() - began < 5
    with dbmod.connect(database) as conn, conn.cursor() as cur:
        cur.execute("SELECT COUNT(*) AS n FROM yoyo_lock")
        assert cur.fetchone()["n"] == 0


def _schema(conn: dbmod.Connection) -> dict[str, str]:
    """Every table's definition, as the server writes it (the AUTO_INCREMENT counter left out)."""
    with conn.cursor() as cur:
        cur.execute("SELECT TABLE_NAME AS t FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE()")
        tables = sorted(r["t"] for r in cur.fetchall())
        shown = {}
        for table in tables:
            cur.execute(f"SHOW CREATE TABLE `{table}`")
            shown[table] = re.sub(r" AUTO_INCREMENT=\d+", "", cur.fetchone()["Create Table"])
        return shown


def _session_running(conn: dbmod.Connection, database: str, statement: str) -> int | None:
    """The id of the session of ``database`` running a statement that begins with ``statement``, if one does."""
    with conn.cursor() as cur:
        cur.execute("SELECT ID AS id FROM information_schema.PROCESSLIST WHERE DB = %s AND INFO LIKE %s",
                    (database, statement + "%"))
        row = cur.fetchone()
        return row["id"] if row else None


def test_R15_a_migrate_cut_off_midway_resumes_where_it_stopped_and_the_schema_is_the_one_shipped(database):
    """A migration's statements commit one by one, so a migrate cut off midway (a lost session, an operator's
    Ctrl-C during a long ALTER) left part of a migration applied and none of it recorded: the next migrate failed on
    what stood, and the way out was a restore. Each statement's progress is recorded now. Here a real migrate is cut
    off twice in one migration of DDL and data statements (0013): first while its first ALTER waits for a table
    another session reads (the ALTER never ran), then after a later ALTER applied but before its progress was
    recorded (the statement stands, unrecorded). Each next migrate resumes there; the last one ends with exactly
    the schema of a database migrated in one go, and the rows the data statements made."""
    target = "0013.metrics-rollup"
    later = installer.shipped_migrations()[installer.shipped_migrations().index(target):]
    with scratch_database(database, "resume") as fresh:
        installer.migrate(fresh, test_clock=True)
        with dbmod.connect(fresh) as conn:
            shipped = _schema(conn)
        for migration in reversed(later):
            roll_back_migration(fresh, migration)
        with dbmod.connect(fresh) as conn, conn.cursor() as cur:
            cur.execute("INSERT INTO weave_poll_rounds (id, namespace_id, instance_id, activation_id, round_no, "
                        "task_id, outcome, result_at, created_at) VALUES "
                        "(1, 1, 1, 1, 1, 1, 'DONE', '2026-01-02', '2026-01-01')")

        def cut_off(blocked_table: str | None, then_hold_progress: bool, kill: str = "CONNECTION") -> str:
            """Run a migrate until it waits for ``blocked_table`` (read by another session's open transaction), then
            end its session: while it waits, or (``then_hold_progress``) once the ALTER ran and its progress is
            being recorded; with no table, while it waits to record its progress before its next statement, and
            ``kill`` QUERY interrupts that write only (an answer, the session goes on). What the cut-off migrate
            raised."""
            said: list[BaseException] = []
            reader, holder, admin = (dbmod.connect(fresh, autocommit=False) for _ in range(3))
            try:
                with reader.cursor() as cur:  # holds the table's metadata lock until its transaction ends
                    cur.execute(f"SELECT 1 FROM {blocked_table or installer.PROGRESS_TABLE} LIMIT 1")
                if blocked_table is None:
                    reader.rollback()
                    with holder.cursor() as cur:
                        cur.execute(f"SELECT * FROM {installer.PROGRESS_TABLE} FOR UPDATE")

                def run() -> None:
                    try:
                        installer.migrate(fresh, test_clock=True)
                    except errors.WeaveError as exc:
                        said.append(exc)

                thread = threading.Thread(target=run)
                thread.start()
                if blocked_table is None:
                    statement = f"INSERT INTO {installer.PROGRESS_TABLE}"
                elif then_hold_progress:
                    assert wait_for(lambda: _session_running(admin, fresh.database, f"ALTER TABLE {blocked_table}"))
                    with holder.cursor() as cur:
                        cur.execute(f"SELECT * FROM {installer.PROGRESS_TABLE} FOR UPDATE")
                    reader.rollback()  # the ALTER runs, and its progress then waits for the holder
                    statement = f"INSERT INTO {installer.PROGRESS_TABLE}"
                else:
                    statement = f"ALTER TABLE {blocked_table}"
                session = wait_for_value(lambda: _session_running(admin, fresh.database, statement))
                with admin.cursor() as cur:
                    cur.execute(f"KILL {kill} {session}")
                holder.rollback()  # nothing the migrate does after the cut waits for the test
                thread.join(60)
            finally:
                for conn in (reader, holder, admin):
                    conn.rollback()
                    conn.close()
            assert len(said) == 1 and said[0].code == "MIGRATION_FAILED", said
            return str(said[0])

        said = cut_off("weave_poll_rounds", then_hold_progress=False)
        assert f"{target} failed at statement 1 of 8" in said and "resumes there" in said
        said = cut_off("weave_signals", then_hold_progress=True)  # resumes at 1, is cut off after 3 applied
        assert f"{target} failed at statement 3 of 8" in said and "resumes there" in said
        in_flight = [{"statements_applied": 2, "in_flight": 1}]
        with dbmod.connect(fresh) as conn, conn.cursor() as cur:
            cur.execute(f"SELECT statements_applied, in_flight FROM {installer.PROGRESS_TABLE}")
            assert cur.fetchall() == in_flight
            cur.execute("SHOW INDEX FROM weave_signals WHERE Key_name = 'ix_signal_final'")
            assert cur.fetchall()  # statement 3 stands, unrecorded
        # A migrate refused with an answer before its own run of that statement (here its progress write,
        # interrupted while it waits) learns nothing about the earlier run: the statement stays in flight.
        said = cut_off(None, then_hold_progress=False, kill="QUERY")
        assert f"{target} failed at statement 3 of 8: the database answered 1317" in said
        with dbmod.connect(fresh) as conn, conn.cursor() as cur:
            cur.execute(f"SELECT statements_applied, in_flight FROM {installer.PROGRESS_TABLE}")
            assert cur.fetchall() == in_flight

        planned = installer.plan(fresh)  # said without doing anything: the progress stays as it is
        assert planned.migrations == [{"id": target, "statements": 8, "resumes_at": 3}] + [
            {"id": m, "statements": _statements(m), "resumes_at": None} for m in later[1:]]
        with dbmod.connect(fresh) as conn, conn.cursor() as cur:
            cur.execute(f"SELECT statements_applied, in_flight FROM {installer.PROGRESS_TABLE}")
            assert cur.fetchall() == in_flight
        with dbmod.connect(fresh) as conn, pytest.raises(errors.SchemaMismatch) as mismatch:
            installer.check_level(conn)  # what a node (and /readyz, and weave status) says meanwhile
        assert f"a migrate of {target} stopped after 2 of its statements, and `weave migrate` resumes it there" \
            in str(mismatch.value)
        # Progress is kept against the statements as that migrate read them: a migration changed since (another
        # build) is not resumed at a statement number that now means another statement.
        with dbmod.connect(fresh) as conn, conn.cursor() as cur:
            cur.execute(f"SELECT statements_digest AS d FROM {installer.PROGRESS_TABLE}")
            digest = cur.fetchone()["d"]
            cur.execute(f"UPDATE {installer.PROGRESS_TABLE} SET statements_digest = %s", ("0" * 64,))
        with pytest.raises(installer.MigrationFailed) as changed:
            installer.migrate(fresh, test_clock=True)
        assert "its statements have changed since" in str(changed.value)
        # A progress table made by a build that kept no digest gets the column (its row none: changed since).
        with dbmod.connect(fresh) as conn, conn.cursor() as cur:
            cur.execute(f"ALTER TABLE {installer.PROGRESS_TABLE} DROP COLUMN statements_digest")
        with pytest.raises(installer.MigrationFailed) as changed:
            installer.migrate(fresh, test_clock=True)
        assert "its statements have changed since" in str(changed.value)
        with dbmod.connect(fresh) as conn, conn.cursor() as cur:
            cur.execute(f"UPDATE {installer.PROGRESS_TABLE} SET statements_digest = %s", (digest,))
        lines: list[str] = []
        report = installer.migrate(fresh, test_clock=True, progress=lines.append)
        assert report.migrations_applied == later
        assert f"resuming migration {target} at statement 3 of 8: an earlier migrate applied 2 and was cut off " \
               "while the next one ran" in lines
        assert f"statement 3 of migration {target} had been applied by the migrate that was cut off" in lines
        assert "  statement 3 of 8: ALTER TABLE weave_signals ADD KEY ix_signal_final (consumed_at);" in lines
        with dbmod.connect(fresh) as conn, conn.cursor() as cur:
            assert _schema(conn) == shipped
            installer.check_level(conn)
            cur.execute(f"SELECT COUNT(*) AS n FROM {installer.PROGRESS_TABLE}")
            assert cur.fetchone()["n"] == 0
            cur.execute("SELECT decided_at FROM weave_poll_rounds")  # the data statement ran once, in its place
            assert [str(r["decided_at"]) for r in cur.fetchall()] == ["2026-01-02 00:00:00"]
        assert not installer.migrate(fresh, test_clock=True).changed


def _statements(migration: str) -> int:
    return len(read_sql_migration(str(installer.MIGRATIONS_DIR / f"{migration}.sql"))[2])


def test_R15_a_migrate_interrupted_gives_up_its_session_at_once_and_the_next_goes_on(database):
    """Ctrl-C while a migrate's ALTER waits for a table another session reads. The driver drops a session
    interrupted in a reply, and the migration tool's lock release then failed on it: the operator was told of a
    database error (InterfaceError) instead of an interruption. The interrupt now reaches the caller, at once, while
    the reader still holds the table, and the next migrate resumes the statement left in flight."""
    altering = {m: re.search(r"ALTER TABLE (\w+)", (installer.MIGRATIONS_DIR / f"{m}.sql").read_text())
                for m in installer.shipped_migrations()}
    target = [m for m, found in altering.items() if found][-1]  # the newest migration that alters a table
    table = altering[target].group(1)
    with scratch_database(database, "interrupted") as fresh:
        installer.migrate(fresh, test_clock=True)
        roll_back_migration(fresh, target)
        reader, admin = dbmod.connect(fresh, autocommit=False), dbmod.connect(fresh)
        released = threading.Event()

        def interrupt_when_waiting() -> None:
            try:
                if wait_for(lambda: _session_running(admin, fresh.database, f"ALTER TABLE {table}")):
                    os.kill(os.getpid(), signal.SIGINT)  # as Ctrl-C does
                    released.wait(20)  # a hang is a failure below, not a hung suite: the reader lets go after 20 s
            finally:
                released.set()
                reader.rollback()

        # Python's own handler (a process started in the background, as CI's is, inherits SIGINT ignored).
        handler = signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            with reader.cursor() as cur:
                cur.execute(f"SELECT 1 FROM {table} LIMIT 1")  # the table's metadata lock, until rollback
            watchdog = threading.Thread(target=interrupt_when_waiting)
            watchdog.start()
            with pytest.raises(KeyboardInterrupt):
                installer.migrate(fresh, test_clock=True)
            assert not released.is_set()  # given back while the ALTER still waited: nothing waited for it
        finally:
            released.set()
            watchdog.join(60)
            signal.signal(signal.SIGINT, handler)
            reader.close()
            admin.close()
        planned = installer.plan(fresh)
        assert planned.migrations == [{"id": target, "statements": _statements(target), "resumes_at": 1}]
        assert installer.migrate(fresh, test_clock=True).migrations_applied == [target]
        with dbmod.connect(fresh) as conn:
            installer.check_level(conn)


def test_R15_a_migration_that_fails_partway_names_itself_and_its_cause(database, capsys):
    """A migration's DDL is not transactional: one stopped partway (a killed migrate) leaves part of it applied and
    unrecorded, and the next migrate fails on it. The operator was told only 'SAVEPOINT sp_1 does not exist', the
    migration tool's own failure to roll back, hiding which migration failed and why. The answer now names the
    migration, the database's own error, and what to do."""
    from orchestrator.cli import main

    with scratch_database(database, "partial") as fresh:
        # The newest migration that cannot run twice (it creates a table): one that only rebuilds an index, run
        # again, simply succeeds.
        last = next(m for m in reversed(installer.shipped_migrations())
                    if "CREATE TABLE" in (installer.MIGRATIONS_DIR / f"{m}.sql").read_text())
        installer.migrate(fresh)
        with dbmod.connect(fresh) as conn, conn.cursor() as cur:  # applied, but its record lost, as if killed
            cur.execute("DELETE FROM _yoyo_migration WHERE migration_id = %s", (last,))
        for _ in range(2):  # the same answer again: nothing of the failed run stands in the way
            assert main(["migrate", "--dsn", fresh.url(), "--json"]) == 1
            err = json.loads(capsys.readouterr().err)
            assert err["code"] == "MIGRATION_FAILED", err
            assert last in err["detail"] and "SAVEPOINT" not in err["detail"] and "backup" in err["detail"]
            assert "the database answered 1" in err["detail"]


def test_R16_a_migrate_stopped_partway_leaves_a_database_no_build_starts_on(database):
    """A migrate stopped part-way leaves tables between two levels. The nodes of the build before, whose migrations
    and routines the database still recorded, started on it, answered ready, and within a second sent instances to
    review on a column the stopped migration had renamed. Before a migration changes a table, the routines' recorded
    digests are now marked as no build's: every build refuses the database until a migrate has finished."""
    last = installer.shipped_migrations()[-1]
    with scratch_database(database, "changing") as fresh:
        installer.migrate(fresh, test_clock=True)
        roll_back_migration(fresh, last)  # the level before, as its build left it
        with dbmod.connect(fresh) as conn, conn.cursor() as cur:
            cur.execute("SELECT name, digest FROM weave_routines")
            before = {row["name"]: row["digest"] for row in cur.fetchall()}
            # In the way of the migration's first statement (the index it replaces, gone): the migrate stops there.
            assert last == "0024.instance-status-control", "block the last migration's first statement here"
            cur.execute("ALTER TABLE weave_instances DROP KEY ix_instance_status")
        with pytest.raises(installer.MigrationFailed):
            installer.migrate(fresh, test_clock=True)
        with dbmod.connect(fresh) as conn, conn.cursor() as cur:
            cur.execute("SELECT name, digest FROM weave_routines")
            after = {row["name"]: row["digest"] for row in cur.fetchall()}
            assert after.keys() == before.keys() and not {n for n in after if after[n] == before[n]}
            with pytest.raises(errors.SchemaMismatch) as refused:
                installer.check_level(conn)
            assert f"a migrate of {last} stopped after 0 of its statements" in str(refused.value)
            assert "routines differing" not in str(refused.value)
            cur.execute("ALTER TABLE weave_instances ADD KEY ix_instance_status (namespace_id, status, id)")
            cur.execute(f"DELETE FROM {installer.PROGRESS_TABLE}")  # as a migrate that applied it left it, before
            cur.execute("INSERT INTO _yoyo_migration (migration_hash, migration_id, applied_at_utc) "  # its routines
                        "VALUES (SHA2(%s, 256), %s, UTC_TIMESTAMP())", (last, last))
            with pytest.raises(errors.SchemaMismatch) as refused:
                installer.check_level(conn)
            assert "a `weave migrate` began changing its tables and has not finished" in str(refused.value)
            cur.execute("DELETE FROM _yoyo_migration WHERE migration_id = %s", (last,))
        report = installer.migrate(fresh, test_clock=True)
        assert report.migrations_applied == [last] and len(report.routines_installed) == len(before)
        with dbmod.connect(fresh) as conn:
            installer.check_level(conn)


def test_R15_a_first_install_killed_partway_says_to_start_it_again_on_an_empty_database(database, capsys):
    """A first `weave migrate` stopped partway (Ctrl-C, a lost session) leaves some tables and no recorded migration:
    there is no backup to restore, and nothing to keep. The answer says so, and following it works."""
    from orchestrator.cli import main

    with scratch_database(database, "first") as fresh:
        installer.migrate(fresh)
        with dbmod.connect(fresh) as conn, conn.cursor() as cur:  # tables made, nothing recorded
            cur.execute("DELETE FROM _yoyo_migration")
        assert main(["migrate", "--dsn", fresh.url(), "--json"]) == 1
        err = json.loads(capsys.readouterr().err)
        assert err["code"] == "MIGRATION_FAILED" and installer.shipped_migrations()[0] in err["detail"]
        assert "first install" in err["detail"] and f"DROP DATABASE `{fresh.database}`" in err["detail"]
        with dbmod.connect(fresh, database=False) as conn, conn.cursor() as cur:
            cur.execute(f"DROP DATABASE `{fresh.database}`")
        assert main(["migrate", "--dsn", fresh.url(), "--json"]) == 0


def test_R15_a_database_created_with_another_character_set_gets_routines_that_keep_any_text(database):
    """A database created beforehand with the server's default (latin1 on many MariaDB installs) made every
    routine's string parameter latin1: a reason with a check mark was refused ("Incorrect string value"), other
    text converted. Migrate gives the database utf8mb4_bin defaults, and installs again any routine that was
    created under other defaults (an installation made before this fix)."""
    with scratch_database(database, "latin") as fresh:
        params = ("SELECT COUNT(*) AS n FROM information_schema.PARAMETERS WHERE SPECIFIC_SCHEMA = %s "
                  "AND CHARACTER_SET_NAME IS NOT NULL AND CHARACTER_SET_NAME <> 'utf8mb4'")
        with dbmod.connect(fresh, database=False) as conn, conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE `{fresh.database}` CHARACTER SET latin1")
        said: list[str] = []
        installer.migrate(fresh, progress=said.append)
        assert any("default character set to utf8mb4" in line and "from latin1" in line for line in said)
        with dbmod.connect(fresh, database=False) as conn, conn.cursor() as cur:
            cur.execute(params, (fresh.database,))
            assert cur.fetchone()["n"] == 0
            # As an installation made before: the database back at latin1 and one routine created under it.
            cur.execute(f"ALTER DATABASE `{fresh.database}` CHARACTER SET latin1")
            send = next(r for r in installer.shipped_routines() if r.name == "weave_signal_send")
            cur.execute(f"USE `{fresh.database}`")
            cur.execute("DROP PROCEDURE weave_signal_send")
            cur.execute(send.text)
            cur.execute(params, (fresh.database,))
            assert cur.fetchone()["n"] > 0
        report = installer.migrate(fresh)
        assert report.routines_installed == ["weave_signal_send"]
        with dbmod.connect(fresh) as conn, conn.cursor() as cur:
            cur.execute(params, (fresh.database,))
            assert cur.fetchone()["n"] == 0
            cur.execute("SELECT 'approved by Zoë ✓' AS reason")  # the session itself speaks utf8mb4
            text = cur.fetchone()["reason"]
            # The routine takes the text as it is: a reason outside latin1 reaches its own checks, not a refusal.
            with pytest.raises(errors.WeaveError) as refused:
                dbmod.call(conn, "weave_signal_send", "wv_none", "acme", "wf_1", "k-1", "n", "1", "s", 1, b"c",
                           b"null", text, None)
            assert refused.value.code == "UNAUTHENTICATED"


def test_R15_every_shipped_routine_is_installed_with_its_digest(db):
    shipped = {r.name: r.digest for r in installer.shipped_routines()}
    recorded = {r["name"]: r["digest"] for r in db.rows("SELECT name, digest FROM weave_routines")}
    present = {r["n"] for r in db.rows("SELECT ROUTINE_NAME AS n FROM information_schema.ROUTINES "
                                       "WHERE ROUTINE_SCHEMA = DATABASE()")}
    assert recorded == shipped
    assert set(shipped) <= present


def test_R15_a_changed_routine_file_replaces_exactly_that_routine(database, tmp_path, monkeypatch):
    original = installer.shipped_routines()
    target = next(r for r in original if r.name == "weave_clock_now")
    changed = target.text.replace("SELECT v_now AS now_at", "SELECT v_now AS now_at /* changed */")
    (tmp_path / f"{target.name}.sql").write_text(changed)
    for r in original:
        if r.name != target.name:
            (tmp_path / f"{r.name}.sql").write_text(r.text)
    monkeypatch.setattr(installer, "PROCEDURES_DIR", tmp_path)
    monkeypatch.setattr(installer.shipped_routines, "__defaults__", (tmp_path,))
    try:
        planned = installer.plan(database)  # what the migrate below does, said before and without doing it
        assert (planned.migrations, planned.routines_to_install, planned.routines_to_drop) == (
            [], ["weave_clock_now"], [])
        report = installer.migrate(database, test_clock=True)
        assert report.routines_installed == ["weave_clock_now"]
        assert report.migrations_applied == [] and report.routines_dropped == []
        assert not installer.plan(database).changes
        with dbmod.connect(database) as conn, conn.cursor() as cur:
            cur.execute("SELECT ROUTINE_DEFINITION AS d FROM information_schema.ROUTINES "
                        "WHERE ROUTINE_SCHEMA = DATABASE() AND ROUTINE_NAME = 'weave_clock_now'")
            assert "/* changed */" in cur.fetchone()["d"]
    finally:
        monkeypatch.undo()
        report = installer.migrate(database, test_clock=True)
        assert report.routines_installed == ["weave_clock_now"]


def test_R15_a_changed_inlined_routine_replaces_it_and_every_routine_it_is_inlined_into(database, tmp_path,
                                                                                         monkeypatch):
    """A routine installed inline lives on in its callers' installed text: a change to it is a change to each."""
    original = installer.shipped_routines()
    target = next(r for r in original if r.name == "_weave_step_open")
    callers = sorted(r.name for r in original if "-- inline CALL _weave_step_open(" in r.installed)
    assert len(callers) >= 3  # the TIMER, SIGNAL and POLL handlers
    changed = target.text.replace("SET out_step_id = NULL, out_status = NULL",
                                  "SET out_step_id = NULL /* changed */, out_status = NULL")
    assert changed != target.text
    for r in original:
        (tmp_path / f"{r.name}.sql").write_text(changed if r.name == target.name else r.text)
    monkeypatch.setattr(installer, "PROCEDURES_DIR", tmp_path)
    monkeypatch.setattr(installer.shipped_routines, "__defaults__", (tmp_path,))
    try:
        report = installer.migrate(database, test_clock=True)
        assert sorted(report.routines_installed) == sorted([target.name, *callers])
        with dbmod.connect(database) as conn, conn.cursor() as cur:
            cur.execute("SELECT ROUTINE_NAME AS n FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = DATABASE() "
                        "AND ROUTINE_DEFINITION LIKE '%/* changed */%'")
            assert sorted(row["n"] for row in cur.fetchall()) == sorted([target.name, *callers])
    finally:
        monkeypatch.undo()
        report = installer.migrate(database, test_clock=True)
        assert sorted(report.routines_installed) == sorted([target.name, *callers])


def test_R15_a_new_routine_changes_no_other_routines_installed_text(tmp_path):
    """Blocks are numbered within each routine's own text: a routine added to the tree (here one that sorts first and
    inlines the shared opener) is installed alone, and every other routine's installed text and digest stay."""
    original = installer.shipped_routines()
    for r in original:
        (tmp_path / f"{r.name}.sql").write_text(r.text)
    (tmp_path / "_aaa_added.sql").write_text(
        "CREATE PROCEDURE _aaa_added()\n    COMMENT 'Internal. Description: added.'\n    MODIFIES SQL DATA\n"
        "BEGIN\n    DECLARE v_tx BOOLEAN DEFAULT FALSE;\n    CALL _weave_transaction_begin('_aaa_added', v_tx);\n"
        "    COMMIT;\nEND\n")
    grown = {r.name: r for r in installer.shipped_routines(tmp_path)}
    assert "-- inline CALL _weave_transaction_begin(" in grown["_aaa_added"].installed
    assert {r.name: r.digest for r in original} == {name: r.digest for name, r in grown.items() if name != "_aaa_added"}


def test_R16_a_running_node_checks_the_database_against_the_build_it_started_with(tmp_path):
    """A new build's files unpacked over a running node (before the node is stopped, as an upgrade in place does)
    change nothing it expects: it reads the routines and migrations once, as it loaded its Python code, so its
    readiness probe neither turns unready for the files nor ready for a database migrated to them."""
    for r in installer.shipped_routines():
        (tmp_path / f"{r.name}.sql").write_text(r.text)
    started = installer.shipped_routines(tmp_path)
    (tmp_path / "weave_scan.sql").write_text((tmp_path / "weave_scan.sql").read_text() + "\n-- a newer build\n")
    (tmp_path / "_aaa_added.sql").write_text("CREATE PROCEDURE _aaa_added()\n    COMMENT 'Internal. Description: new.'"
                                             "\n    READS SQL DATA\nBEGIN\n    SELECT 1;\nEND\n")
    assert installer.shipped_routines(tmp_path) == started
    migrations = tmp_path / "sql"
    migrations.mkdir()
    (migrations / "0001.schema.sql").write_text("-- level 1\n")
    assert installer.shipped_migrations(migrations) == ["0001.schema"]
    (migrations / "0002.more.sql").write_text("-- level 2\n")
    assert installer.shipped_migrations(migrations) == ["0001.schema"]


def test_R16_level_check_passes_on_a_current_database(db):
    installer.check_level(db.conn)


def test_R16_level_check_names_both_levels_when_behind(db):
    db.execute("UPDATE weave_routines SET digest = REPEAT('0', 64) WHERE name = 'weave_instance_start'")
    try:
        with pytest.raises(errors.SchemaMismatch) as info:
            installer.check_level(db.conn)
        message = str(info.value)
        assert installer.shipped_level() in message
        assert "weave_instance_start" in message and "weave migrate" in message
    finally:
        installer.migrate(db.dsn, test_clock=True)
    installer.check_level(db.conn)


def test_R16_migrate_of_an_older_build_refuses_a_database_a_newer_one_migrated_and_changes_nothing(database,
                                                                                                   capsys):
    """A newer build migrated the database (a migration this code does not ship, routines of its own). This older
    build's migrate used to put its own routines back over the newer tables, drop the newer ones, and say the
    database was at its level (exit 0), while every node then refused the database and told the operator to run
    `weave migrate` again. It now refuses before changing anything, names both levels, and says how to go back."""
    from orchestrator.cli import main

    with scratch_database(database, "newer") as fresh:
        installer.migrate(fresh)
        with dbmod.connect(fresh) as conn, conn.cursor() as cur:
            cur.execute("INSERT INTO _yoyo_migration (migration_hash, migration_id, applied_at_utc) "
                        "VALUES (REPEAT('a', 64), '9999.from-a-newer-build', UTC_TIMESTAMP())")
            cur.execute("UPDATE weave_routines SET digest = REPEAT('2', 64) WHERE name = 'weave_scan'")
            cur.execute("INSERT INTO weave_routines (name, kind, digest, installed_at) "
                        "VALUES ('weave_newer_routine', 'PROCEDURE', REPEAT('3', 64), UTC_TIMESTAMP())")
            cur.execute("SELECT name, digest FROM weave_routines ORDER BY name")
            before = cur.fetchall()
        assert main(["migrate", "--dsn", fresh.url(), "--json"]) == 1
        err = json.loads(capsys.readouterr().err)
        assert err["code"] == "SCHEMA_MISMATCH"
        assert "9999.from-a-newer-build" in err["detail"] and installer.shipped_level() in err["detail"]
        assert "newer" in err["detail"] and "backup" in err["detail"]
        with dbmod.connect(fresh) as conn, conn.cursor() as cur:
            cur.execute("SELECT name, digest FROM weave_routines ORDER BY name")
            assert cur.fetchall() == before
            # A node of the older build says the same, instead of sending the operator to migrate.
            with pytest.raises(errors.SchemaMismatch) as info:
                installer.check_level(conn)
            assert "newer" in str(info.value) and "run `weave migrate`" not in str(info.value)


def test_R16_a_database_restored_without_its_routines_is_not_at_the_level_until_migrated(database):
    """The documented backup leaves the routines out (`--skip-routines`) and the restore reinstalls them with
    `weave migrate`. Before that migrate the restored tables record every routine's digest, so the level check
    passed: nodes started, /readyz answered ready, and every call failed 'PROCEDURE ... does not exist'. The check
    now finds the routines missing and sends the operator to `weave migrate`."""
    with scratch_database(database, "restored") as fresh:
        installer.migrate(fresh)
        with dbmod.connect(fresh) as conn, conn.cursor() as cur:
            for routine in installer.shipped_routines():  # as a dump without routines, restored
                cur.execute(f"DROP {routine.kind} `{routine.name}`")
            with pytest.raises(errors.SchemaMismatch) as info:
                installer.check_level(conn)
            assert "routines missing" in str(info.value) and "weave migrate" in str(info.value)
            cur.execute("CREATE PROCEDURE weave_unknown_extra() BEGIN END")  # not ours: no matter
        report = installer.migrate(fresh)
        assert sorted(report.routines_installed) == sorted(r.name for r in installer.shipped_routines())
        with dbmod.connect(fresh) as conn:
            installer.check_level(conn)


def test_R15_migrate_makes_the_migrating_user_own_routines_another_definer_left(database):
    """A dump taken with its routines (or a copy from another environment) brings them with their old definer,
    maybe a user this server does not have: every call then failed 'The user specified as a definer does not
    exist'. The manual's restore runs `weave migrate` for routines owned by the current owner, but migrate kept any
    routine whose text matched, whoever owned it. It now installs again those another user owns."""
    with scratch_database(database, "definer") as fresh:
        installer.migrate(fresh)
        status = next(r for r in installer.shipped_routines() if r.name == "weave_status")
        with dbmod.connect(fresh) as conn, conn.cursor() as cur:
            cur.execute("DROP PROCEDURE weave_status")
            cur.execute(status.installed.replace("CREATE PROCEDURE", "CREATE DEFINER = 'weave_gone'@'%' PROCEDURE", 1))
            with pytest.raises(pymysql.err.OperationalError) as gone:
                dbmod.call(conn, "weave_status")
            assert gone.value.args[0] == 1449
        report = installer.migrate(fresh)
        assert report.routines_installed == ["weave_status"]
        with dbmod.connect(fresh) as conn:
            installer.check_level(conn)
            assert dbmod.call(conn, "weave_status")
        assert not installer.migrate(fresh).changed


def test_R15_migrate_installs_again_a_routine_replaced_by_hand_and_its_plan_says_so(database, capsys):
    """A routine replaced by hand (a hot fix, another build's routine created over it) keeps the digest this build
    recorded when it installed it: migrate kept it, and a fault it brought (a decision failing on every look) stayed
    after the `weave migrate` the operations guide prescribes. Its body on the server tells: the plan lists it, and
    migrate installs the build's own over it, and that one only."""
    from orchestrator.cli import main

    with scratch_database(database, "byhand") as fresh:
        installer.migrate(fresh)
        advance = next(r for r in installer.shipped_routines() if r.name == "weave_checkpoint_advance")
        with dbmod.connect(fresh) as conn, conn.cursor() as cur:
            cur.execute("DROP PROCEDURE weave_checkpoint_advance")
            cur.execute("CREATE PROCEDURE weave_checkpoint_advance(IN in_checkpoint_id BIGINT UNSIGNED) "
                        "SELECT no_such_column FROM weave_instances")
            installer.check_level(conn)  # its record still says this build's: the level alone cannot tell
        assert installer.plan(fresh).routines_to_install == ["weave_checkpoint_advance"]
        assert main(["migrate", "--plan", "--dsn", fresh.url()]) == 0
        assert "install 1 routine(s): weave_checkpoint_advance" in capsys.readouterr().out
        assert installer.migrate(fresh).routines_installed == ["weave_checkpoint_advance"]
        with dbmod.connect(fresh) as conn, conn.cursor() as cur:
            cur.execute("SHOW CREATE PROCEDURE weave_checkpoint_advance")
            kept = cur.fetchone()["Create Procedure"]
        assert kept[kept.index("\nBEGIN"):] == advance.installed[advance.installed.index("\nBEGIN"):].rstrip()
        assert not installer.migrate(fresh).changed


def test_R15_migrate_by_an_owner_without_super_on_a_binlogging_server_names_the_setting_it_needs(capsys):
    """The manual's owner has ALL PRIVILEGES on the database, and its tuning advice turns the binary log on. Such a
    server refuses stored functions from a user without SUPER unless log_bin_trust_function_creators is set, so
    the documented install failed halfway with the server's 1419. Migrate now says which routine the server
    refused, why, and the setting; with it set, the same owner migrates."""
    from orchestrator.cli import main
    from tests.support.server import as_user, create_user, private_server

    with private_server("weave-binlog-", "weave", options=("--log-bin=binlog", "--binlog-format=ROW"),
                        migrated=False) as (_, dsn):
        with dbmod.connect(dsn, database=False) as conn:
            create_user(conn, "weave_owner", "ALL PRIVILEGES", "weave")
        owner = as_user(dsn, "weave_owner")
        assert main(["migrate", "--dsn", owner.url(), "--json"]) == 1
        said = capsys.readouterr().err
        err = json.loads(said)
        assert err["code"] == "INSTALL_REFUSED", said
        assert "log_bin_trust_function_creators" in err["detail"] and "function" in err["detail"]
        with dbmod.connect(dsn, database=False) as conn, conn.cursor() as cur:
            cur.execute("SET GLOBAL log_bin_trust_function_creators = 1")
        assert main(["migrate", "--dsn", owner.url(), "--json"]) == 0
        with dbmod.connect(owner) as conn:
            installer.check_level(conn)


def test_R15_migrate_and_the_nodes_keep_their_own_session_settings_on_a_server_set_otherwise(capsys):
    """A server whose own sql_mode is ORACLE and EMPTY_STRING_IS_NULL, which caps a SELECT's rows and every statement's
    time: the migration tool's connection took the server's settings (the schema's first statements failed, 1067 and
    1146), and the installer's read of its recorded routines came back cut short, so every later migrate installed
    them all again and every node refused the database as another build's. Each connection sets its own."""
    from orchestrator.cli import main
    from tests.support.server import as_user, create_user, private_server

    options = ("--sql-mode=ORACLE,EMPTY_STRING_IS_NULL", "--max-statement-time=30",
               "--init-connect=SET SESSION sql_select_limit = 5")  # init_connect: for users without SUPER
    with private_server("weave-modes-", "weave", options=options, migrated=False) as (_, dsn):
        with dbmod.connect(dsn, database=False) as conn:
            create_user(conn, "weave_owner", "ALL PRIVILEGES", "weave")
        owner = as_user(dsn, "weave_owner")
        assert main(["migrate", "--dsn", owner.url(), "--test-clock", "--json"]) == 0, capsys.readouterr().err
        capsys.readouterr()
        again = installer.migrate(owner, test_clock=True)
        assert again.migrations_applied == [] and again.routines_installed == []
        with dbmod.connect(owner) as conn:
            installer.check_level(conn)
            admin = routines.namespace_bootstrap(conn, "acme")["token"]
            assert routines.app_put(conn, admin, "acme", "billing", 10)["created"]


def test_R15_a_server_that_logs_statements_is_refused_by_migrate_not_ready_and_its_refusals_are_transient(capsys):
    """binlog_format = STATEMENT refuses every write of a READ COMMITTED transaction (1665), as the engine's decisions
    are: migrate installed there and said nothing, /readyz answered ready, a write answered 500, and every due timer
    went to review within a second, booked as its own failure. Migrate now refuses such a server, naming the
    setting; /readyz says why it is not ready; and a write it refuses is transient, as a read-only server's is."""
    from falcon import testing

    from api.app import create_app
    from api.http import Connections
    from orchestrator.loop import Orchestrator
    from procedures import definitions
    from tests.support.server import private_server

    with private_server("weave-stmtlog-", "weave", options=("--log-bin=binlog", "--binlog-format=STATEMENT"),
                        migrated=False) as (_, dsn):
        with pytest.raises(installer.InstallRefused, match="binlog_format = ROW"):
            installer.migrate(dsn, test_clock=True)
        with dbmod.connect(dsn) as conn, conn.cursor() as cur:
            cur.execute("SELECT COUNT(*) AS n FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'weave'")
            assert cur.fetchone()["n"] == 0  # refused before anything was made
            cur.execute("SET GLOBAL binlog_format = 'ROW'")
        installer.migrate(dsn, test_clock=True)
        with dbmod.connect(dsn) as conn:
            admin = routines.namespace_bootstrap(conn, "acme")["token"]
            routines.app_put(conn, admin, "acme", "billing", 10)
            worker = routines.credential_create(conn, admin, "acme", "ops",
                                                ["workflows:start", "workflows:read"])["token"]
            routines.definition_publish(conn, admin, "acme", definitions.validate(
                {"name": "wait", "steps": [{"key": "t", "type": "TIMER", "delay_ms": 1_000}]}))
            wf = routines.instance_start(conn, worker, "acme", definition="wait", app="billing", idempotency_key="w",
                                         deadline_ms=3_600_000)["workflow_id"]
            dbmod.call(conn, "weave_test_clock_advance", 2_000)
            with conn.cursor() as cur:
                cur.execute("SET GLOBAL binlog_format = 'STATEMENT'")  # a DBA's change, for new sessions
        orchestrator = Orchestrator(dsn, concurrency=1, spread=False)
        try:
            for _ in range(4):  # its timer due, and refused each time: a wait, not the timer's failure
                orchestrator.run_once()
        finally:
            orchestrator.close()
        with dbmod.connect(dsn) as conn, conn.cursor() as cur:
            cur.execute("SELECT status FROM weave_instances")
            assert cur.fetchone()["status"] == "RUNNING"
            cur.execute("SELECT attempts, last_error FROM weave_pending_advances")
            assert cur.fetchone() == {"attempts": 0, "last_error": None}  # booked nowhere: not the candidate's own
        with dbmod.connect(dsn) as conn:
            with pytest.raises(errors.TransientDatabaseError, match="^1665"):
                routines.app_put(conn, admin, "acme", "billing", 10)
        client = testing.TestClient(create_app(Connections(dsn)))
        ready = client.simulate_get("/readyz")
        assert ready.status_code == 503 and "binlog_format = STATEMENT" in ready.json["detail"], ready.text
        assert "\nweave_database_read_only 1.0\n" in client.simulate_get("/metrics").text
        from orchestrator.cli import main
        assert main(["status", "--dsn", dsn.url(), "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["database"] == {
            "takes_writes": False,
            "why_not": "logging statements (binlog_format = STATEMENT), which refuses the engine's writes"}
        with dbmod.connect(dsn) as conn, conn.cursor() as cur:
            cur.execute("SET GLOBAL binlog_format = 'ROW'")  # the DBA puts it back: the timer settles
        orchestrator = Orchestrator(dsn, concurrency=1, spread=False)
        try:
            orchestrator.drain()
        finally:
            orchestrator.close()
        with dbmod.connect(dsn) as conn:
            assert routines.instance_get(conn, worker, "acme", wf)["status"] == "SUCCEEDED"


def test_R12_a_session_whose_transactions_are_read_only_is_refused_as_transient(world):
    """A server whose init_connect makes every session's transactions read-only refuses the engine's writes (1792),
    as a read-only server does (1290): transient, never a fault of the call's own."""
    conn = world.db.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SET SESSION TRANSACTION READ ONLY")
        with pytest.raises(errors.TransientDatabaseError, match="^1792"):
            routines.app_put(conn, world.admin, world.namespace, "reports", 10)
    finally:
        conn.close()
    assert world.db.scalar("SELECT COUNT(*) FROM weave_apps WHERE name = 'reports'") == 0


def test_R2_production_install_refuses_the_test_clock(database):
    prod = database.with_database(database.database + "_prod")
    try:
        installer.migrate(prod, test_clock=False)
        with dbmod.connect(prod) as conn:
            with pytest.raises(errors.TestClockDisabled):
                dbmod.call(conn, "weave_test_clock_advance", 1000)
            # A production database cannot be turned into a test-clock one later.
            with pytest.raises(errors.InvalidState):
                installer.migrate(prod, test_clock=True)
    finally:
        with dbmod.connect(prod, database=False) as conn, conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{prod.database}`")


def test_R2_test_clock_only_moves_forward(db):
    before = db.now()
    after = db.advance(60_000)
    assert (after - before).total_seconds() >= 60
    with pytest.raises(errors.ValidationFailed) as info:
        db.advance(-1)
    assert info.value.field_code == "INVALID_ARGUMENT"
    assert db.now() >= after


def test_cli_status_reports_backlog_and_runs_invariants(world, database, capsys):
    from orchestrator.cli import main

    world.publish({"name": "t", "steps": [{"key": "a", "type": "TIMER", "delay_ms": 1000}]})
    world.start("t")
    world.db.advance(1_001)
    assert main(["status", "--dsn", database.url(), "--check", "--json"]) == 0
    import json

    out = json.loads(capsys.readouterr().out)
    assert out["backlog"]["CHECKPOINT"]["due"] == 1 and out["invariants_broken"] == {}


def test_cli_refuses_a_database_at_another_level(world, database, capsys):
    """Every command that acts refuses a database at another level; `weave status` shows what it can read under a
    warning, and exits 1 all the same (tests/runtime/test_cli.py)."""
    from orchestrator.cli import main

    world.db.execute("UPDATE weave_routines SET digest = REPEAT('1', 64) WHERE name = 'weave_status'")
    try:
        assert main(["workflows", "list", "--dsn", database.url(), "--token", world.token,
                     "--namespace", world.namespace]) == 1
        assert "SCHEMA_MISMATCH" in capsys.readouterr().err
        assert main(["status", "--dsn", database.url()]) == 1
        assert "WARNING: database is at level" in capsys.readouterr().out
    finally:
        installer.migrate(database, test_clock=True)


@pytest.mark.breaks_invariants("M-4.9b")
def test_Q3_cli_status_check_names_each_broken_invariant(world, database, capsys):
    from orchestrator.cli import main

    world.publish({"name": "t", "steps": [{"key": "a", "type": "TIMER", "delay_ms": 1000}]})
    wf = world.start("t")
    world.db.execute("UPDATE weave_instances SET open_steps = open_steps + 1 WHERE id = %s", world.internal_id(wf))
    assert main(["status", "--dsn", database.url(), "--check"]) == 1
    out = capsys.readouterr().out
    assert "invariants: 1 broken\n  M-4.9b (the open-step count of every instance equals its steps not SUCCEEDED): " \
           f"rows {world.internal_id(wf)}\n" in out


def test_R16_cli_status_check_names_a_routine_replaced_by_hand_until_migrate_installs_the_build_s_own(world, database,
                                                                                                    capsys):
    """Its record still says this build's, so the level check passes and every node starts; the check compares the
    bodies and says which, and exits 1, as for a broken invariant."""
    from orchestrator.cli import main

    try:
        world.db.execute("DROP PROCEDURE weave_review_queue")
        world.db.execute("CREATE PROCEDURE weave_review_queue(IN a VARCHAR(512), IN b VARCHAR(200), IN c INT) "
                         "SELECT 1")
        assert main(["status", "--dsn", database.url(), "--check"]) == 1
        assert ("routines: 1 not this build's (replaced by hand; `weave migrate` installs the build's own): "
                "weave_review_queue") in capsys.readouterr().out
        assert main(["status", "--dsn", database.url(), "--check", "--json"]) == 1
        assert json.loads(capsys.readouterr().out)["routines_changed_by_hand"] == ["weave_review_queue"]
    finally:
        installer.migrate(database, test_clock=True)
    assert main(["status", "--dsn", database.url(), "--check"]) == 0
    assert "routines: as this build installed them" in capsys.readouterr().out


def test_R15_migrate_and_status_work_for_an_owner_whose_password_needs_percent_encoding(database, capsys):
    """The manual says to percent-encode a password's special characters in WEAVE_DSN. Migrate connected with the
    password decoded, then handed the migration tool a URL with it bare: ``p@ss/w:rd`` named a host ``ss``, and
    the owner could not migrate at all."""
    from urllib.parse import quote

    from orchestrator.cli import main

    owner, password = f"{database.database}_own"[:32], "p@ss/w:rd#?%x"
    fresh = database.with_database(f"{database.database}_pw")
    admin = dbmod.connect(database, database=False)
    try:
        with admin.cursor() as cur:
            for host in ("%", "localhost"):
                cur.execute(f"CREATE USER '{owner}'@'{host.replace('%', '%%')}' IDENTIFIED BY %s", (password,))
                cur.execute(f"GRANT ALL PRIVILEGES ON `{fresh.database}`.* TO '{owner}'@'{host}'")
        url = (f"mysql://{owner}:{quote(password, safe='')}@{database.host}:{database.port}/{fresh.database}"
               + (f"?unix_socket={database.unix_socket}" if database.unix_socket else ""))
        assert main(["migrate", "--dsn", url, "--json"]) == 0, capsys.readouterr().err
        assert json.loads(capsys.readouterr().out)["level"] == installer.shipped_level()
        assert main(["status", "--dsn", url, "--json"]) == 0, capsys.readouterr().err
    finally:
        with admin.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{fresh.database}`")
        drop_user(admin, owner)
        admin.close()
