"""Fencing an old primary with ``read_only = ON`` before a failover (docs/scaling.md, "Fence the old primary"), on a
private server of our own: the routines run with their owner's rights, so the fence holds only when their owner
cannot write through it. With the owner of docs/operations.md (privileges on the database only) every write of
the runtime user is refused as transient (1290: the daemons back off, the API answers 503) while reads go on; the
same routines installed by root (who holds READ_ONLY ADMIN) write through the fence."""

from __future__ import annotations

import pytest

from orchestrator.loop import Orchestrator
from procedures import db as dbmod
from procedures import errors, installer
from tests.support.db import Db
from tests.support.server import private_server
from tests.support.world import World

pytestmark = pytest.mark.process


def _user(admin: dbmod.Connection, name: str, grant: str, database: str) -> None:
    with admin.cursor() as cur:
        for host in ("%", "localhost"):
            cur.execute(f"CREATE USER '{name}'@'{host}' IDENTIFIED BY 'pw'")
            cur.execute(f"GRANT {grant} ON `{database}`.* TO '{name}'@'{host}'")


def _as(dsn: dbmod.Dsn, user: str) -> dbmod.Dsn:
    return dbmod.Dsn.parse(dsn.url().replace(f"//{dsn.user}@", f"//{user}:pw@", 1))


@pytest.fixture
def fenceable():
    """A private server migrated by the owner of docs/operations.md, the DSN of the runtime user, and a root
    connection to fence it with (read_only is set back before the server is removed)."""
    with private_server("weave-fence-", "weave_ha_fence", migrated=False) as (_, dsn):
        admin = dbmod.connect(dsn, database=False)
        try:
            _user(admin, "weave_owner", "ALL PRIVILEGES", dsn.database)
            _user(admin, "weave", "EXECUTE, SELECT", dsn.database)
            installer.migrate(_as(dsn, "weave_owner"), test_clock=True)
            yield dsn, _as(dsn, "weave"), admin
        finally:
            with admin.cursor() as cur:
                cur.execute("SET GLOBAL read_only = OFF")
            admin.close()


def _read_only(admin: dbmod.Connection, on: bool) -> None:
    with admin.cursor() as cur:
        cur.execute(f"SET GLOBAL read_only = {'ON' if on else 'OFF'}")


def test_Z3_read_only_fences_the_routines_of_the_documented_owner_and_not_those_installed_by_root(fenceable):
    dsn, runtime_dsn, admin = fenceable
    runtime = dbmod.connect(runtime_dsn)
    try:
        dbmod.call(runtime, "weave_namespace_bootstrap", "before")
        _read_only(admin, True)
        with pytest.raises(errors.TransientDatabaseError) as refused:
            dbmod.call(runtime, "weave_namespace_bootstrap", "fenced")
        assert errors.errno_of(refused.value.__cause__) == 1290
        assert dbmod.call_row(runtime, "weave_clock_now")["now_at"] is not None  # reads go on
        installer.check_level(runtime)  # the level check reads only: /readyz stays ready

        _read_only(admin, False)  # the same routines, owned by root: the fence does not hold
        installer.migrate(dsn, test_clock=True)
        _read_only(admin, True)
        dbmod.call(runtime, "weave_namespace_bootstrap", "through")
        with admin.cursor() as cur:
            cur.execute(f"SELECT COUNT(*) AS n FROM `{dsn.database}`.weave_credentials")
            assert cur.fetchone()["n"] == 2  # "before" and "through"; "fenced" wrote nothing
    finally:
        runtime.close()


TIMER = {"name": "cool-off", "steps": [{"key": "wait", "type": "TIMER", "delay_ms": 60_000}]}


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
        _read_only(admin, True)
        result = orch.run_once()
        assert len(result.candidates) == 20 and result.stalled, orch.stats
        assert orch.stats["failed"] <= 1, orch.stats
        _read_only(admin, False)
        orch.drain()
        assert [world.instance(wf)["status"] for wf in started] == ["SUCCEEDED"] * 20
        assert db.scalar("SELECT COUNT(*) FROM weave_events WHERE type = 'TIMER_SETTLED'") == 20
    finally:
        orch.close()
        db.close()
