"""A credential restricted to some queues acts on those queues only (S-2): it reads and lists only the instances
whose definitions use no other queue, publishes only such definitions, and, with the admin scope, administers only
its queues and credentials for them. Before, a queue-restricted admin could create a credential for every queue
(and so act on every instance), disable any credential and change any queue's capacity, and a queue-restricted
reader listed every instance of the namespace."""

from __future__ import annotations

import datetime as dt

import pytest

from procedures import definitions, errors, routines
from tests.support.world import WORKFLOW_SCOPES

TIMER = {"name": "cool-off", "steps": [{"key": "wait", "type": "TIMER", "delay_ms": 60_000}]}


def _tasky(name: str, queue: str) -> dict:
    return {"name": name, "steps": [{"key": "work", "type": "TASK", "queue": queue, "handler": "h",
                                     "handler_version": "1"}]}


@pytest.fixture
def two_queues(world):
    """Queues "payments" and "mail", a definition on each, and an admin restricted to "payments"."""
    routines.queue_put(world.db.conn, world.admin, "acme", "mail", 10)
    world.publish(_tasky("pay", "payments"))
    world.publish(_tasky("send", "mail"))
    return world.credential(["admin", "definitions:publish"], queues=["payments"], actor="payments-admin")["token"]


def _refused(world, call) -> None:
    """The call is FORBIDDEN and leaves every table as it was."""
    before = world.db.table_counts()
    with pytest.raises(errors.Forbidden):
        call()
    assert world.db.table_counts() == before


def test_S2_a_queue_restricted_admin_creates_credentials_only_for_its_queues(world, two_queues):
    conn = world.db.conn
    _refused(world, lambda: routines.credential_create(conn, two_queues, "acme", "x", WORKFLOW_SCOPES, "*"))
    _refused(world, lambda: routines.credential_create(conn, two_queues, "acme", "x", WORKFLOW_SCOPES, ["mail"]))
    _refused(world, lambda: routines.credential_create(conn, two_queues, "acme", "x", WORKFLOW_SCOPES,
                                                       ["payments", "mail"]))
    made = routines.credential_create(conn, two_queues, "acme", "x", WORKFLOW_SCOPES, ["payments"])
    assert made["queues"] == ["payments"]
    # What it made acts on payments only: a start of "send" (mail) is refused, one of "pay" goes.
    with pytest.raises(errors.Forbidden):
        world.start("send", token=made["token"])
    assert world.start("pay", token=made["token"]).startswith("wf_")
    # An admin of every queue still creates credentials for any queue, and for every queue.
    assert world.credential(WORKFLOW_SCOPES, queues=["mail"])["queues"] == ["mail"]
    assert world.credential(WORKFLOW_SCOPES)["queues"] == ["*"]


def test_S2_a_queue_restricted_admin_disables_only_credentials_of_its_queues(world, two_queues):
    conn = world.db.conn
    everything = world.credential(["workflows:read"])
    mail = world.credential(["workflows:read"], queues=["mail"])
    payments = world.credential(["workflows:read"], queues=["payments"])
    for other in (everything, mail):
        _refused(world, lambda other=other: routines.credential_disable(conn, two_queues, "acme",
                                                                         other["credential_id"]))
    assert routines.credential_disable(conn, two_queues, "acme", payments["credential_id"])["status"] == "DISABLED"
    for other in (everything, mail):  # and enables only those
        _refused(world, lambda other=other: routines.credential_enable(conn, two_queues, "acme",
                                                                        other["credential_id"]))
    # It lists the credentials it administers: those of its queues, itself included.
    listed = {c["credential_id"] for c in routines.credential_list(conn, two_queues, "acme")}
    assert payments["credential_id"] in listed and not listed & {everything["credential_id"], mail["credential_id"]}
    assert {everything["credential_id"], mail["credential_id"]} <= {
        c["credential_id"] for c in routines.credential_list(conn, world.admin, "acme")}
    world.publish(TIMER)  # the refused ones still authenticate; the disabled one no longer does
    wf = world.start("cool-off")
    assert routines.instance_get(conn, everything["token"], "acme", wf)["workflow_id"] == wf
    with pytest.raises(errors.Unauthenticated):
        routines.instance_get(conn, payments["token"], "acme", wf)


def test_S2_a_queue_restricted_admin_sets_only_its_queues_and_no_app_or_retention(world, two_queues):
    conn = world.db.conn
    assert routines.queue_put(conn, two_queues, "acme", "payments", 7)["capacity"] == 7
    _refused(world, lambda: routines.queue_put(conn, two_queues, "acme", "mail", 0))
    _refused(world, lambda: routines.queue_put(conn, two_queues, "acme", "new-queue", 5))
    # An app's limit and status bound its tasks on every queue; a retention run removes every queue's history.
    _refused(world, lambda: routines.app_put(conn, two_queues, "acme", "billing", 0, "DISABLED"))
    _refused(world, lambda: routines.instances_purge(conn, two_queues, "acme", dt.datetime(2020, 1, 1),
                                                     reason="retention"))
    assert routines.queue_put(conn, world.admin, "acme", "mail", 3)["capacity"] == 3


