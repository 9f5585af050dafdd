"""Idempotency keys of the admin requests besides publishing (07-api: every POST that creates or changes something
takes one): an app's put, a queue's put, a credential's creation. A retry after a lost answer answers the first
answer and changes nothing, even after other changes; the key with another request is a conflict."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from procedures import db, errors, invariants, routines


def _audit(world, action: str) -> list[dict]:
    return world.db.rows("SELECT idempotency_key, response FROM weave_audit WHERE action = %s ORDER BY id", action)


def test_M2_a_keyed_app_put_answers_its_first_put_again_and_does_not_undo_a_later_one(world):
    """A quota change retried after its answer was lost, once another admin had changed the quota meanwhile, put
    the first quota back. With a key the retry answers the first put (created, status as then) and writes nothing."""
    conn = world.db.conn
    first = routines.app_put(conn, world.admin, "acme", "reports", 10, None, "provision-7")
    assert (first["max_in_flight"], first["status"], first["created"], first["replayed"]) == (10, "ACTIVE", 1, False)
    routines.app_put(conn, world.admin, "acme", "reports", 25, "DISABLED")
    again = routines.app_put(conn, world.admin, "acme", "reports", 10, None, "provision-7")
    assert again == {**first, "replayed": True}
    assert world.db.row("SELECT max_in_flight, status FROM weave_apps WHERE name = 'reports'") == {
        "max_in_flight": 25, "status": "DISABLED"}
    with pytest.raises(errors.IdempotencyConflict, match="this key made another app put"):
        routines.app_put(conn, world.admin, "acme", "reports", 11, None, "provision-7")
    with pytest.raises(errors.IdempotencyConflict):  # a status given is another request than a status kept
        routines.app_put(conn, world.admin, "acme", "reports", 10, "ACTIVE", "provision-7")
    with pytest.raises(errors.ValidationFailed) as refused:
        routines.app_put(conn, world.admin, "acme", "reports", 10, None, "provision 8")
    assert refused.value.field_code == "IDEMPOTENCY_KEY_INVALID"
    # The same key for a queue is another operation: keys are scoped by kind.
    assert routines.queue_put(conn, world.admin, "acme", "exports", 3, "provision-7")["replayed"] is False
    assert [r for r in _audit(world, "app.put") if r["idempotency_key"]] == [
        {"idempotency_key": "provision-7", "response": json.dumps({"status": "ACTIVE", "created": 1})}]


def test_M2_a_keyed_queue_put_answers_its_first_put_again(world):
    conn = world.db.conn
    routines.queue_put(conn, world.admin, "acme", "exports", 5)
    first = routines.queue_put(conn, world.admin, "acme", "exports", 8, "cap-1")
    assert (first["capacity"], first["created"], first["replayed"]) == (8, 0, False)
    routines.queue_put(conn, world.admin, "acme", "exports", 2)
    assert routines.queue_put(conn, world.admin, "acme", "exports", 8, "cap-1") == {**first, "replayed": True}
    assert world.db.scalar("SELECT capacity FROM weave_queues WHERE name = 'exports'") == 2
    with pytest.raises(errors.IdempotencyConflict, match="this key made another queue put"):
        routines.queue_put(conn, world.admin, "acme", "exports", 9, "cap-1")


def test_S2_a_keyed_credential_create_names_the_credential_it_made_without_its_token(world):
    """A credential's creation whose answer was lost made a live credential nobody held the token of, and a retry
    made another. With a key the retry answers which credential the first made, its token null (shown once), so
    that it can be disabled; no second credential is made."""
    conn = world.db.conn
    before = world.db.scalar("SELECT COUNT(*) FROM weave_credentials")
    first = routines.credential_create(conn, world.admin, "acme", "ci-bot", ["workflows:read"], "*",
                                       idempotency_key="bot-1")
    assert first["token"].startswith("wv_") and first["replayed"] is False
    again = routines.credential_create(conn, world.admin, "acme", "ci-bot", ["workflows:read"], "*",
                                       idempotency_key="bot-1")
    assert again == {**first, "token": None, "replayed": True}
    assert world.db.scalar("SELECT COUNT(*) FROM weave_credentials") == before + 1
    with pytest.raises(errors.IdempotencyConflict, match="this key created another credential"):
        routines.credential_create(conn, world.admin, "acme", "ci-bot", ["workflows:read", "workflows:signal"],
                                   "*", idempotency_key="bot-1")
    # Without a key, every create makes a credential, as before.
    routines.credential_create(conn, world.admin, "acme", "ci-bot", ["workflows:read"], "*")
    assert world.db.scalar("SELECT COUNT(*) FROM weave_credentials") == before + 2
    assert [r for r in _audit(world, "credential.create") if r["idempotency_key"]] == [
        {"idempotency_key": "bot-1", "response": json.dumps({"credential_id": first["credential_id"],
                                                             "expires_at": None})}]
    # The replay still authenticates its caller: a disabled admin is refused, whatever the key made.
    other = routines.credential_create(conn, world.admin, "acme", "admin-2", ["admin"], "*")
    routines.credential_disable(conn, world.admin, "acme", other["credential_id"])
    with pytest.raises(errors.Unauthenticated):
        routines.credential_create(conn, other["token"], "acme", "ci-bot", ["workflows:read"], "*",
                                   idempotency_key="bot-1")


def test_M2_two_tries_of_one_keyed_admin_request_at_once_act_once(world):
    """Two tries of one key that arrive together wait on the namespace's lock: a READ COMMITTED read of the key's
    audit row locks no gap, so without that lock each would find no row and both act."""
    answers = world.held_on_the_namespace_lock([
        lambda conn: routines.credential_create(conn, world.admin, "acme", "ci-bot", ["workflows:read"], "*",
                                                idempotency_key="together"),
        lambda conn: routines.credential_create(conn, world.admin, "acme", "ci-bot", ["workflows:read"], "*",
                                                idempotency_key="together")])
    assert sorted(a["replayed"] for a in answers) == [False, True]
    assert len({a["credential_id"] for a in answers}) == 1
    assert world.db.scalar("SELECT COUNT(*) FROM weave_credentials WHERE actor = 'ci-bot'") == 1
    puts = world.held_on_the_namespace_lock([
        lambda conn: routines.app_put(conn, world.admin, "acme", "reports", 4, None, "together"),
        lambda conn: routines.app_put(conn, world.admin, "acme", "reports", 4, None, "together")])
    assert sorted((a["created"], a["replayed"]) for a in puts) == [(1, False), (1, True)]


@pytest.mark.breaks_invariants("M-4.14c")
def test_M4_14c_an_admin_key_answers_one_request_with_what_it_asked_and_answered(world):
    """A key's audit row is its request's one answer: a second row under the key, a row without its request's
    digest or answer, or a create's answer naming no credential of its namespace, is caught after every scenario."""
    conn = world.db.conn
    routines.app_put(conn, world.admin, "acme", "reports", 4, None, "k-app")
    routines.credential_create(conn, world.admin, "acme", "ci-bot", ["workflows:read"], "*", idempotency_key="k-cred")
    assert "M-4.14c" not in invariants.violations(conn)
    world.db.execute("INSERT INTO weave_audit (namespace_id, instance_id, credential_id, actor, action, "
                     "idempotency_key, request_digest, accepted_at, details, response, created_at) "
                     "SELECT namespace_id, instance_id, credential_id, actor, action, idempotency_key, "
                     "NULL, accepted_at, details, response, created_at FROM weave_audit "
                     "WHERE idempotency_key = 'k-app'")
    world.db.execute("UPDATE weave_audit SET response = JSON_OBJECT('credential_id', 'cred_999999') "
                     "WHERE idempotency_key = 'k-cred'")
    # the key twice, the copy without its digest, and the answer that names no credential
    assert len(invariants.violations(conn)["M-4.14c"]) == 3


