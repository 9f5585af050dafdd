"""The audit trail read back (R-4): a namespace's own actions and an instance's audit rows, newest first, in pages
that neither skip nor repeat, each one range of an index however long the engine's history beside it."""

from __future__ import annotations

import pytest

from procedures import errors, routines
from tests.benchmarks.bench_reads import reads_of

TIMER = {"name": "wait", "steps": [{"key": "t", "type": "TIMER", "delay_ms": 1_000}]}


def audit(world, token=None, **kw) -> dict:
    return routines.audit_list(world.db.conn, token or world.admin, world.namespace, **kw)


def every(world, token=None, **kw) -> list[dict]:
    items, cursor = [], None
    while True:
        page = audit(world, token, cursor=cursor, **kw)
        items += page["items"]
        cursor = page["next_cursor"]
        if cursor is None:
            return items


def test_R4_a_namespace_s_own_actions_are_listed_newest_first_in_pages_that_neither_skip_nor_repeat(world, orch):
    bot = world.credential(["workflows:read"], actor="bot")
    routines.credential_disable(world.db.conn, world.admin, "acme", bot["credential_id"])
    world.publish(TIMER)
    wf = world.start("wait")  # an instance's rows are not the namespace's own
    other = type(world).create(world.db, "other")  # nor is another namespace's
    other.credential(["workflows:read"], actor="elsewhere")
    actions = [a["action"] for a in every(world, limit=2)]
    assert actions == [a["action"] for a in audit(world, limit=500)["items"]]
    assert actions[:3] == ["definition.publish", "credential.disable", "credential.create"]
    assert actions.count("credential.create") == 2 and "instance.start" not in actions  # ops and bot
    rows = audit(world, limit=500)["items"]
    assert all(r["workflow_id"] is None for r in rows)
    assert rows[1]["actor"] == "bootstrap" and rows[1]["credential_id"].startswith("cred_")
    assert rows[1]["details"] == {"credential_id": bot["credential_id"], "console_sessions_ended": 0}
    assert [r["created_at"] for r in rows] == sorted((r["created_at"] for r in rows), reverse=True)
    assert [r["action"] for r in audit(world, action="credential.create")["items"]] == ["credential.create"] * 2
    assert "elsewhere" not in [r.get("details", {}).get("actor") for r in rows]
    started = audit(world, workflow_id=wf, token=world.token)["items"][0]
    assert started["action"] == "instance.start" and started["details"]["version"] == 1  # a number, as in its event


def test_R4_an_instance_s_audit_rows_are_read_with_the_scope_of_its_events(world, orch):
    world.publish(TIMER)
    wf = world.start("wait")
    world.db.advance(1_001)
    orch.drain()
    rows = every(world, world.token, workflow_id=wf, limit=1)
    assert [r["action"] for r in rows] == ["timer.settle", "instance.start"]
    assert rows[0]["actor"] == "weave.orchestrator" and rows[0]["credential_id"] is None
    assert rows[1]["actor"] == "ops" and rows[1]["idempotency_key"] and rows[1]["workflow_id"] == wf
    with pytest.raises(errors.Forbidden):
        audit(world, world.token)  # the namespace's own actions are the admin's to read
    with pytest.raises(errors.NotFound):
        audit(world, world.token, workflow_id="wf_999999")
    with pytest.raises(errors.ValidationFailed, match="LIMIT_INVALID"):
        audit(world, limit=501)
    for cursor in ("nope", "20261305000000000000-1", "2026120500000000000-1"):
        with pytest.raises(errors.ValidationFailed, match="cursor"):
            audit(world, cursor=cursor)


def test_R4_an_instance_s_action_asked_of_the_namespace_s_own_is_refused_saying_where_it_is(world, orch):
    """The namespace's own actions never hold an instance's: asked for step.resolve without an instance, the trail
    answered an empty page, and an auditor read that nobody had resolved anything."""
    for action in ("step.resolve", "instance.pause", "signal.accept", "timer.settle"):
        with pytest.raises(errors.ValidationFailed, match=f"{action} is an action on one instance"):
            audit(world, action=action)
    world.publish(TIMER)
    wf = world.start("wait")
    world.db.advance(1_001)
    orch.drain()
    rows = audit(world, world.token, workflow_id=wf, action="timer.settle")["items"]
    assert [(r["action"], r["workflow_id"]) for r in rows] == [("timer.settle", wf)]


def test_R4_a_page_of_the_audit_trail_reads_what_it_answers_beside_a_long_history(world, orch):
    """A namespace's own actions are a handful beside the engine's audit rows, one or more per decision: a page of
    them is read from its own range, never by walking the engine's rows of the namespace."""
    for n in range(5):
        world.credential(["workflows:read"], actor=f"bot-{n}")
    world.publish(TIMER)

    def page() -> int:
        return reads_of(world.db.conn, lambda: audit(world, limit=3))

    quiet = page()
    for n in range(60):
        world.start("wait", key=f"busy-{n}")
    world.db.advance(1_001)
    orch.drain()
    assert world.db.scalar("SELECT COUNT(*) FROM weave_audit WHERE instance_id <> 0") >= 120
    world.db.execute("ANALYZE TABLE weave_audit")
    assert page() <= quiet + 2, (quiet, page())
