"""R-1 from the caller's side: a public routine called inside a transaction the caller opened never commits
or rolls back the caller's work. A routine that owns its transaction refuses with IN_TRANSACTION before it
reads anything; the others run inside the caller's transaction and leave it open.

The list of routines is read from the database, so a routine added later cannot skip these tests. Each is
driven from PyMySQL with autocommit off (every Python driver's default) and from the ``mariadb`` client."""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import subprocess

import pymysql
import pytest

from procedures import db as dbmod
from procedures import errors, installer
from tests.support.db import a_user

CALLER_TABLE = "caller_orders"


def public_routines(db) -> list[dict]:
    """Every public routine installed, with its parameters and whether it starts a transaction of its own."""
    rows = db.rows("SELECT ROUTINE_NAME AS name, ROUTINE_DEFINITION AS body FROM information_schema.ROUTINES "
                   "WHERE ROUTINE_SCHEMA = DATABASE() AND ROUTINE_NAME NOT LIKE '\\_%%' ORDER BY ROUTINE_NAME")
    params = db.rows("SELECT SPECIFIC_NAME AS name, PARAMETER_NAME AS param, PARAMETER_MODE AS mode "
                     "FROM information_schema.PARAMETERS WHERE SPECIFIC_SCHEMA = DATABASE() "
                     "AND PARAMETER_MODE IS NOT NULL ORDER BY SPECIFIC_NAME, ORDINAL_POSITION")
    for row in rows:
        row["params"] = [(p["param"], p["mode"]) for p in params if p["name"] == row["name"]]
        body = row["body"] or ""
        opens = "START TRANSACTION" in body or re.search(r"CALL _weave_transaction_(claim|begin)\(", body)
        row["owns"] = bool(opens) and "WITH CONSISTENT SNAPSHOT" not in body
    return rows


def call_text(routine: dict, token: str, namespace: str) -> str:
    """A CALL with the namespace's admin token and name where the routine takes them, NULL elsewhere."""
    args = []
    for i, (param, mode) in enumerate(routine["params"]):
        if mode != "IN":
            args.append(f"@out{i}")
        elif param == "in_token":
            args.append(pymysql.converters.escape_string(token).join("''"))
        elif param == "in_namespace":
            args.append(f"'{namespace}'")
        else:
            args.append("NULL")
    return f"CALL {routine['name']}({', '.join(args)})"


@pytest.fixture
def caller_table(world):
    world.db.execute(f"CREATE TABLE IF NOT EXISTS {CALLER_TABLE} (id INT PRIMARY KEY) ENGINE=InnoDB")
    world.db.execute(f"DELETE FROM {CALLER_TABLE}")
    yield CALLER_TABLE
    world.db.execute(f"DROP TABLE IF EXISTS {CALLER_TABLE}")


def test_R1_the_routine_list_is_the_shipped_one(db):
    """Nothing is left out: the database's public routines are exactly those the code ships."""
    installed = {r["name"] for r in public_routines(db)}
    shipped = {r.name for r in installer.shipped_routines() if r.public}
    assert installed == shipped and len(installed) > 30


def test_R1_every_public_routine_leaves_a_pymysql_callers_transaction_as_it_was(world, caller_table):
    routines = public_routines(world.db)
    engine_before = world.db.table_counts()
    conn = dbmod.connect(world.db.dsn, autocommit=False)
    refused = []
    try:
        for n, routine in enumerate(routines, start=1):
            with conn.cursor() as cur:
                cur.execute(f"INSERT INTO {caller_table} VALUES (%s)", (n,))
                assert cur.execute("SELECT @@in_transaction AS t") and cur.fetchone()["t"] == 1
                try:
                    cur.execute(call_text(routine, world.admin, world.namespace))
                    while cur.nextset():
                        pass
                    outcome = "ran"
                except pymysql.err.MySQLError as exc:
                    outcome = errors.translate(exc)
                cur.execute("SELECT @@in_transaction AS t")
                assert cur.fetchone()["t"] == 1, f"{routine['name']} ended the caller's transaction"
                cur.execute(f"SELECT COUNT(*) AS c FROM {caller_table}")
                assert cur.fetchone()["c"] == n, f"{routine['name']} lost the caller's pending rows"
            if routine["owns"]:
                assert isinstance(outcome, errors.InTransaction), (routine["name"], outcome)
                refused.append(routine["name"])
                if routine["name"] == "weave_signal_send":
                    assert "weave_signal_send_in_tx" in str(outcome)
        conn.commit()
    finally:
        conn.close()
    assert world.db.scalar(f"SELECT COUNT(*) FROM {caller_table}") == len(routines)
    assert world.db.table_counts() == engine_before
    assert "weave_instance_start" in refused and "weave_app_put" in refused and "weave_signal_send" in refused


