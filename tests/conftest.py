"""Fixtures shared by every layer of the suite: a real server (Q-1), a migrated test-clock database
per run, a clean scenario per test, and the M-4 invariants after every scenario (Q-3)."""

from __future__ import annotations

import os

import pytest

from procedures import db as dbmod
from procedures import installer, invariants
from tests.support.db import Db, reset
from tests.support.server import server_dsn
from tests.support.world import World


@pytest.fixture(scope="session")
def database() -> dbmod.Dsn:
    """A fresh database for this run (and pytest worker), migrated with the test clock. Its name starts with the
    database WEAVE_TEST_DSN names, so that people sharing one server each keep to their own prefix (and a
    grant on `weave_test%` is enough)."""
    try:
        server, how = server_dsn()
    except RuntimeError as exc:
        pytest.exit(str(exc), returncode=3)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "w")
    dsn = server.with_database(f"{server.database or 'weave_t'}_{os.getpid()}_{worker}")
    print(f"\nweave tests: server from {how}; database {dsn.database}")
    installer.migrate(dsn, test_clock=True)
    yield dsn
    with dbmod.connect(dsn, database=False) as conn, conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{dsn.database}`")


@pytest.fixture
def db(request, database) -> Db:
    handle = Db(database)
    reset(handle.conn)
    yield handle
    skip = {name for marker in request.node.iter_markers("breaks_invariants") for name in marker.args}
    try:
        if not getattr(request.node, "rep_call_failed", False):
            invariants.check(handle.conn, skip)
    finally:
        handle.close()


@pytest.fixture(autouse=True)
def _no_process_left_running():
    """A test that fails before its own cleanup must not leave `weave` processes running into the next tests
    (holding ports, sessions and CPU). Processes of wider fixtures, started before this one, are left alone."""
    from tests.support import processes

    started = len(processes.STARTED)
    yield
    processes.close_started_since(started)


@pytest.hookimpl(tryfirst=True, hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.when == "call" and rep.failed:
        item.rep_call_failed = True


@pytest.fixture
def world(db) -> World:
    """A namespace with an app, a queue and credentials: the usual starting point of a scenario."""
    return World.create(db)


@pytest.fixture
def orch(database):
    """An in-process orchestrator on the test database (one advance connection: deterministic order)."""
    from orchestrator.loop import Orchestrator

    o = Orchestrator(database, concurrency=1, spread=False)
    yield o
    o.close()
