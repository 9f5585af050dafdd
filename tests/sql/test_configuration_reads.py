"""Configuration that grows for years (definitions with many versions, credentials that expire and are never
disabled): what a listing or a scrape reads, and what it shows, does not depend on how much of it is history."""

from __future__ import annotations

import datetime as dt

import pytest

from procedures import errors, routines
from tests.benchmarks.bench_reads import reads_of as reads

SLACK = 4  # reads a reopened table's statistics may add


def flow(name: str, delay_ms: int) -> dict:
    return {"name": name, "steps": [{"key": "wait", "type": "TIMER", "delay_ms": delay_ms}]}


def test_M2_the_definition_list_reads_each_name_s_latest_version_alone_however_many_versions_it_has(world):
    """The listing read every version of every definition (24 rows a version: 122,013 rows for 5,002 definitions of 20
    versions each) to find each one's latest, and sorted them in a temporary table on disk."""
    conn, token, ns = world.db.conn, world.token, world.namespace
    for name in ("alpha", "beta", "gamma"):
        world.publish(flow(name, 1_000))
    few = reads(conn, lambda: routines.definition_list(conn, token, ns))
    for n in range(40):
        world.publish(flow("beta", 2_000 + n))
    # The table's statistics counted again, as a running server does in the background once a tenth of a table has
    # changed, and read by a connection opened since: the plan follows them (a connection that read the table while
    # it held three rows keeps planning with those figures for a while).
    world.db.execute("ANALYZE TABLE weave_definitions")
    later = world.db.connect()
    try:
        many = reads(later, lambda: routines.definition_list(later, token, ns))
    finally:
        later.close()
    assert many <= few + SLACK, (few, many)
    listed = {d["name"]: (d["latest_version"], d["versions"]) for d in routines.definition_list(conn, token, ns)}
    assert listed == {"alpha": (1, 1), "beta": (41, 41), "gamma": (1, 1)}


def test_M2_a_start_names_its_definition_and_app_as_they_are_written(world):
    """The collation pads spaces: a start naming 'cool-off ' found cool-off, and its instance, events and audit row kept
    the name as typed (over SQL or the CLI; the API's patterns refuse such a name before)."""
    world.publish(flow("cool-off", 1_000))
    with pytest.raises(errors.ValidationFailed) as refused:
        world.start("cool-off ")
    assert refused.value.field_code == "DEFINITION_NOT_FOUND"
    with pytest.raises(errors.ValidationFailed) as refused:
        world.start("cool-off", app=world.app + " ")
    assert refused.value.field_code == "APP_NOT_FOUND"
    assert world.db.scalar("SELECT COUNT(*) FROM weave_instances") == 0


def test_S2_expiring_credentials_are_listed_before_the_expired_ones_nobody_disabled(world):
    """weave_status listed every active credential made to expire, the soonest first, at most 1,000: once 1,000
    short-lived tokens had expired without being disabled, one about to expire was no longer listed, so /metrics and
    `weave status` never showed it. Those yet to expire come first now, then the latest 100 of those past."""
    conn = world.db.conn
    # A minute ahead: the engine clock runs on while the 1,001 are made (over a second on a loaded machine), and an
    # expiry it has passed is refused.
    soon = world.db.now() + dt.timedelta(seconds=60)
    for n in range(1_001):
        routines.credential_create(conn, world.admin, world.namespace, f"ci-{n}", ["workflows:read"], expires_at=soon)
    world.db.advance(61_000)
    at = world.db.now() + dt.timedelta(days=2)
    made = routines.credential_create(conn, world.admin, world.namespace, "contractor", ["workflows:read"],
                                      expires_at=at)
    listed = routines.status(conn)["expiring_credentials"]
    assert listed[0]["credential_id"] == made["credential_id"]
    past = listed[1:]
    assert len(past) == 100 and all(c["actor"].startswith("ci-") for c in past)
    assert [c["credential_id"] for c in past] == sorted((c["credential_id"] for c in past),
                                                        key=lambda c: -int(c.removeprefix("cred_")))