def test_S2_a_queue_restricted_publisher_publishes_only_definitions_of_its_queues(world, two_queues):
    conn = world.db.conn
    _refused(world, lambda: routines.definition_publish(conn, two_queues, "acme",
                                                        definitions.validate(_tasky("send", "mail"))))
    both = {"name": "both", "steps": [_tasky("x", "payments")["steps"][0],
                                      {**_tasky("x", "mail")["steps"][0], "key": "notify"}]}
    _refused(world, lambda: routines.definition_publish(conn, two_queues, "acme", definitions.validate(both)))
    assert routines.definition_publish(conn, two_queues, "acme", definitions.validate(_tasky("pay2", "payments")))[
        "version"] == 1
    # A definition without a queue uses none it may not: anyone who may publish publishes it.
    assert routines.definition_publish(conn, two_queues, "acme", definitions.validate(TIMER))["version"] == 1


def test_S2_a_queue_restricted_reader_lists_only_the_instances_it_may_read(world, two_queues):
    """The list answers what a read by id answers: an instance whose definition uses a queue the credential does not
    hold is left out of every page (as its GET is 403), with pages and cursors as for everyone."""
    conn = world.db.conn
    world.publish(TIMER)
    started = [(name, world.start(name)) for _ in range(3) for name in ("pay", "send", "cool-off")]
    payments = world.credential(["workflows:read"], queues=["payments"])["token"]
    mail = world.credential(["workflows:read"], queues=["mail"])["token"]

    def listed(token: str, **filters) -> list[str]:
        ids, cursor = [], None
        while True:
            page = routines.instance_list(conn, token, "acme", limit=2, cursor=cursor, **filters)
            ids += [item["workflow_id"] for item in page["items"]]
            if (cursor := page["next_cursor"]) is None:
                return ids

    newest_first = [wf for _, wf in reversed(started)]
    assert listed(world.token) == newest_first
    for token, queue_def in ((payments, "pay"), (mail, "send")):
        visible = [wf for name, wf in reversed(started) if name in (queue_def, "cool-off")]
        assert listed(token) == visible
        assert listed(token, status="RUNNING") == visible
        assert listed(token, definition="pay") == [wf for name, wf in reversed(started)
                                                   if name == "pay" and queue_def == "pay"]
        for wf in visible:
            assert routines.instance_get(conn, token, "acme", wf)["workflow_id"] == wf
        for wf in set(newest_first) - set(visible):
            with pytest.raises(errors.Forbidden):
                routines.instance_get(conn, token, "acme", wf)


def test_S2_a_queue_restricted_admin_lists_its_queues_and_reads_the_actions_of_the_credentials_it_administers(
        world, two_queues):
    """What a restricted admin may administer is what it lists: its queues, its credentials, and in the audit trail
    the namespace's actions of those credentials (each page and cursor as for everyone). The actions of an admin of
    every queue, or of another queue's credentials, are not its to read."""
    conn = world.db.conn
    assert [q["name"] for q in routines.queue_list(conn, two_queues, "acme")] == ["payments"]
    assert [q["name"] for q in routines.queue_list(conn, world.admin, "acme")] == ["mail", "payments"]
    mail_admin = world.credential(["admin"], queues=["mail"], actor="mail-admin")["token"]
    routines.queue_put(conn, mail_admin, "acme", "mail", 4)
    ours = routines.credential_create(conn, two_queues, "acme", "payments-reader", WORKFLOW_SCOPES, ["payments"])
    routines.queue_put(conn, two_queues, "acme", "payments", 9)
    routines.credential_disable(conn, two_queues, "acme", ours["credential_id"])

    def trail(token: str) -> list[tuple[str, str]]:
        rows, cursor = [], None
        while True:
            page = routines.audit_list(conn, token, "acme", limit=2, cursor=cursor)
            rows += [(item["actor"], item["action"]) for item in page["items"]]
            if (cursor := page["next_cursor"]) is None:
                return rows

    everything = trail(world.admin)
    assert ("mail-admin", "queue.put") in everything
    assert trail(two_queues) == [row for row in everything if row[0] == "payments-admin"] == [
        ("payments-admin", "credential.disable"), ("payments-admin", "queue.put"),
        ("payments-admin", "credential.create")]
    assert trail(mail_admin) == [("mail-admin", "queue.put")]


def test_S2_a_queue_list_is_checked_for_what_it_is_before_whose_queues_it_names(world, two_queues):
    """A malformed or overlong list of queues is NAME_INVALID for every admin, restricted or not: it was FORBIDDEN
    (or, past 2,048 characters, a value too long for the authorisation's parameter) for a restricted one."""
    conn = world.db.conn
    for queues in ("pay ments", ",".join(["q" * 60] * 50)):
        for token in (two_queues, world.admin):
            with pytest.raises(errors.ValidationFailed) as refused:
                routines.credential_create(conn, token, "acme", "x", WORKFLOW_SCOPES, queues)
            assert refused.value.field_code == "NAME_INVALID", (queues[:20], refused.value)
