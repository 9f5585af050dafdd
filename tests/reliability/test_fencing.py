"""Fencing an old primary with ``read_only = ON`` before a failover (docs/scaling.md, "Fence the old primary"), on a
private server of our own: the routines run with their owner's rights, so the fence holds only when their owner
cannot write through it. With the owner of docs/operations.md (privileges on the database only) every write of
the runtime user is refused as transient (1290: the daemons back off, the API answers 503) while reads go on; the
same routines installed by root (who holds READ_ONLY ADMIN) write through the fence."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator

import pytest
from falcon import testing

from api.app import create_app
from api.http import ApiConnections
from orchestrator.loop import Orchestrator
from procedures import db as dbmod
from procedures import errors, installer, routines
from procedures.connections import retry_transient
from tests.support.db import Db
from tests.support.server import as_user, create_user, private_server, set_read_only, two_host_dsn
from tests.support.waiting import wait_for
from tests.support.world import World

pytestmark = pytest.mark.process


@contextlib.contextmanager
def _fenceable_server(prefix: str, tcp: bool = False) -> Iterator[tuple[dbmod.Dsn, dbmod.Dsn, dbmod.Connection]]:
    """A private server migrated by the owner of docs/operations.md, the DSN of the runtime user, and a root
    connection to fence it with (read_only is set back before the server is removed)."""
    with private_server(prefix, "weave_ha_fence", migrated=False, tcp=tcp) as (_, dsn):
        admin = dbmod.connect(dsn, database=False)
        try:
            create_user(admin, "weave_owner", "ALL PRIVILEGES", dsn.database)
            create_user(admin, "weave", "EXECUTE, SELECT", dsn.database)
            installer.migrate(as_user(dsn, "weave_owner"), test_clock=True)
            yield dsn, as_user(dsn, "weave"), admin
        finally:
            with admin.cursor() as cur:
                cur.execute("SET GLOBAL read_only = OFF")
            admin.close()


@pytest.fixture
def fenceable():
    with _fenceable_server("weave-fence-") as server:
        yield server


def test_Z3_read_only_fences_the_routines_of_the_documented_owner_and_not_those_installed_by_root(fenceable):
    dsn, runtime_dsn, admin = fenceable
    runtime = dbmod.connect(runtime_dsn)
    try:
        dbmod.call(runtime, "weave_namespace_bootstrap", "before")
        set_read_only(admin, True)
        with pytest.raises(errors.TransientDatabaseError) as refused:
            dbmod.call(runtime, "weave_namespace_bootstrap", "fenced")
        assert errors.errno_of(refused.value.__cause__) == 1290
        assert dbmod.call_row(runtime, "weave_clock_now")["now_at"] is not None  # reads go on

        set_read_only(admin, False)  # the same routines, owned by root: the fence does not hold
        installer.migrate(dsn, test_clock=True)
        set_read_only(admin, True)
        dbmod.call(runtime, "weave_namespace_bootstrap", "through")
        with admin.cursor() as cur:
            cur.execute(f"SELECT COUNT(*) AS n FROM `{dsn.database}`.weave_credentials")
            assert cur.fetchone()["n"] == 2  # "before" and "through"; "fenced" wrote nothing
    finally:
        runtime.close()


TIMER = {"name": "cool-off", "steps": [{"key": "wait", "type": "TIMER", "delay_ms": 60_000}]}


def test_Z3_R11_a_metrics_fold_on_a_read_only_server_folds_nothing_whoever_owns_the_routines(fenceable):
    """A reporting user called the fold on a replica whose routines root had installed: root writes past read_only,
    the replica's sums were written there as well as by its primary's next fold, and the replication stopped on the
    duplicate. The fold refuses a read-only server itself (1290, as the server refuses the documented owner), and
    the metrics read counts from the rows."""
    dsn, runtime_dsn, admin = fenceable
    installer.migrate(dsn, test_clock=True)  # the routines owned by root, who holds READ_ONLY ADMIN
    runtime = dbmod.connect(runtime_dsn)
    try:
        before = dbmod.call_row(runtime, "weave_metrics_fold")["folded_until"]
        set_read_only(admin, True)
        with admin.cursor() as cur:
            cur.execute(f"UPDATE `{dsn.database}`.weave_install SET clock_offset_us = clock_offset_us + 600000000")
        with pytest.raises(errors.TransientDatabaseError) as refused:
            dbmod.call(runtime, "weave_metrics_fold")
        assert errors.errno_of(refused.value.__cause__) == 1290
        assert routines.metrics_fold(runtime) is False
        with admin.cursor() as cur:
            cur.execute(f"SELECT folded_until FROM `{dsn.database}`.weave_metric_folds WHERE id = 1")
            assert cur.fetchone()["folded_until"] == before  # nothing written
        assert dbmod.call(runtime, "weave_metrics")  # the read answers from the rows
    finally:
        runtime.close()


def test_R12_an_orchestrator_on_a_fenced_primary_leaves_its_batch_at_the_first_refusal_and_backs_off(fenceable):
    """Every write a fenced primary is sent is refused alike (1290): after the first, the orchestrator leaves the rest
    of its batch due and waits as after a batch that failed whole, instead of trying each candidate in turn (its
    advance and its failure's bookkeeping, each with its retries on a new connection, two log lines each) and then
    scanning the same batch again. Nothing is lost: unfenced, every timer settles once."""
    _, runtime_dsn, admin = fenceable
    db = Db(runtime_dsn)
    orch = Orchestrator(runtime_dsn, concurrency=1, spread=False, retry_attempts=2)
    try:
        world = World.create(db)
        world.publish(TIMER)
        started = [world.start("cool-off") for _ in range(20)]
        db.advance(60_001)
        set_read_only(admin, True)
        result = orch.run_once()
        assert len(result.candidates) == 20 and result.stalled, orch.stats
        assert orch.stats["failed"] <= 1, orch.stats
        set_read_only(admin, False)
        orch.drain()
        assert [world.instance(wf)["status"] for wf in started] == ["SUCCEEDED"] * 20
        assert db.scalar("SELECT COUNT(*) FROM weave_events WHERE type = 'TIMER_SETTLED'") == 20
    finally:
        orch.close()
        db.close()


def test_Z3_readiness_answers_503_while_the_database_is_read_only_and_ready_again_after(fenceable, capsys):
    """A fenced primary still answers reads, but every write is refused: /readyz says so, so that a load balancer
    stops sending the node requests it could not take, and says ready again once the fence is lifted. `weave
    status`, where an operator looks first, says it too."""
    from orchestrator.cli import main

    _, runtime_dsn, admin = fenceable
    connections = ApiConnections(runtime_dsn)
    client = testing.TestClient(create_app(connections))

    def status() -> dict:
        assert main(["status", "--dsn", runtime_dsn.url(), "--json"]) == 0
        return json.loads(capsys.readouterr().out)["database"]

    try:
        assert client.simulate_get("/readyz").status_code == 200
        assert status() == {"takes_writes": True}
        set_read_only(admin, True)
        fenced = client.simulate_get("/readyz")
        assert fenced.status_code == 503 and fenced.headers["Retry-After"] == "5"
        assert fenced.json["code"] == "UNAVAILABLE" and fenced.json["detail"].startswith("NOT_WRITABLE")
        assert "read-only" in fenced.json["detail"]
        assert status() == {"takes_writes": False, "why_not": "read-only"}
        metrics = client.simulate_get("/metrics")  # read-only: nothing folded, the rest counted from the rows
        assert metrics.status_code == 200 and "weave_database_read_only 1.0" in metrics.text
        assert main(["status", "--dsn", runtime_dsn.url()]) == 0
        assert "database: takes NO writes: it is read-only" in capsys.readouterr().out
        set_read_only(admin, False)
        assert client.simulate_get("/readyz").json["status"] == "ready"
        assert "weave_database_read_only 0.0" in client.simulate_get("/metrics").text
    finally:
        connections.close_all()


@pytest.fixture
def primary_and_replica():
    """Two private servers standing for a primary and its replica (each with the engine migrated by its owner of
    operations), the DSN of the runtime user listing both, and a root connection to each."""
    with (_fenceable_server("weave-primary-", tcp=True) as first,
          _fenceable_server("weave-replica-", tcp=True) as second):
        (a, runtime_a, admin_a), (b, _, admin_b) = first, second
        both = two_host_dsn(runtime_a, b)
        dbmod.forget_nodes()
        try:
            yield both, (a.port, admin_a), (b.port, admin_b)
        finally:
            dbmod.forget_nodes()


def test_Z3_a_dsn_listing_a_primary_and_its_read_only_replica_connects_to_the_primary_and_follows_a_failover(
        primary_and_replica):
    """Listed first and up longest, the replica would be chosen were it not read-only; a connection goes to the
    server that takes writes. After a failover (the old primary fenced read-only, the replica promoted), the first
    write on the old primary is refused as transient (1290), and the process's next connection goes to the new
    one: nothing is written to the fenced server, and no restart is needed."""
    both, (port_a, admin_a), (port_b, admin_b) = primary_and_replica
    set_read_only(admin_a, True)  # a: the replica
    conn = dbmod.connect(both)
    try:
        assert conn.port == port_b
        dbmod.call(conn, "weave_namespace_bootstrap", "on-primary")
        set_read_only(admin_b, True)  # the failover: b fenced, a promoted
        set_read_only(admin_a, False)
        with pytest.raises(errors.TransientDatabaseError) as refused:
            dbmod.call(conn, "weave_namespace_bootstrap", "fenced")
        assert errors.errno_of(refused.value.__cause__) == 1290
        assert not dbmod.usable(conn)  # the process left b: its connections are replaced before their next use
    finally:
        conn.close()
    # The process saw a read-only at first: it is probed again after a back-off, and the connect is retried, as
    # every caller retries a transient error, until it is found ready.
    conn = retry_transient(lambda: dbmod.connect(both), seconds=10)
    try:
        assert conn.port == port_a
        dbmod.call(conn, "weave_namespace_bootstrap", "after-failover")
    finally:
        conn.close()
    # An API node out of its load balancer gets no requests, and only its readiness probe can move it: the probe
    # that finds its server read-only drops that connection and leaves that server (here the older one, which a
    # stable election would otherwise keep), and a later probe is ready on the new primary.
    dbmod.forget_nodes()
    connections = ApiConnections(both)
    client = testing.TestClient(create_app(connections))
    try:
        assert client.simulate_get("/readyz").status_code == 200 and connections.get().port == port_a
        set_read_only(admin_a, True)  # a failover back: a fenced, b promoted
        set_read_only(admin_b, False)
        assert client.simulate_get("/readyz").status_code == 503
        assert wait_for(lambda: client.simulate_get("/readyz").status_code == 200, timeout=15)
        assert connections.get().port == port_b
    finally:
        connections.close_all()
    for admin, names in ((admin_a, ["after-failover"]), (admin_b, ["on-primary"])):
        with admin.cursor() as cur:
            cur.execute("SELECT name FROM weave_ha_fence.weave_namespaces ORDER BY id")
            assert [row["name"] for row in cur.fetchall()] == names


def test_Z3_with_every_listed_server_read_only_a_connect_is_refused_as_transient_and_says_why(primary_and_replica):
    both, (_, admin_a), (_, admin_b) = primary_and_replica
    set_read_only(admin_a, True)
    set_read_only(admin_b, True)
    with pytest.raises(errors.TransientDatabaseError) as refused:
        dbmod.connect(both)
    assert "NO_READY_NODE" in str(refused.value) and str(refused.value).count("not ready: read-only") == 2
    set_read_only(admin_b, False)
    with retry_transient(lambda: dbmod.connect(both), seconds=10) as conn:
        assert conn.port == primary_and_replica[2][0]
