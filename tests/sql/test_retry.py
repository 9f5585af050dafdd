"""R-12 through the wrapper every engine process calls its routines with (``procedures.connections``), on real
routine calls against the server: a conflict that outlasts a call's own conflict retries (``db.call``) is a
transient failure, and the wrapper makes the whole call again, with backoff, up to its attempts; a first try that
succeeds never builds the retry loop; any other error is raised at once. The conflicts are real MariaDB errors
(1213, raised by a trigger on the audit insert, as a Galera certification failure would be)."""

from __future__ import annotations

import pytest

from procedures import db as dbmod
from procedures import errors, retrying, routines
from procedures.connections import Connections, retry_transient
from tests.support.db import CONFLICT_TRIGGER

TRIES = dbmod.CONFLICT_RETRIES + 1  # conflicts one routine call absorbs before it reports a transient failure


class AppPut:
    """``weave_app_put`` on the world's connection, counting the calls made and the retries the wrapper asked for."""

    def __init__(self, world, name: str, max_in_flight: int = 5):
        self.world, self.name, self.max_in_flight = world, name, max_in_flight
        self.calls = 0
        self.retries = 0

    def __call__(self) -> dict:
        self.calls += 1
        return routines.app_put(self.world.db.conn, self.world.admin, self.world.namespace, self.name,
                                self.max_in_flight)

    def on_retry(self) -> None:
        self.retries += 1


@pytest.fixture
def conflicts(world):
    """Sets how many of the next audit inserts on the world's connection fail with a conflict; returns those left."""
    world.db.execute(CONFLICT_TRIGGER)

    def left(n: int | None = None) -> int:
        if n is not None:
            world.db.execute("SET @test_conflicts = %s", n)
        return world.db.scalar("SELECT @test_conflicts")

    yield left
    world.db.execute("DROP TRIGGER IF EXISTS test_conflict")


def test_R12_a_first_try_that_succeeds_never_builds_the_retry_loop(world, monkeypatch):
    def no_loop(*args, **kwargs):
        raise AssertionError("the retry loop was built for a call that succeeded")

    monkeypatch.setattr(retrying, "Retrying", no_loop)
    pool = Connections(world.db.dsn)
    try:
        assert pool.call("weave_clock_now")[0][0]["clock_mode"] == "TEST"
    finally:
        pool.close_all()
    put = AppPut(world, "first-try")
    assert retry_transient(put, on_retry=put.on_retry)["name"] == "first-try"
    assert (put.calls, put.retries) == (1, 0)


@pytest.mark.parametrize("failures", [1, 2])
def test_R12_a_call_that_keeps_conflicting_is_made_again_until_it_succeeds(world, conflicts, failures):
    audits = world.db.scalar("SELECT COUNT(*) FROM weave_audit WHERE action = 'app.put'")
    conflicts(TRIES * failures)  # each failed call uses up its own conflict retries first
    put = AppPut(world, f"retried-{failures}")
    assert retry_transient(put, attempts=5, on_retry=put.on_retry)["name"] == f"retried-{failures}"
    assert (put.calls, put.retries) == (failures + 1, failures)
    assert conflicts() == 0
    assert world.db.scalar("SELECT COUNT(*) FROM weave_apps WHERE name = %s", f"retried-{failures}") == 1
    assert world.db.scalar("SELECT COUNT(*) FROM weave_audit WHERE action = 'app.put'") == audits + 1


@pytest.mark.parametrize("attempts", [1, 2])
def test_R12_after_its_attempts_the_last_transient_failure_is_raised(world, conflicts, attempts):
    conflicts(10_000)
    put = AppPut(world, "never")
    with pytest.raises(errors.TransientDatabaseError):
        retry_transient(put, attempts=attempts, on_retry=put.on_retry)
    assert (put.calls, put.retries) == (attempts, attempts)
    assert conflicts() == 10_000 - attempts * TRIES
    assert world.db.scalar("SELECT COUNT(*) FROM weave_apps WHERE name = 'never'") == 0


def test_R12_any_other_error_is_raised_at_once_and_never_retried(world, conflicts):
    conflicts(TRIES)  # would fail a call that reached its audit insert; this one is refused before it
    put = AppPut(world, "refused", max_in_flight=-1)
    with pytest.raises(errors.WeaveError) as info:
        retry_transient(put, attempts=5, on_retry=put.on_retry)
    assert info.value.code == "VALIDATION_FAILED" and not errors.is_transient(info.value)
    assert (put.calls, put.retries) == (1, 0)
    assert conflicts() == TRIES
