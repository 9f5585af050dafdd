"""Configuration that grows for years (definitions with many versions, credentials that expire and are never
disabled): what a listing or a scrape reads, and what it shows, does not depend on how much of it is history."""

from __future__ import annotations

import datetime as dt

from procedures import routines

SLACK = 4  # reads a reopened table's statistics may add


def flow(name: str, delay_ms: int) -> dict:
    return {"name": name, "steps": [{"key": "wait", "type": "TIMER", "delay_ms": delay_ms}]}


def test_S2_expiring_credentials_are_listed_before_the_expired_ones_nobody_disabled(world):
    """weave_status listed every active credential made to expire, the soonest first, at most 1,000: once 1,000
    short-lived tokens had expired without being disabled, one about to expire was no longer listed, so /metrics and
    `weave status` never showed it. Those yet to expire come first now, then the latest 100 of those past."""
    conn = world.db.conn
    soon = world.db.now() + dt.timedelta(seconds=1)
    for n in range(1_001):
        routines.credential_create(conn, world.admin, world.namespace, f"ci-{n}", ["workflows:read"], expires_at=soon)
    world.db.advance(2_000)
    at = world.db.now() + dt.timedelta(days=2)
    made = routines.credential_create(conn, world.admin, world.namespace, "contractor", ["workflows:read"],
                                      expires_at=at)
    listed = routines.status(conn)["expiring_credentials"]
    assert listed[0]["credential_id"] == made["credential_id"]
    past = listed[1:]
    assert len(past) == 100 and all(c["actor"].startswith("ci-") for c in past)
    assert [c["credential_id"] for c in past] == sorted((c["credential_id"] for c in past),
                                                        key=lambda c: -int(c.removeprefix("cred_")))
