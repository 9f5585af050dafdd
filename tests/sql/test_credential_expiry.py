"""A credential may expire (S-2): from its expires_at, on the engine clock, it authenticates no more, for every routine
and for the console sessions opened with it, exactly as a disabled one; before, it works as any other. A credential
without an expiry never reads the clock to be checked."""

from __future__ import annotations

import datetime as dt

import pytest

from procedures import errors, routines
from tests.support.world import WORKFLOW_SCOPES

TIMER = {"name": "cool-off", "steps": [{"key": "wait", "type": "TIMER", "delay_ms": 60_000}]}
HOUR = dt.timedelta(hours=1)


def test_S2_an_expiring_credential_authenticates_until_its_time_then_never(world):
    world.publish(TIMER)
    made = routines.credential_create(world.db.conn, world.admin, "acme", "contractor", WORKFLOW_SCOPES,
                                      expires_at=world.db.now() + HOUR)
    token = made["token"]
    assert made["expires_at"].endswith("Z")
    wf = world.start("cool-off", token=token)
    assert routines.instance_get(world.db.conn, token, "acme", wf)["workflow_id"] == wf
    session = "e" * 64
    routines.console_session_open(world.db.conn, token, "acme", session, b"sealed", 86_400)
    live = routines.console_session_get(world.db.conn, session)
    assert live["actor"] == "contractor"
    assert routines.rfc3339(live["expires_at"]) == made["expires_at"]  # a day's session ends with its credential

    world.db.advance(3_600_000)  # exactly at its expiry
    before = world.db.table_counts()
    with pytest.raises(errors.Unauthenticated, match="expired"):
        routines.instance_get(world.db.conn, token, "acme", wf)
    with pytest.raises(errors.Unauthenticated, match="expired"):
        world.start("cool-off", token=token)
    with pytest.raises(errors.Unauthenticated):
        routines.console_session_get(world.db.conn, session)  # its console sessions end with it
    assert world.db.table_counts() == before
    assert routines.instance_get(world.db.conn, world.token, "acme", wf)["workflow_id"] == wf  # others go on
    listed = {c["actor"]: c for c in routines.credential_list(world.db.conn, world.admin, "acme")}
    assert (listed["contractor"]["status"], listed["contractor"]["expires_at"]) == ("EXPIRED", made["expires_at"])
    assert (listed["ops"]["status"], listed["ops"]["expires_at"]) == ("ACTIVE", None)


def test_S2_an_expiry_not_later_than_now_is_refused_and_the_audit_row_records_it(world):
    for at in (world.db.now(), world.db.now() - HOUR):
        before = world.db.table_counts()
        with pytest.raises(errors.ValidationFailed) as info:
            routines.credential_create(world.db.conn, world.admin, "acme", "late", ["workflows:read"], expires_at=at)
        assert info.value.field_code == "DEADLINE_INVALID" and world.db.table_counts() == before
    made = routines.credential_create(world.db.conn, world.admin, "acme", "ok", ["workflows:read"],
                                      expires_at=world.db.now() + HOUR)
    audit = routines.audit_list(world.db.conn, world.admin, "acme", action="credential.create", limit=1)["items"][0]
    assert audit["details"]["expires_at"] == made["expires_at"]


def test_S2_a_credential_without_expiry_reads_no_clock_to_be_checked(world):
    """The check costs a credential that never expires nothing: an instance read takes the statements it took."""
    world.publish(TIMER)
    wf = world.start("cool-off")
    expiring = routines.credential_create(world.db.conn, world.admin, "acme", "temp", ["workflows:read"],
                                          expires_at=world.db.now() + HOUR)["token"]

    def statements(token: str) -> int:
        with world.db.conn.cursor() as cur:
            cur.execute("FLUSH STATUS")
        routines.instance_get(world.db.conn, token, "acme", wf)
        with world.db.conn.cursor() as cur:
            cur.execute("SHOW SESSION STATUS LIKE 'Com_select'")
            return int(cur.fetchone()["Value"])

    statements(world.token)  # warm
    assert statements(expiring) == statements(world.token) + 1  # the clock, read for the expiring one only


@pytest.mark.parametrize("at", ["2099-00-10 00:00:00", "2099-01-00 00:00:00"], ids=["zero-month", "zero-day"])
def test_S2_an_expiry_that_is_no_time_is_DEADLINE_INVALID_from_a_session_that_passes_it(world, at):
    """A session without NO_ZERO_DATE passes a date with a zero month or day to the routine; it is no time, refused
    with the documented code, and nothing is written."""
    client = world.db.client(sql_mode="")
    before = world.db.table_counts()
    try:
        with pytest.raises(errors.ValidationFailed) as info:
            routines.credential_create(client, world.admin, "acme", "later", ["workflows:read"], expires_at=at)
    finally:
        client.close()
    assert info.value.field_code == "DEADLINE_INVALID" and world.db.table_counts() == before