def test_R1_a_pymysql_caller_without_an_open_transaction_is_served(world, caller_table):
    """Autocommit off but nothing pending yet: the routine owns its transaction and commits it."""
    conn = dbmod.connect(world.db.dsn, autocommit=False)
    try:
        with conn.cursor() as cur:
            cur.execute("CALL weave_app_put(%s, %s, 'orders', 10, 'ACTIVE', NULL)", (world.admin, world.namespace))
            while cur.nextset():
                pass
            cur.execute("SELECT @@in_transaction AS t")
            assert cur.fetchone()["t"] == 0
    finally:
        conn.close()
    assert world.db.scalar("SELECT COUNT(*) FROM weave_apps WHERE name = 'orders'") == 1


def test_R1_a_failed_routine_rolls_back_only_what_it_started(world, caller_table):
    """An error inside a routine's own transaction rolls that transaction back, and the session is clean."""
    conn = dbmod.connect(world.db.dsn, autocommit=False)
    try:
        with conn.cursor() as cur, pytest.raises(pymysql.err.MySQLError) as failure:
            cur.execute("CALL weave_app_put(%s, %s, 'orders', -1, 'ACTIVE', NULL)", (world.admin, world.namespace))
        assert errors.translate(failure.value).code == "VALIDATION_FAILED"
        with conn.cursor() as cur:
            cur.execute("SELECT @@in_transaction AS t")
            assert cur.fetchone()["t"] == 0
    finally:
        conn.close()


def test_R1_every_public_routine_leaves_a_mariadb_client_callers_transaction_as_it_was(world, caller_table):
    routines = public_routines(world.db)
    engine_before = world.db.table_counts()
    lines = ["START TRANSACTION;"]
    where: dict[int, str] = {}
    for n, routine in enumerate(routines, start=1):
        lines.append(f"INSERT INTO {caller_table} VALUES ({n});")
        lines.append(call_text(routine, world.admin, world.namespace) + ";")
        where[len(lines)] = routine["name"]
        lines.append(f"SELECT '{routine['name']}', @@in_transaction, COUNT(*) FROM {caller_table};")
    lines.append("COMMIT;")
    dsn = world.db.dsn
    client = shutil.which("mariadb") or shutil.which("mysql")
    assert client, "the mariadb (or mysql) command-line client must be on PATH"
    argv = [client, "--force", "--batch", "--skip-column-names", f"--user={dsn.user}", dsn.database]
    argv += [f"--socket={dsn.unix_socket}"] if dsn.unix_socket else [f"--host={dsn.host}", f"--port={dsn.port}"]
    if dsn.password:
        argv.append(f"--password={dsn.password}")
    run = subprocess.run(argv, input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=120)
    failed = {}
    for line in run.stderr.splitlines():
        match = re.match(r"ERROR (\d+) \(\w+\) at line (\d+)(?: in file: '[^']*')?: (.*)", line)
        if match and int(match.group(2)) in where:
            failed[where[int(match.group(2))]] = (int(match.group(1)), match.group(3))
    answered = [line.split("\t") for line in run.stdout.splitlines() if line.strip()]
    answered = [row for row in answered if len(row) == 3 and row[0] in {r["name"] for r in routines}]
    assert [row[0] for row in answered] == [r["name"] for r in routines], run.stderr
    for n, (name, in_tx, count) in enumerate(answered, start=1):
        assert (in_tx, count) == ("1", str(n)), f"{name} touched the caller's transaction"
    for routine in routines:
        if routine["owns"]:
            errno, message = failed[routine["name"]]
            assert errno == errors.ERRORS["IN_TRANSACTION"][0] and message.startswith("IN_TRANSACTION:"), routine
    assert world.db.scalar(f"SELECT COUNT(*) FROM {caller_table}") == len(routines)
    assert world.db.table_counts() == engine_before


def _in_transaction(conn) -> int:
    with conn.cursor() as cur:
        cur.execute("SELECT @@in_transaction AS t")
        return cur.fetchone()["t"]


