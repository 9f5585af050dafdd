"""A failover between a primary and its replica (MariaDB replication, two private servers of the test's own), with
both listed in the DSN (docs/scaling.md, "Safe topologies"): the engine connects only to the server that is not
read-only, and after the failover (the old primary fenced read-only, the replica promoted) its first write on the
old primary is refused as transient (1290), its next connections go to the new primary, and the work started
before the failover goes on there. Nothing is written to the fenced server, nothing is lost or done twice."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

from orchestrator.loop import Orchestrator
from procedures import db as dbmod
from procedures import installer
from procedures.connections import retry_transient
from tests.support.db import Db
from tests.support.server import as_user, create_user, private_server, set_read_only, two_host_dsn
from tests.support.world import World

pytestmark = pytest.mark.process

TIMER = {"name": "cool-off", "steps": [{"key": "wait", "type": "TIMER", "delay_ms": 60_000}]}


def _caught_up(primary: dbmod.Connection, replica: dbmod.Connection) -> None:
    """Wait until the replica has applied everything the primary has written (bounded by the server: 30 s)."""
    with primary.cursor() as cur:
        cur.execute("SHOW MASTER STATUS")
        at = cur.fetchone()
    with replica.cursor() as cur:
        cur.execute("SELECT MASTER_POS_WAIT(%s, %s, 30) AS waited", (at["File"], at["Position"]))
        waited = cur.fetchone()["waited"]
    assert waited is not None and waited >= 0, "the replica did not catch up (or does not replicate)"


@contextlib.contextmanager
def _replicated_pair() -> Iterator[tuple[dbmod.Dsn, dbmod.Connection, dbmod.Connection]]:
    """A primary (binary log on) and a read-only replica of it, the engine migrated on the primary by the owner of
    docs/operations.md; the runtime user's DSN listing both (the primary first), and a root connection to each."""
    with (private_server("weave-repl-a-", "weave_repl", ("--log-bin=binlog", "--server-id=1", "--binlog-format=ROW",
                          "--log-bin-trust-function-creators=1"),
                         migrated=False, tcp=True) as (_, a),
          private_server("weave-repl-b-", "weave_repl", ("--server-id=2", "--read-only=ON"), migrated=False,
                         tcp=True) as (_, b)):
        admin_a, admin_b = dbmod.connect(a, database=False), dbmod.connect(b, database=False)
        try:
            with admin_b.cursor() as cur:
                cur.execute("CHANGE MASTER TO MASTER_HOST = %s, MASTER_PORT = %s, MASTER_USER = 'root', "
                            "MASTER_PASSWORD = '', MASTER_USE_GTID = no", (a.host, a.port))
                cur.execute("START SLAVE")
            with admin_a.cursor() as cur:
                cur.execute(f"CREATE DATABASE `{a.database}` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
            create_user(admin_a, "weave_owner", "ALL PRIVILEGES", a.database)
            create_user(admin_a, "weave", "EXECUTE, SELECT", a.database)
            installer.migrate(as_user(a, "weave_owner"), test_clock=True)
            _caught_up(admin_a, admin_b)
            runtime = as_user(a, "weave")
            both = two_host_dsn(runtime, b)
            dbmod.forget_nodes()
            yield both, admin_a, admin_b
        finally:
            dbmod.forget_nodes()
            for admin in (admin_a, admin_b):
                with contextlib.suppress(Exception), admin.cursor() as cur:
                    cur.execute("SET GLOBAL read_only = OFF")
                admin.close()


def test_Z3_work_started_on_the_primary_goes_on_on_the_promoted_replica_after_a_failover():
    with _replicated_pair() as (both, admin_a, admin_b):
        db = Db(both)
        orch = Orchestrator(both, concurrency=1, spread=False, retry_attempts=5)
        try:
            assert db.conn.port == admin_a.port  # the replica is read-only: not a server to connect to
            world = World.create(db)
            world.publish(TIMER)
            before = [world.start("cool-off") for _ in range(5)]
            db.advance(60_001)  # every timer due; the replica applies the clock's move with the rest
            _caught_up(admin_a, admin_b)

            set_read_only(admin_a, True)  # the failover: the old primary fenced, the replica promoted
            with admin_b.cursor() as cur:
                cur.execute("STOP SLAVE")
                cur.execute("RESET SLAVE ALL")
            set_read_only(admin_b, False)

            # Its first write on the old primary is refused, and it goes on on the new one once its next look at
            # that server (seen read-only before, so probed after a back-off of at most 5 s) finds it ready: the
            # daemon's loop retries meanwhile, as this does.
            retry_transient(orch.drain, seconds=30)
            db.close()
            db = world.db = Db(both)  # a connection opened now goes to the new primary
            assert db.conn.port == admin_b.port
            assert [world.instance(wf)["status"] for wf in before] == ["SUCCEEDED"] * 5
            after = world.start("cool-off")
            db.advance(60_001)
            retry_transient(orch.drain, seconds=30)
            assert world.instance(after)["status"] == "SUCCEEDED"
            assert db.scalar("SELECT COUNT(*) FROM weave_events WHERE type = 'TIMER_SETTLED'") == 6
            with admin_a.cursor() as cur:  # the fenced server kept what it had: every timer still waiting there
                cur.execute("SELECT COUNT(*) AS n FROM weave_repl.weave_events WHERE type = 'TIMER_SETTLED'")
                assert cur.fetchone()["n"] == 0
        finally:
            orch.close()
            db.close()