def test_S2_R8_the_instances_an_expired_credential_started_go_on(world, orch):
    """Expiry ends what the credential itself can do from then, not the work it started: the instance's next step is
    new work (R-8) and is activated after the expiry as before it. Disabling the credential is what stops that
    work (IDENTITY_DISABLED), and the docs say so."""
    world.publish({"name": "two-waits", "steps": [{"key": "a", "type": "TIMER", "delay_ms": 3_600_000},
                                                  {"key": "b", "type": "TIMER", "delay_ms": 60_000, "after": ["a"]}]})
    token = routines.credential_create(world.db.conn, world.admin, "acme", "contractor", WORKFLOW_SCOPES,
                                       expires_at=world.db.now() + dt.timedelta(minutes=30))["token"]
    wf = world.start("two-waits", token=token)
    orch.drain()
    world.db.advance(3_600_000)  # a settles half an hour after the credential expired; b is new work
    orch.drain()
    got = world.instance(wf)
    assert got["deferred"] is None and [s["status"] for s in got["steps"]] == ["SUCCEEDED", "ACTIVE"]
    world.db.advance(60_000)
    orch.drain()
    assert world.instance(wf)["status"] == "SUCCEEDED"


def test_S2_R18_a_disabled_credential_enabled_again_lets_its_instances_go_on(world, orch):
    """A disabled credential's instances take no new step (R-8: IDENTITY_DISABLED), a wait that must be able to
    clear (R-18): enabling the credential again clears it. The token authenticates again, the instance's next step
    starts at its next check, and the action is audited; enabling an active credential changes nothing else."""
    world.publish({"name": "two-waits", "steps": [{"key": "a", "type": "TIMER", "delay_ms": 60_000},
                                                  {"key": "b", "type": "TIMER", "delay_ms": 60_000, "after": ["a"]}]})
    made = routines.credential_create(world.db.conn, world.admin, "acme", "contractor", WORKFLOW_SCOPES)
    wf = world.start("two-waits", token=made["token"])
    orch.drain()
    disabled = routines.credential_disable(world.db.conn, world.admin, "acme", made["credential_id"])
    world.db.advance(60_000)
    orch.drain()
    waiting = world.instance(wf)
    assert waiting["deferred"]["reason"] == "IDENTITY_DISABLED" and waiting["steps"][1]["status"] == "PENDING"
    with pytest.raises(errors.Unauthenticated):
        routines.instance_get(world.db.conn, made["token"], "acme", wf)

    enabled = routines.credential_enable(world.db.conn, world.admin, "acme", made["credential_id"])
    assert (disabled["status"], enabled) == ("DISABLED", {**disabled, "status": "ACTIVE"})
    assert routines.instance_get(world.db.conn, made["token"], "acme", wf)["workflow_id"] == wf
    world.db.advance(1_000)  # the deferred check's next look
    orch.drain()
    assert world.instance(wf)["deferred"] is None and world.step(wf, "b")["status"] == "ACTIVE"
    world.db.advance(60_000)
    orch.drain()
    assert world.instance(wf)["status"] == "SUCCEEDED"
    listed = {c["credential_id"]: c for c in routines.credential_list(world.db.conn, world.admin, "acme")}
    assert (listed[made["credential_id"]]["status"], listed[made["credential_id"]]["disabled_at"]) == ("ACTIVE", None)
    assert routines.credential_enable(world.db.conn, world.admin, "acme", made["credential_id"]) == enabled
    actions = [r["action"] for r in routines.audit_list(world.db.conn, world.admin, "acme", limit=10)["items"]]
    assert actions[:3] == ["credential.enable", "credential.enable", "credential.disable"]
    with pytest.raises(errors.NotFound):
        routines.credential_enable(world.db.conn, world.admin, "acme", "cred_999999")
    with pytest.raises(errors.Forbidden):
        routines.credential_enable(world.db.conn, world.token, "acme", made["credential_id"])


def test_S2_an_expired_credential_enabled_again_still_authenticates_no_more(world):
    made = routines.credential_create(world.db.conn, world.admin, "acme", "contractor", WORKFLOW_SCOPES,
                                      expires_at=world.db.now() + HOUR)
    routines.credential_disable(world.db.conn, world.admin, "acme", made["credential_id"])
    world.db.advance(3_600_000)
    routines.credential_enable(world.db.conn, world.admin, "acme", made["credential_id"])
    with pytest.raises(errors.Unauthenticated, match="expired"):
        routines.instance_list(world.db.conn, made["token"], "acme")
    listed = {c["credential_id"]: c for c in routines.credential_list(world.db.conn, world.admin, "acme")}
    assert listed[made["credential_id"]]["status"] == "EXPIRED"