@pytest.mark.parametrize("queued", [1, 0], ids=["a-task-queued", "nothing-queued"])
def test_R1_a_claim_from_a_session_with_autocommit_off_claims_and_leaves_no_transaction(world, queued):
    """The claim reads its queues before it opens its transaction; with autocommit off that read would itself open
    one, in which the claim's own could not start (1568). Such a session is served as any other, and left as the
    claim found it."""
    world.publish({"name": "one-task", "steps": [{"key": "charge", "type": "TASK", "queue": world.queue,
                                                  "handler": "payments.charge", "handler_version": "1"}]})
    for i in range(queued):
        world.start("one-task", key=f"task-{i}")
    conn = dbmod.connect(world.db.dsn, autocommit=False)
    try:
        claims = dbmod.call(conn, "pulse_task_claim", "worker-1", world.queue, None, 5, 30000)[0]
        assert len(claims) == queued
        assert _in_transaction(conn) == 0
    finally:
        conn.close()
    assert world.db.scalar("SELECT COUNT(*) FROM pulse_attempts WHERE status = 'RUNNING'") == queued  # committed


@pytest.mark.parametrize("report", ["pulse_attempt_complete", "pulse_attempt_fail"])
def test_R1_a_report_from_a_session_with_autocommit_off_leaves_no_transaction(world, report):
    """A report's answer reads the tables after its commit (when the task it scheduled is due); with autocommit off
    that read opens a transaction of the session's, which the report closes: the session is left as it was found."""
    world.publish({"name": "one-task", "steps": [{"key": "charge", "type": "TASK", "queue": world.queue,
                                                  "handler": "payments.charge", "handler_version": "1"}]})
    world.start("one-task", key="task-0")
    claim = dbmod.call(world.db.conn, "pulse_task_claim", "worker-1", world.queue, None, 1, 30000)[0][0]
    args = {"pulse_attempt_complete": ('{"ok": true}',), "pulse_attempt_fail": ("boom", 0)}[report]
    conn = dbmod.connect(world.db.dsn, autocommit=False)
    try:
        answer = dbmod.call(conn, report, claim["attempt_id"], "worker-1", *args)[0][0]
        assert answer["task_status"] in ("SUCCEEDED", "FAILED") and answer["next_task_in_ms"] is None
        assert _in_transaction(conn) == 0
    finally:
        conn.close()
    assert world.db.scalar("SELECT status FROM pulse_attempts WHERE id = %s", claim["attempt_id"]) != "RUNNING"


def test_R1_a_list_advance_from_a_session_with_autocommit_off_is_served(world, caller_table):
    """A list's decisions each own a transaction; in a session with autocommit off, where any read before the first
    would open one of the session's, every candidate is decided and the session is left without a transaction."""
    world.publish({"name": "wait-1s", "steps": [{"key": "a", "type": "TIMER", "delay_ms": 1000}]})
    workflows = [world.start("wait-1s", key=f"timer-{i}") for i in range(3)]
    world.db.advance(1_001)
    ids = [r["id"] for r in world.db.rows("SELECT id FROM weave_pending_advances ORDER BY id")]
    conn = dbmod.connect(world.db.dsn, autocommit=False)
    try:
        rows = dbmod.call(conn, "weave_candidates_advance", "CHECKPOINT", json.dumps(ids + [10**12]))[0]
        assert [r["outcome"] for r in rows] == ["SETTLED"] * len(ids) + ["GONE"]
        assert _in_transaction(conn) == 0
    finally:
        conn.close()
    assert {world.db.scalar("SELECT status FROM weave_instances WHERE id = %s", int(wf.removeprefix("wf_")))
            for wf in workflows} == {"SUCCEEDED"}


def test_R1_a_console_sign_in_from_a_session_with_autocommit_off_leaves_no_transaction(world):
    """Its answer is read after its commit; with autocommit off that read opens a transaction, which the routine
    ends as well, since the call opened it."""
    conn = dbmod.connect(world.db.dsn, autocommit=False)
    try:
        answer = dbmod.call(conn, "weave_console_session_open", world.token, world.namespace, "ab" * 32,
                            b"sealed", 600)[0]
        assert len(answer) == 1
        assert _in_transaction(conn) == 0
    finally:
        conn.close()
    assert world.db.scalar("SELECT COUNT(*) FROM weave_console_sessions") == 1