def test_S2_a_credential_made_by_one_that_expires_expires_no_later(world):
    """An admin credential given a few days made another admin credential that never expired, and kept its power for
    good. A credential made by a token whose credential expires expires no later: without an expiry it takes the
    token's, and a later one is refused."""
    conn = world.db.conn
    now = db.call_row(conn, "weave_clock_now")["now_at"]
    bound = now + dt.timedelta(days=3)
    contractor = routines.credential_create(conn, world.admin, "acme", "contractor", ["admin"], "*", expires_at=bound)
    made = routines.credential_create(conn, contractor["token"], "acme", "persist", ["admin"], "*")
    assert made["expires_at"] == contractor["expires_at"] == routines.rfc3339(bound)
    earlier = routines.credential_create(conn, contractor["token"], "acme", "short", ["workflows:read"], "*",
                                         expires_at=now + dt.timedelta(days=1))
    assert earlier["expires_at"] == routines.rfc3339(now + dt.timedelta(days=1))
    with pytest.raises(errors.ValidationFailed, match="no later than this token's own expiry") as refused:
        routines.credential_create(conn, contractor["token"], "acme", "persist2", ["admin"], "*",
                                   expires_at=bound + dt.timedelta(microseconds=1))
    assert refused.value.field_code == "DEADLINE_INVALID"
    assert world.db.scalar("SELECT COUNT(*) FROM weave_credentials WHERE expires_at IS NULL AND actor <> 'ci-bot' "
                           "AND created_at >= %s", now) == 0
    # A token that never expires makes credentials that never expire, as before.
    assert routines.credential_create(conn, world.admin, "acme", "ops", ["workflows:read"], "*")["expires_at"] is None
