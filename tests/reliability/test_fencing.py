"""Fencing an old primary with ``read_only = ON`` before a failover (docs/scaling.md, "Fence the old primary"), on a
private server of our own: the routines run with their owner's rights, so the fence holds only when their owner
cannot write through it. With the owner of docs/operations.md (privileges on the database only) every write of
the runtime user is refused as transient (1290: the daemons back off, the API answers 503) while reads go on; the
same routines installed by root (who holds READ_ONLY ADMIN) write through the fence."""

from __future__ import annotations

import pytest

from procedures import db as dbmod
from procedures import errors, installer
from tests.support.server import private_server

pytestmark = pytest.mark.process


def _user(admin: dbmod.Connection, name: str, grant: str, database: str) -> None:
    with admin.cursor() as cur:
        for host in ("%", "localhost"):
            cur.execute(f"CREATE USER '{name}'@'{host}' IDENTIFIED BY 'pw'")
            cur.execute(f"GRANT {grant} ON `{database}`.* TO '{name}'@'{host}'")


def _as(dsn: dbmod.Dsn, user: str) -> dbmod.Dsn:
    return dbmod.Dsn.parse(dsn.url().replace(f"//{dsn.user}@", f"//{user}:pw@", 1))


def test_Z3_read_only_fences_the_routines_of_the_documented_owner_and_not_those_installed_by_root():
    with private_server("weave-fence-", "weave_ha_fence", migrated=False) as (_, dsn):
        admin = dbmod.connect(dsn, database=False)
        try:
            _user(admin, "weave_owner", "ALL PRIVILEGES", dsn.database)
            _user(admin, "weave", "EXECUTE, SELECT", dsn.database)
            installer.migrate(_as(dsn, "weave_owner"), test_clock=True)
            runtime = dbmod.connect(_as(dsn, "weave"))
            dbmod.call(runtime, "weave_namespace_bootstrap", "before")

            with admin.cursor() as cur:
                cur.execute("SET GLOBAL read_only = ON")
            with pytest.raises(errors.TransientDatabaseError) as refused:
                dbmod.call(runtime, "weave_namespace_bootstrap", "fenced")
            assert errors.errno_of(refused.value.__cause__) == 1290
            assert dbmod.call_row(runtime, "weave_clock_now")["now_at"] is not None  # reads go on
            installer.check_level(runtime)  # the level check reads only: /readyz stays ready

            with admin.cursor() as cur:  # the same routines, owned by root: the fence does not hold
                cur.execute("SET GLOBAL read_only = OFF")
            installer.migrate(dsn, test_clock=True)
            with admin.cursor() as cur:
                cur.execute("SET GLOBAL read_only = ON")
            dbmod.call(runtime, "weave_namespace_bootstrap", "through")
            with admin.cursor() as cur:
                cur.execute(f"SELECT COUNT(*) AS n FROM `{dsn.database}`.weave_credentials")
                assert cur.fetchone()["n"] == 2  # "before" and "through"; "fenced" wrote nothing
            runtime.close()
        finally:
            with admin.cursor() as cur:
                cur.execute("SET GLOBAL read_only = OFF")
            admin.close()