@pytest.mark.parametrize("isolation", ["REPEATABLE READ", "SERIALIZABLE"])
def test_R1_a_metrics_fold_from_a_session_with_autocommit_off_leaves_no_transaction(world, isolation):
    """The fold's answer is read after its commit; with autocommit off that read opens a transaction (under
    SERIALIZABLE one that keeps the fold row's lock), which the routine ends as well, since the call opened it: the
    session is left as the call found it, and the next fold, the API's with no lock wait, is not refused."""
    conn = dbmod.connect(world.db.dsn, autocommit=False)
    try:
        with conn.cursor() as cur:
            cur.execute(f"SET SESSION TRANSACTION ISOLATION LEVEL {isolation}")
        assert len(dbmod.call(conn, "weave_metrics_fold")[0]) == 1
        assert _in_transaction(conn) == 0
        other = world.db.connect()
        try:
            with other.cursor() as cur:
                cur.execute("SET SESSION innodb_lock_wait_timeout = 0")
            assert dbmod.call(other, "weave_metrics_fold")[0][0]["caught_up"] == 1
        finally:
            other.close()
    finally:
        conn.close()


@pytest.mark.parametrize("isolation", ["READ UNCOMMITTED"])
@pytest.mark.parametrize("read", ["weave_instance_get", "weave_instance_pause", "weave_instance_start (replay)"])
def test_R1_an_instance_answer_is_a_snapshot_of_committed_rows_whatever_the_session_isolation(world, read, isolation):
    """weave_instance_get, a control action's answer and a start's replay read the instance in a snapshot of their
    own. A caller's session at another isolation level must not turn that snapshot into reads of rows another
    transaction has not committed (READ UNCOMMITTED), or into reads that each see a later state (READ COMMITTED)."""
    world.publish({"name": "wait-1m", "steps": [{"key": "a", "type": "TIMER", "delay_ms": 60_000}]})
    wf = world.start("wait-1m", key="start-1")
    holder = world.db.connect()
    caller = world.db.connect()
    try:
        with caller.cursor() as cur:
            cur.execute(f"SET SESSION TRANSACTION ISOLATION LEVEL {isolation}")
        holder.begin()
        with holder.cursor() as cur:  # a change another transaction has not committed (and will roll back)
            cur.execute("UPDATE weave_steps SET output = '\"uncommitted\"' WHERE instance_id = %s",
                        (world.internal_id(wf),))
        if read == "weave_instance_get":
            sets = dbmod.call(caller, read, world.token, world.namespace, wf)
        elif read == "weave_instance_pause":
            sets = dbmod.call(caller, read, world.token, world.namespace, wf, "hold", "p-1")[1:]
        else:
            sets = dbmod.call(caller, "weave_instance_start", world.token, world.namespace, "wait-1m", None,
                              world.app, "{}", None, 86_400_000, None, "start-1")
        assert sets[0][0]["workflow_id"] == wf
        assert [s["output"] for s in sets[1]] == [None]
        with caller.cursor() as cur:
            cur.execute("SELECT @@tx_isolation AS level")
            assert cur.fetchone()["level"] == isolation.replace(" ", "-")  # the session's own level is left as it was
    finally:
        holder.rollback()
        holder.close()
        caller.close()


@pytest.mark.parametrize("read", ["weave_step_explain", "weave_step_rounds"])
def test_R1_a_steps_explanation_and_its_rounds_are_a_snapshot_of_committed_rows(world, orch, read):
    """Explain and a page of rounds answer from several reads (the step, then what is worked out from it); each now
    reads them in a snapshot of its own, as the instance read does: a caller's session at READ UNCOMMITTED read a
    change no one had committed, and each read of one answer could see another state."""
    from tests.sql.test_polls import poll_flow, started

    world.publish(poll_flow())
    wf = started(world, orch)
    holder = world.db.connect()
    caller = world.db.connect()
    try:
        with caller.cursor() as cur:
            cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL READ UNCOMMITTED")
        holder.begin()
        with holder.cursor() as cur:  # changes another transaction has not committed (and will roll back)
            cur.execute("UPDATE weave_steps SET status = 'NEEDS_REVIEW' WHERE instance_id = %s",
                        (world.internal_id(wf),))
            cur.execute("UPDATE weave_poll_states SET rounds_used = 99 WHERE instance_id = %s",
                        (world.internal_id(wf),))
        if read == "weave_step_explain":
            head = dbmod.call(caller, read, world.token, world.namespace, wf, "check")[0][0]
            assert head["step_status"] == "ACTIVE"
        else:
            head = dbmod.call(caller, read, world.token, world.namespace, wf, "check", None, 0, 10)[0][0]
            assert head["rounds_used"] == 1
        with caller.cursor() as cur:
            cur.execute("SELECT @@in_transaction AS open")
            assert cur.fetchone()["open"] == 0  # its own snapshot, committed
    finally:
        holder.rollback()
        holder.close()
        caller.close()


