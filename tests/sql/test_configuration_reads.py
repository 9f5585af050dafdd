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


LISTINGS = ("definitions", "apps", "queues", "credentials")


def _configured(world, n: int, first: int = 0) -> None:
    """``n`` more of every configuration object, named so that their order by name is their order of creation."""
    conn, admin, ns = world.db.conn, world.admin, world.namespace
    for i in range(first, first + n):
        world.publish(flow(f"flow-{i:04d}", 1_000))
        routines.app_put(conn, admin, ns, f"app-{i:04d}", 10)
        routines.queue_put(conn, admin, ns, f"queue-{i:04d}", 10)
        routines.credential_create(conn, admin, ns, f"bot-{i:04d}", ["workflows:read"])


def _reader(world, listing: str) -> str:
    """Definitions are read with workflows:read, the rest with the admin scope."""
    return world.token if listing == "definitions" else world.admin


def _key(listing: str, item: dict) -> str:
    return item["credential_id"] if listing == "credentials" else item["name"]


def _pages(world, listing: str, limit: int, token: str | None = None) -> list[list[str]]:
    pages, cursor = [], None
    while True:
        page = routines.config_page(world.db.conn, token or _reader(world, listing), world.namespace, listing,
                                    limit=limit, cursor=cursor)
        pages.append([_key(listing, item) for item in page["items"]])
        cursor = page["next_cursor"]
        if cursor is None:
            return pages
        assert cursor == pages[-1][-1] and len(pages[-1]) == limit  # a page ends where the next begins


@pytest.mark.parametrize("listing", LISTINGS)
def test_R11_a_configuration_list_is_read_page_by_page_each_row_once_in_its_order(world, listing):
    """GET /definitions answered every definition of the namespace in one answer (5,002 of them in about 1 MB), and
    so did the apps, queues and credentials: they are keyset pages now, by name (credentials: oldest first), whose
    cursor neither skips nor repeats a row made while a client pages through them."""
    _configured(world, 7)
    every = [_key(listing, item)
             for item in routines.config_list(world.db.conn, _reader(world, listing), world.namespace, listing)]
    assert every == (sorted(every) if listing != "credentials"
                     else sorted(every, key=lambda c: int(c.removeprefix("cred_"))))
    for limit in (1, 3, len(every), len(every) + 1):
        pages = _pages(world, listing, limit)
        assert [key for page in pages for key in page] == every, limit
        assert len(pages) == -(-len(every) // limit)  # a full last page says no next cursor: no empty page follows
    # Rows made while a client is on its first page: one ordered after the cursor is on a later page, none repeats.
    first = routines.config_page(world.db.conn, _reader(world, listing), world.namespace, listing, limit=3)
    _configured(world, 1, first=7)
    rest = _pages_after(world, listing, first["next_cursor"])
    seen = [_key(listing, item) for item in first["items"]] + rest
    assert len(seen) == len(set(seen)) == len(every) + 1


def _pages_after(world, listing: str, cursor: str) -> list[str]:
    keys: list[str] = []
    while cursor is not None:
        page = routines.config_page(world.db.conn, _reader(world, listing), world.namespace, listing, limit=2,
                                    cursor=cursor)
        keys += [_key(listing, item) for item in page["items"]]
        cursor = page["next_cursor"]
    return keys


@pytest.mark.parametrize("listing", LISTINGS)
def test_R11_a_configuration_page_reads_what_it_answers_however_much_configuration_there_is(world, listing):
    """A page of ten reads about the same rows whether the namespace holds 12 of each object or 120."""
    _configured(world, 12)
    conn = world.db.conn

    def page() -> dict:
        return routines.config_page(conn, _reader(world, listing), world.namespace, listing, limit=10)

    few = reads(conn, page)
    _configured(world, 108, first=12)
    world.db.execute("ANALYZE TABLE weave_definitions, weave_apps, weave_queues, weave_credentials")
    later = world.db.connect()
    try:
        many = reads(later, lambda: routines.config_page(later, _reader(world, listing), world.namespace, listing,
                                                         limit=10))
    finally:
        later.close()
    assert many <= few + SLACK, (few, many)
    assert len(page()["items"]) == 10 and page()["next_cursor"] is not None


@pytest.mark.parametrize("listing", LISTINGS)
def test_R11_a_configuration_page_refuses_a_size_outside_1_to_1000(world, listing):
    for limit in (0, -1, 1_001):
        with pytest.raises(errors.ValidationFailed) as refused:
            routines.config_page(world.db.conn, _reader(world, listing), world.namespace, listing, limit=limit)
        assert refused.value.field_code == "LIMIT_INVALID"


def test_R11_a_credential_page_refuses_a_cursor_no_page_answered(world):
    for cursor in ("7", "cred_", "cred_x", "cred_1 ", "wf_1", "cred_" + "9" * 20):
        with pytest.raises(errors.ValidationFailed) as refused:
            routines.config_page(world.db.conn, world.admin, world.namespace, "credentials", cursor=cursor)
        assert refused.value.field_code == "INVALID_ARGUMENT"


def test_S2_a_queue_restricted_admin_pages_through_its_own_queues_and_credentials(world):
    """The pages of an admin restricted to some queues hold only those queues and their credentials, and their
    cursors step over the others."""
    conn, admin, ns = world.db.conn, world.admin, world.namespace
    for name in ("a-mine", "b-other", "c-mine", "d-other", "e-mine"):
        routines.queue_put(conn, admin, ns, name, 5)
        routines.credential_create(conn, admin, ns, f"bot-{name}", ["workflows:read"], queues=[name])
    restricted = world.credential(["admin"], queues=["a-mine", "c-mine", "e-mine"], actor="mine-admin")["token"]
    assert _pages(world, "queues", 1, restricted) == [["a-mine"], ["c-mine"], ["e-mine"]]
    actors = [c["actor"] for c in routines.config_list(conn, restricted, ns, "credentials")]
    assert actors == ["bot-a-mine", "bot-c-mine", "bot-e-mine", "mine-admin"]
    pages = _pages(world, "credentials", 2, restricted)
    assert [len(page) for page in pages] == [2, 2]