def test_R1_a_routine_interrupted_part_way_leaves_nothing_open_for_the_next_statement_to_commit(world, caller_table):
    """The server can stop a routine between two of its statements (a session's statement time limit: 1969; KILL
    QUERY: 1317), where no handler of the routine runs: one that had begun its own transaction left it open, half
    done, and the connection's next COMMIT kept it (a start's instance with no step activated, stalled for good).
    A procedure of the test's stops that way, as the server's interrupt leaves it; the engine's call rolls the
    transaction back, and the interrupt is transient: nothing was done, the same call may be made again."""
    world.db.execute("DROP PROCEDURE IF EXISTS stopped_midway")
    world.db.execute(
        "CREATE PROCEDURE stopped_midway(IN in_errno INT) BEGIN START TRANSACTION; "
        f"INSERT INTO {caller_table} (id) VALUES (in_errno); "
        "IF in_errno = 1969 THEN SIGNAL SQLSTATE '70100' SET MYSQL_ERRNO = 1969, "
        "MESSAGE_TEXT = 'Query execution was interrupted (max_statement_time exceeded)'; "
        "ELSE SIGNAL SQLSTATE '70100' SET MYSQL_ERRNO = 1317, MESSAGE_TEXT = 'Query execution was interrupted'; "
        "END IF; END")
    caller = world.db.connect()
    try:
        for errno in (1969, 1317):
            with pytest.raises(errors.TransientDatabaseError) as stopped:
                dbmod.call(caller, "stopped_midway", errno)
            assert errors.errno_of(stopped.value.__cause__) == errno
            with caller.cursor() as cur:
                cur.execute("SELECT @@in_transaction AS open")
                assert cur.fetchone()["open"] == 0
                cur.execute("COMMIT")  # what a pooled connection's next user might do
            assert world.db.scalar(f"SELECT COUNT(*) FROM {caller_table}") == 0
        caller.begin()  # inside a transaction of the caller's, what was done is the caller's to end
        with pytest.raises(errors.TransientDatabaseError):
            dbmod.call(caller, "stopped_midway", 1969)
        with caller.cursor() as cur:
            cur.execute("SELECT @@in_transaction AS open")
            assert cur.fetchone()["open"] == 1
        caller.rollback()
    finally:
        caller.close()
        world.db.execute("DROP PROCEDURE IF EXISTS stopped_midway")


def test_R1_a_walk_whose_read_of_its_instance_comes_back_empty_undoes_the_decision(world):
    """A KILL QUERY that lands while the server reads the instance row as a constant can end that read with no row and
    no error: the walk went on as if no step were ready, and the start or settlement around it committed with its
    next step never activated and nothing due (seen under a DBA's kills: 9 instances of 105 kills). The walk holds
    its instance, so a read that finds nothing is the interrupt: it is raised as one, and the caller's
    decision is rolled back and tried again (INTERRUPTED, transient). Here the walk is asked for an instance that is
    not there."""
    conn = world.db.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("START TRANSACTION")
            with pytest.raises(pymysql.err.MySQLError) as refused:
                cur.execute("CALL _weave_root_advance(1, 987654321, UTC_TIMESTAMP(6), 10, TRUE, NULL, '', 0, NULL, "
                            "@outcome)")
            cur.execute("ROLLBACK")
            cur.execute("SELECT @outcome AS outcome")
            assert cur.fetchone()["outcome"] is None
        assert errors.errno_of(refused.value) == 50016 and "INTERRUPTED" in str(refused.value)
        assert isinstance(errors.translate(refused.value), errors.TransientDatabaseError)
    finally:
        conn.close()


def test_R1_the_engines_connections_take_no_statement_time_limit_the_server_gives_its_user(world, database):
    """A limit meant for runaway reports (here one a user is given) would cut the engine's decisions in half: its own
    connections set it to none; another connection of the same user keeps it."""
    import os

    user = f"weave_t_{os.getpid()}_timed"
    with a_user(database, user, "MAX_STATEMENT_TIME 0.5") as timed, \
            contextlib.closing(dbmod.connect(timed)) as engine, contextlib.closing(pymysql.connect(
                host=timed.host, port=timed.port, user=user, password=timed.password,
                database=timed.database)) as plain:
        with engine.cursor() as cur:
            cur.execute("SELECT @@max_statement_time AS limit_s")
            assert cur.fetchone()["limit_s"] == 0
        with plain.cursor() as cur:
            cur.execute("SELECT @@max_statement_time")
            assert cur.fetchone()[0] == 0.5
