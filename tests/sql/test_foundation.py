"""Namespaces, credentials, definitions and instance start: the base every capability stands on."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
from typing import Any

import pymysql
import pytest

from procedures import definitions, errors, invariants, pulse, routines
from procedures.definitions import model
from tests.support.threads import run_threads
from tests.support.world import WORKFLOW_SCOPES, World

TIMER = {"name": "cool-off", "steps": [{"key": "wait", "type": "TIMER", "delay_ms": 60_000}]}
TASKY = {"name": "charge", "steps": [{"key": "charge", "type": "TASK", "queue": "payments", "handler": "pay",
                                      "handler_version": "1", "input": {"order": "$.input.order_id"}}]}


def test_bootstrap_prints_a_token_stored_only_as_its_sha256(db):
    boot = routines.namespace_bootstrap(db.conn, "acme")
    assert boot["token"].startswith("wv_") and len(boot["token"]) > 40
    stored = db.rows("SELECT token_hash, scopes FROM weave_credentials")
    assert stored == [{"token_hash": hashlib.sha256(boot["token"].encode()).hexdigest(),
                       "scopes": "admin,definitions:publish"}]
    everything = " ".join(str(v) for t in db.table_counts() for r in db.rows(f"SELECT * FROM `{t}`")
                          for v in r.values())
    assert boot["token"] not in everything


@pytest.mark.parametrize("name", [".", "..", "", "a/b", "n" * 65])
def test_a_namespace_that_no_path_of_the_api_can_name_is_refused(db, name):
    """A namespace is a segment of the API's paths, where most HTTP clients (curl, browsers, requests) resolve "."
    and ".." away before they send: /v1/namespaces/../workflows reached another path. Such names are refused as
    definition names and step keys are."""
    with pytest.raises(errors.ValidationFailed) as refused:
        routines.namespace_bootstrap(db.conn, name)
    assert refused.value.field_code == "NAME_INVALID"
    assert db.scalar("SELECT COUNT(*) FROM weave_namespaces") == 0
    assert routines.namespace_bootstrap(db.conn, "...")["namespace"] == "..."  # three dots name no other path


def test_S2_bootstrap_credential_has_no_workflow_rights(world):
    world.publish(TIMER)
    with pytest.raises(errors.Forbidden):
        world.start("cool-off", token=world.admin)


def test_credentials_scopes_are_checked_and_never_imply_each_other(world):
    world.publish(TIMER)
    reader = world.credential(["workflows:read"])["token"]
    with pytest.raises(errors.Forbidden):
        world.start("cool-off", token=reader)
    wf = world.start("cool-off")
    assert routines.instance_get(world.db.conn, reader, "acme", wf)["workflow_id"] == wf
    with pytest.raises(errors.ValidationFailed) as info:
        world.credential(["workflows:everything"])
    assert info.value.field_code == "SCOPES_INVALID"



@pytest.mark.parametrize("scopes", ["workflows:read ", " workflows:read", ",".join(["workflows:read"] * 40)],
                         ids=["trailing-space", "leading-space", "longer-than-the-column"])
def test_S2_a_scope_list_the_engine_would_not_match_exactly_is_SCOPES_INVALID(world, scopes):
    """A scope is matched exactly when a credential is used: a list with a scope it would never match (a padded
    name), or one the credential row cannot hold, is refused when the credential is created."""
    before = world.db.table_counts()
    with pytest.raises(errors.ValidationFailed) as info:
        routines.credential_create(world.db.conn, world.admin, "acme", "reader", scopes)
    assert info.value.field_code == "SCOPES_INVALID"
    assert world.db.table_counts() == before

def test_disabled_credential_cannot_authenticate(world):
    cred = world.credential(["workflows:read"])
    routines.credential_disable(world.db.conn, world.admin, "acme", cred["credential_id"])
    world.publish(TIMER)
    wf = world.start("cool-off")
    with pytest.raises(errors.Unauthenticated):
        routines.instance_get(world.db.conn, cred["token"], "acme", wf)
    with pytest.raises(errors.Unauthenticated):
        routines.instance_get(world.db.conn, "wv_not-a-token", "acme", wf)


def test_queue_permissions_cover_every_queue_of_the_definition(world):
    world.publish(TASKY)
    narrow = world.credential(["workflows:start", "workflows:read"], queues=["other"])["token"]
    with pytest.raises(errors.Forbidden):
        world.start("charge", {"order_id": "o1"}, token=narrow)
    wide = world.credential(["workflows:start"], queues=["payments"])["token"]
    assert world.start("charge", {"order_id": "o1"}, token=wide).startswith("wf_")


def test_a_start_replay_checks_the_queues_of_the_pinned_definition_not_of_the_latest(world):
    """A replay answers the instance it started, so it asks for the queues of that instance's pinned definition,
    as a read of the instance does. A start without a version used to check the queues of the latest version: once
    a version with other queues was published, a credential that may not see the instance read it by replaying
    the start (and one that may see it was refused)."""
    routines.queue_put(world.db.conn, world.admin, "acme", "mail", 10)
    world.publish(TASKY)
    started = {"definition": "charge", "app": "billing", "input": {"order_id": "o1"}, "idempotency_key": "k1",
               "deadline_ms": 86_400_000}
    wf = routines.instance_start(world.db.conn, world.token, "acme", **started)["workflow_id"]
    world.publish({**TASKY, "steps": [{**TASKY["steps"][0], "queue": "mail"}]})  # version 2 uses only "mail"
    mail_only = world.credential(["workflows:start", "workflows:read"], queues=["mail"])["token"]
    with pytest.raises(errors.Forbidden):
        routines.instance_get(world.db.conn, mail_only, "acme", wf)
    with pytest.raises(errors.Forbidden):
        routines.instance_start(world.db.conn, mail_only, "acme", **started)
    payments_only = world.credential(["workflows:start"], queues=["payments"])["token"]
    replay = routines.instance_start(world.db.conn, payments_only, "acme", **started)
    assert replay["workflow_id"] == wf and not replay["created"]


@pytest.mark.parametrize("change", [
    {"version": 1}, {"app": "other"}, {"input": {"order_id": "o1", "more": 1}}, {"deadline_ms": 86_400_001},
    {"deadline_ms": None, "deadline_at": "later"}, {"business_key": "b1"},
])
def test_a_start_under_one_key_with_any_field_different_is_a_conflict(world, change):
    """The request digest of a start covers every field: the same key with another version (even the one the
    first start got as the latest), app, input, deadline or business key is IDEMPOTENCY_CONFLICT."""
    routines.app_put(world.db.conn, world.admin, "acme", "other", 10)
    world.publish(TIMER)
    started = {"definition": "cool-off", "app": "billing", "input": {"order_id": "o1"}, "idempotency_key": "k1",
               "deadline_ms": 86_400_000}
    first = routines.instance_start(world.db.conn, world.token, "acme", **started)
    if change.get("deadline_at") == "later":
        change = {**change, "deadline_at": world.db.now() + dt.timedelta(days=1)}
    with pytest.raises(errors.IdempotencyConflict):
        routines.instance_start(world.db.conn, world.token, "acme", **{**started, **change})
    assert routines.instance_start(world.db.conn, world.token, "acme", **started)["workflow_id"] == \
        first["workflow_id"]
    assert world.db.scalar("SELECT COUNT(*) FROM weave_instances") == 1


def test_namespace_isolation_at_the_sql_level(db):
    a = World.create(db, "alpha")
    b = World.create(db, "beta")
    a.publish(TIMER)
    wf = a.start("cool-off")
    before = db.table_counts()
    # B's credential on A's namespace path, and on its own path with A's instance: both 404.
    with pytest.raises(errors.NotFound):
        routines.instance_get(db.conn, b.token, "alpha", wf)
    with pytest.raises(errors.NotFound):
        routines.instance_get(db.conn, b.token, "beta", wf)
    with pytest.raises(errors.NotFound):
        routines.instance_events(db.conn, b.token, "beta", wf)
    with pytest.raises(errors.NotFound):
        routines.definition_get(db.conn, b.token, "beta", "cool-off")
    with pytest.raises(errors.NotFound):
        routines.instance_start(db.conn, b.token, "alpha", definition="cool-off", app="billing",
                                idempotency_key="x", deadline_ms=1000)
    with pytest.raises(errors.ValidationFailed) as info:
        routines.instance_start(db.conn, b.token, "beta", definition="cool-off", app="billing",
                                idempotency_key="x", deadline_ms=1000)
    assert info.value.field_code == "DEFINITION_NOT_FOUND"
    with pytest.raises(errors.NotFound):
        routines.credential_disable(db.conn, b.admin, "beta", db.scalar(
            "SELECT CONCAT('cred_', id) FROM weave_credentials WHERE actor = 'ops' AND namespace_id = "
            "(SELECT id FROM weave_namespaces WHERE name = 'alpha')"))
    assert db.table_counts() == before


def test_publish_assigns_versions_and_same_content_returns_same_version(world):
    first = world.publish(TIMER)
    assert (first["version"], first["created"]) == (1, True)
    again = world.publish({"steps": list(reversed([dict(TIMER["steps"][0], after=[])])), "name": "cool-off"})
    assert (again["version"], again["created"], again["digest"]) == (1, False, first["digest"])
    changed = world.publish({"name": "cool-off", "steps": [{"key": "wait", "type": "TIMER", "delay_ms": 1}]})
    assert (changed["version"], changed["created"]) == (2, True)
    back = world.publish(TIMER)  # same as an older version, but not the latest: a new version
    assert back["version"] == 3
    stored = routines.definition_get(world.db.conn, world.token, "acme", "cool-off", 1)
    assert stored["digest"] == first["digest"] and stored["steps"][0]["delay_ms"] == 60_000


def test_published_versions_are_immutable_and_pinned_by_instances(world, orch):
    world.publish(TIMER)
    wf = world.start("cool-off")
    world.publish({"name": "cool-off", "steps": [{"key": "wait", "type": "TIMER", "delay_ms": 1}]})
    orch.drain()
    inst = world.instance(wf)
    assert inst["definition"] == {"name": "cool-off", "version": 1}
    assert inst["steps"][0]["wait"]["due_at"] > inst["steps"][0]["started_at"]


def publishes_held_on_the_namespace_lock(world, publishes: list[tuple[Any, str | None]]) -> list[dict]:
    """The publishes (a document and its idempotency key), each on a connection of its own, all made to wait on the
    namespace's lock held here, then let go together: their answers."""
    return world.held_on_the_namespace_lock([
        lambda conn, doc=doc, key=key: routines.definition_publish(conn, world.admin, "acme", doc, key)
        for doc, key in publishes])


def test_M2_publishes_of_one_name_at_once_each_take_the_next_version(world):
    """Versions are numbered under the namespace's lock, but the latest was read from the snapshot the publish had
    taken before it waited for that lock: a publish that waited behind another numbered its version as the other
    had, and failed with the server's duplicate-key error (a 500 over HTTP). Three publishes wait on the lock held
    here, then each takes a version of its own."""
    world.publish(TIMER)
    documents = [definitions.validate({"name": "cool-off", "steps": [{"key": "wait", "type": "TIMER",
                                                                       "delay_ms": 1_000 + n}]}) for n in range(3)]
    answers = publishes_held_on_the_namespace_lock(world, [(document, None) for document in documents])
    assert sorted(a["version"] for a in answers) == [2, 3, 4] and all(a["created"] for a in answers)
    assert world.db.scalar("SELECT MAX(version) FROM weave_definitions WHERE name = 'cool-off'") == 4


def test_M2_a_keyed_publish_answers_its_first_publish_again_after_later_ones(world):
    """A publish retried after its answer was lost, once another document was published meanwhile, made the first
    document the latest again (as a new version), and new instances started on it. With a key, the retry answers
    the first publish and writes nothing; the key with another document is a conflict; a key's answer is kept for
    an unchanged publish too (its version, created 0)."""
    old, new = (definitions.validate({"name": "cool-off", "steps": [{"key": "wait", "type": "TIMER",
                                                                      "delay_ms": ms}]}) for ms in (1_000, 2_000))
    conn = world.db.conn
    first = routines.definition_publish(conn, world.admin, "acme", old, "build-41")
    assert (first["version"], first["created"], first["replayed"]) == (1, True, False)
    assert routines.definition_publish(conn, world.admin, "acme", new)["version"] == 2
    again = routines.definition_publish(conn, world.admin, "acme", old, "build-41")
    assert again == {**first, "replayed": True} and type(again["version"]) is int
    assert world.db.scalar("SELECT MAX(version) FROM weave_definitions WHERE name = 'cool-off'") == 2
    with pytest.raises(errors.IdempotencyConflict):
        routines.definition_publish(conn, world.admin, "acme", new, "build-41")
    unchanged = routines.definition_publish(conn, world.admin, "acme", new, "build-42")
    assert (unchanged["version"], unchanged["created"], unchanged["replayed"]) == (2, False, False)
    assert routines.definition_publish(conn, world.admin, "acme", old)["version"] == 3  # no key: a new version
    assert routines.definition_publish(conn, world.admin, "acme", new, "build-42") == {**unchanged, "replayed": True}
    with pytest.raises(errors.ValidationFailed) as refused:
        routines.definition_publish(conn, world.admin, "acme", old, "build 43")
    assert refused.value.field_code == "IDEMPOTENCY_KEY_INVALID"
    # The keys' answers are their audit rows; a replay writes none.
    assert world.db.rows("SELECT idempotency_key, response FROM weave_audit WHERE action = 'definition.publish' "
                         "ORDER BY id") == [
        {"idempotency_key": "build-41", "response": json.dumps({"name": "cool-off", "version": 1,
                                                                "digest": first["digest"], "created": 1})},
        {"idempotency_key": None, "response": None},
        {"idempotency_key": "build-42", "response": json.dumps({"name": "cool-off", "version": 2,
                                                                "digest": unchanged["digest"], "created": 0})},
        {"idempotency_key": None, "response": None}]


@pytest.mark.breaks_invariants("M-4.14b")
def test_M4_14b_a_publish_key_answers_one_publish_of_its_own_document(world):
    """A key's audit row is its publish's one answer: a second row under the key, or an answer naming a version of
    another document, is caught by the invariant that runs after every scenario."""
    conn = world.db.conn
    routines.definition_publish(conn, world.admin, "acme", definitions.validate(TIMER), "release-1")
    assert "M-4.14b" not in invariants.violations(conn)
    world.db.execute("INSERT INTO weave_audit (namespace_id, instance_id, credential_id, actor, action, "
                     "idempotency_key, request_digest, accepted_at, details, response, created_at) "
                     "SELECT namespace_id, instance_id, credential_id, actor, action, idempotency_key, "
                     "REPEAT('0', 64), accepted_at, details, response, created_at FROM weave_audit "
                     "WHERE idempotency_key = 'release-1'")
    assert len(invariants.violations(conn)["M-4.14b"]) == 2  # the key twice, and an answer of another digest


def test_M2_two_publishes_of_one_key_at_once_publish_once(world):
    """Two tries of one keyed publish that wait on the namespace's lock together: the first publishes, the second
    answers it again."""
    document = definitions.validate(TIMER)
    answers = publishes_held_on_the_namespace_lock(world, [(document, "once"), (document, "once")])
    assert sorted((a["version"], a["created"], a["replayed"]) for a in answers) == [(1, True, False),
                                                                                    (1, True, True)]
    assert world.db.scalar("SELECT COUNT(*) FROM weave_definitions") == 1


def test_publish_rejects_a_document_that_did_not_come_through_validation(world):
    with pytest.raises(errors.ValidationFailed) as info:
        world.db.call("weave_definition_publish", world.admin, "acme", '{"name": "x"}', "{}", "", None)
    assert info.value.field_code == "DEFINITION_INVALID"


def test_R18_publish_from_sql_refuses_steps_no_instance_could_run(world, orch):
    """The routine checked a document's numbers and queues but trusted its graph to the validator: sent straight to
    it, steps waiting for each other in a cycle published, and their instances stayed RUNNING for ever with nothing
    said (R-18); an `after` naming no step was ignored (the step ran at once); an unknown type failed every start
    with a 500; a key used twice failed with the server's own error. Each is refused, naming the step."""
    def document(*steps: dict) -> tuple[str, str]:
        compiled = {s["key"]: {"business_key": None, "correlation": None, "input": {"bindings": [], "skeleton": {}},
                               "mutex_key": None} for s in steps if isinstance(s.get("key"), str)}
        return json.dumps({"name": "graph", "steps": list(steps)}), json.dumps(compiled)

    def timer(key: str, *after: str) -> dict:
        return {"key": key, "type": "TIMER", "delay_ms": 1000, "after": list(after)}

    signal = {"key": "s", "type": "SIGNAL", "timeout_ms": 1000, "after": [], "correlation": "$.input.k"}
    cases = [
        ((timer("a", "b"), timer("b", "a")), "steps wait for each other in a cycle"),
        ((timer("x"), timer("a", "x", "c"), timer("b", "a"), timer("c", "b"), timer("d", "c")), "in a cycle"),
        ((timer("a", "zz"),), "steps[0].after names no step of the definition: zz"),
        ((timer("a", "a"),), "steps[0].after names the step itself: a"),
        ((timer("a"), timer("b", "a", "a")), "steps[1].after names a step twice: a"),
        ((timer("a"), timer("A", "a"), timer("b", "B")), "steps[2].after names no step of the definition: B"),
        (({"key": "a", "type": "SLEEP", "after": []},), "steps[0].type must be TIMER, SIGNAL, POLL or TASK"),
        ((signal,), "steps[0].signal must be the contract its signals match"),
        ((timer("a"), timer("a")), "step key a is used by two steps"),
        ((timer("a b"),), "steps[0].key must be"),
        (({**timer("a"), "after": "b"}, timer("b")), "steps[0].after must be a list of step keys"),
        ((timer("a"), {**timer("b"), "after": [None]}), "steps[1].after[0] must be a step key"),
        ((timer("a"), {**timer("b"), "after": ["a", 1]}), "steps[1].after[1] must be a step key"),
        ((timer("a"), {**timer("b"), "after": [["a"]]}), "steps[1].after[0] must be a step key"),
        ((timer("a"), timer("b", "a", "a ")), "steps[1].after[1] must be a step key"),
        (({**timer("a"), "type": "timer"},), "steps[0].type must be TIMER, SIGNAL, POLL or TASK"),
        (({**timer("a"), "type": "TIMER "},), "steps[0].type must be TIMER, SIGNAL, POLL or TASK"),
        ((timer("k" * 64, "m" * 64), timer("m" * 64, "k" * 64)), f"in a cycle, and step {'k' * 40} waits for it"),
        ((timer("k" * 63 + "z", "m" * 64),), f"names no step of the definition: {'m' * 40}"),
    ]
    for steps, said in cases:
        text, compiled = document(*steps)
        with pytest.raises(errors.ValidationFailed) as refused:
            world.db.call("weave_definition_publish", world.admin, "acme", text, compiled, None, None)
        assert refused.value.field_code == "DEFINITION_INVALID" and said in str(refused.value), (steps, refused.value)
        assert str(refused.value).endswith(said) or len(str(refused.value)) < 128, refused.value  # none cut short
    text, compiled = document(*[timer(f"s{n}") for n in range(257)])  # past the 256 steps a definition holds
    with pytest.raises(errors.ValidationFailed, match="DEFINITION_INVALID"):
        world.db.call("weave_definition_publish", world.admin, "acme", text, compiled, None, None)
    text, compiled = document(timer("a"))
    with pytest.raises(errors.ValidationFailed, match="steps.0. has no compiled expressions"):
        world.db.call("weave_definition_publish", world.admin, "acme", text, "{}", None, None)
    assert world.db.scalar("SELECT COUNT(*) FROM weave_definitions") == 0
    # Written out of order, a graph without a cycle publishes, and runs in its order.
    text, compiled = document(timer("c", "b"), timer("b", "a"), timer("a"))
    world.db.call("weave_definition_publish", world.admin, "acme", text, compiled, None, None)
    wf = world.start("graph")
    for _ in range(3):
        world.db.advance(1_001)
        orch.drain()
    assert world.instance(wf)["status"] == "SUCCEEDED"


def test_publish_refuses_a_definition_named_only_a_dot_or_two_from_sql_as_well(world):
    """No API path can name such a definition ("/definitions/.." is resolved away before it is sent)."""
    timer = definitions.validate(TIMER)
    for name in (".", ".."):
        document = json.dumps({**json.loads(timer.canonical_json), "name": name})
        with pytest.raises(errors.ValidationFailed) as info:
            world.db.call("weave_definition_publish", world.admin, "acme", document, timer.compiled_json, None, None)
        assert info.value.field_code == "DEFINITION_INVALID"
    assert world.db.scalar("SELECT COUNT(*) FROM weave_definitions") == 0


def test_R3_publish_refuses_queues_that_disagree_with_the_steps(world):
    """The queues decide which rows a decision locks (R-3) and whether a start activates its first steps, so they
    are the TASK and POLL steps' own queues, derived by publish itself: a list that names one more queue, misses
    one, or is given without such steps is refused, and without a list publish derives it."""
    timer = definitions.validate(TIMER)
    task = definitions.validate(TASKY)
    for document, compiled, queues in ((task.canonical_json, task.compiled_json, ""),
                                       (task.canonical_json, task.compiled_json, "other,payments"),
                                       (timer.canonical_json, timer.compiled_json, "payments")):
        with pytest.raises(errors.ValidationFailed) as info:
            world.db.call("weave_definition_publish", world.admin, "acme", document, compiled, queues, None)
        assert info.value.field_code == "DEFINITION_INVALID"
    assert world.db.scalar("SELECT COUNT(*) FROM weave_definitions") == 0
    assert routines.definition_publish(world.db.conn, world.admin, "acme", task)["created"]
    world.db.call("weave_definition_publish", world.admin, "acme", timer.canonical_json, timer.compiled_json, None,
                  None)
    assert world.db.rows("SELECT queues FROM weave_definitions ORDER BY id") == [{"queues": ",".join(task.queues)},
                                                                              {"queues": ""}]


def test_definition_validation_error_reaches_the_caller_with_codes():
    with pytest.raises(definitions.DefinitionError) as info:
        definitions.validate({"name": "bad", "steps": [{"key": "a", "type": "NAP"}]})
    assert [e.code for e in info.value.errors] == ["UNKNOWN_TYPE"]


def nested(levels: int, innermost):
    for _ in range(levels):
        innermost = {"a": innermost}
    return innermost


def test_P1_the_deepest_input_the_validator_accepts_publishes_and_is_frozen_into_its_task(world):
    """The document holds a step's input at its fourth level and MariaDB reads JSON 32 levels deep: an input with
    arrays and objects nested as deep as the validator allows is stored, resolved and handed to its task."""
    deepest = model.MAX_INPUT_DEPTH
    doc = {"name": "deep", "steps": [dict(TASKY["steps"][0], input={
        "empty": nested(deepest - 2, {}), "bound": nested(deepest - 1, "$.input.x")})]}
    assert world.publish(doc)["version"] == 1
    world.start("deep", {"x": 7})
    task = pulse.task_claim(world.db.conn, "w1", [world.queue])[0]
    assert json.loads(task["input"]) == {"empty": nested(deepest - 2, {}), "bound": nested(deepest - 1, 7)}


def test_P1_expressions_with_the_longest_and_deepest_paths_the_validator_accepts_resolve_at_activation(world):
    """An expression's source path and the path of the member it fills are read by the activation through JSON paths
    of at most 2048 characters and 31 legs: expressions at those limits publish and resolve."""
    far = "k" * (model.MAX_PATH_CHARS - len("$.input."))  # the source path $.input.kk…k
    wide = "w" * (model.MAX_PATH_CHARS - len("$."))  # the target path $.ww…w
    deep = "$.input" + ".a" * (model.MAX_PATH_LEGS - 1)
    doc = {"name": "far", "steps": [dict(TASKY["steps"][0], input={
        "far": f'$.input["{far}"]', wide: "$.input.x", "deep": deep})]}
    world.publish(doc)
    world.start("far", {far: 1, "x": 2, "a": nested(model.MAX_PATH_LEGS - 2, 3)})
    task = pulse.task_claim(world.db.conn, "w1", [world.queue])[0]
    assert json.loads(task["input"]) == {"far": 1, wide: 2, "deep": 3}


def test_R18_a_definition_whose_queue_list_fills_its_column_publishes_and_starts(world):
    """weave_definitions.queues holds the distinct queues comma-separated in 2048 characters: the most the validator
    accepts (31 queues of 64 characters and one of 33) is stored whole and its instances start."""
    queues = [f"{n:02d}".ljust(64, "q") for n in range(31)] + ["z" * 33]
    assert len(",".join(queues)) == model.MAX_QUEUE_LIST_CHARS
    for queue in queues:
        routines.queue_put(world.db.conn, world.admin, world.namespace, queue, 10)
    world.publish({"name": "wide", "steps": [dict(TASKY["steps"][0], key=f"s{n}", queue=queue)
                                             for n, queue in enumerate(queues)]})
    assert world.db.scalar("SELECT queues FROM weave_definitions") == ",".join(sorted(queues))
    world.start("wide", {"order_id": 1})
    assert world.db.scalar("SELECT COUNT(*) FROM pulse_tasks WHERE status = 'QUEUED'") == len(queues)


def test_start_is_idempotent_per_namespace_and_key(world):
    world.publish(TIMER)
    wf = world.start("cool-off", {"order_id": "o1"}, key="order-o1")
    again = routines.instance_start(world.db.conn, world.token, "acme", definition="cool-off", app="billing",
                                    input={"order_id": "o1"}, idempotency_key="order-o1", deadline_ms=86_400_000)
    assert again.pop("instance") == world.instance(wf)  # a replay answers the instance as it is now
    assert again == {"workflow_id": wf, "status": "RUNNING", "created": False}
    with pytest.raises(errors.IdempotencyConflict):
        world.start("cool-off", {"order_id": "o2"}, key="order-o1")
    with pytest.raises(errors.IdempotencyConflict):  # the key is used, whether or not the other definition exists
        world.start("no-such-definition", {"order_id": "o1"}, key="order-o1")
    with pytest.raises(errors.ValidationFailed) as missing:
        world.start("no-such-definition", {"order_id": "o1"}, key="order-o2")
    assert "DEFINITION_NOT_FOUND" in str(missing.value)
    assert world.db.scalar("SELECT COUNT(*) FROM weave_instances") == 1
    events = world.events(wf)
    assert [e["type"] for e in events] == ["INSTANCE_STARTED", "STEP_ACTIVATED"]  # once, by the first start


def test_a_start_replayed_with_its_input_spelled_otherwise_is_the_same_request(world):
    """The input is a JSON value: the same start again from another client (keys in another order, other
    whitespace, escapes for characters that need none) answers the first instance; any other value, a number
    differing in its last digit included, is a conflict, and so is the same input with another field changed."""
    world.publish(TIMER)
    first = '{"order_id": "Zoë-1", "amount": 12345678901234567890, "lines": [1, 2], "note": "a/b"}'

    def start(text: str, **kw) -> dict:
        args = {"definition": "cool-off", "app": "billing", "idempotency_key": "order-1", "deadline_ms": 86_400_000}
        return routines.instance_start(world.db.conn, world.token, "acme", input_json=text, **{**args, **kw})

    wf = start(first)["workflow_id"]
    for same in ('{"amount":12345678901234567890,"lines":[1,2],"note":"a\\/b","order_id":"Zo\\u00eb-1"}',
                 '{ "note" : "a/b" ,\n "order_id":"Zoë-1","lines":[ 1,2 ],"amount":12345678901234567890}'):
        again = start(same)
        assert (again["workflow_id"], again["created"]) == (wf, False), same
    before = world.db.table_counts()
    for other in ('{"order_id": "Zoë-1", "amount": 12345678901234567891, "lines": [1, 2], "note": "a/b"}',
                  '{"order_id": "Zoë-1", "amount": 12345678901234567890, "lines": [2, 1], "note": "a/b"}',
                  '{"order_id": "Zoë-1", "amount": 12345678901234567890, "lines": [1, 2]}',
                  '{"order_id": "Zoë-1", "amount": 12345678901234567890, "lines": [1, 2], "note": "a/b"',
                  first.replace("a/b", "a/B"),
                  first + " " * 1_048_576,  # the same value, but past what a first start takes
                  first.replace("[1, 2]", "[1., 2]")):  # JSON_VALID takes "1.", a first start does not
        with pytest.raises(errors.IdempotencyConflict):
            start(other)
    for changed in ({"deadline_ms": 86_400_001}, {"business_key": "o-1"}, {"app": "other"}):
        with pytest.raises(errors.IdempotencyConflict):
            start(first.replace(", ", ","), **changed)
    assert world.db.table_counts() == before
    assert world.db.scalar("SELECT input FROM weave_instances") == first  # kept as the first start sent it


def test_concurrent_starts_with_one_key_create_one_instance(world):
    world.publish(TIMER)
    results, failures = [], []

    def start():
        conn = world.db.connect()
        try:
            results.append(routines.instance_start(conn, world.token, "acme", definition="cool-off", app="billing",
                                                   input={}, idempotency_key="same", deadline_ms=60_000))
        except Exception as exc:  # collected and asserted below
            failures.append(exc)
        finally:
            conn.close()

    run_threads(lambda _: start(), 8)
    assert failures == []
    assert len({r["workflow_id"] for r in results}) == 1
    assert sum(r["created"] for r in results) == 1
    assert world.db.scalar("SELECT COUNT(*) FROM weave_instances") == 1


def _sixteen_starts(world, definition: str) -> list[Exception]:
    """Sixteen starts of ``definition`` at once, each on its own connection and called once, not retried (a
    deadlock shows as a failure; procedures.db.call would retry it): the failures."""
    failures: list[Exception] = []

    def start(n: int) -> None:
        conn = world.db.connect()
        try:
            with conn.cursor() as cur:
                cur.execute("CALL weave_instance_start(%s, 'acme', %s, NULL, 'billing', %s, NULL, 60000, NULL, %s)",
                            (world.token, definition, json.dumps({"order_id": n}), f"k-{n}"))
                while cur.nextset():
                    pass
        except Exception as exc:  # collected and asserted by the caller
            failures.append(exc)
        finally:
            conn.close()

    run_threads(start, 16)
    return failures


def test_R3_concurrent_starts_of_one_app_that_activate_their_steps_neither_wait_on_each_other_nor_deadlock(world):
    """Starts of a definition without tasks activate their steps in their own transactions: they share only the
    identity and app rows, read shared, so sixteen at once all commit, each with its wait open."""
    world.publish({"name": "pair", "steps": [{"key": "a", "type": "TIMER", "delay_ms": 60_000},
                                             {"key": "b", "type": "TIMER", "delay_ms": 60_000}]})
    assert _sixteen_starts(world, "pair") == []
    assert world.db.scalar("SELECT COUNT(*) FROM weave_instances") == 16
    assert world.db.scalar("SELECT COUNT(*) FROM weave_waits WHERE status = 'WAITING'") == 32
    assert world.db.scalar("SELECT COUNT(*) FROM weave_pending_advances WHERE kind = 'TIMER'") == 32


def test_R3_concurrent_starts_of_one_app_that_create_tasks_queue_on_its_counter_and_never_deadlock(world):
    """Starts of a definition with tasks create their first tasks in their own transactions. Each share-locks the
    app's (namespace, name) index entry, which the counters' guarded update of the app row by its primary key does
    not wait on, so sixteen at once queue on that update and all commit, each with its task queued and counted."""
    world.publish(TASKY)
    assert _sixteen_starts(world, "charge") == []
    assert world.db.scalar("SELECT COUNT(*) FROM weave_steps WHERE status = 'ACTIVE'") == 16
    assert world.db.scalar("SELECT COUNT(*) FROM pulse_tasks WHERE status = 'QUEUED'") == 16
    assert world.db.in_flight() == 16
    assert world.db.scalar("SELECT COUNT(*) FROM weave_pending_advances") == 0


def test_R3_M4_7_reports_and_task_creations_of_one_app_at_once_never_deadlock_and_count_right(world):
    """Sixteen reports of an app's running tasks and sixteen starts that create tasks of the same app, all at once,
    each on its own connection and called once (a deadlock or a lock wait timeout would show as a failure): the
    creations queue on the app's row, the reports release into stripes of their own, and every one commits, with
    the tasks in flight counted right."""
    world.publish(TASKY)
    assert _sixteen_starts(world, "charge") == []
    claimed = pulse.task_claim(world.db.conn, "w1", "payments", limit=16)
    assert len(claimed) == 16
    failures: list[Exception] = []

    def act(n: int) -> None:
        conn = world.db.connect()
        try:
            with conn.cursor() as cur:
                cur.execute("SET SESSION innodb_lock_wait_timeout = 10")
                if n < 16:
                    cur.execute("CALL pulse_attempt_complete(%s, 'w1', '{\"n\": 1}')", (claimed[n]["attempt_id"],))
                else:
                    cur.execute("CALL weave_instance_start(%s, 'acme', 'charge', NULL, 'billing', %s, NULL, 60000, "
                                "NULL, %s)", (world.token, json.dumps({"order_id": n}), f"more-{n}"))
                while cur.nextset():
                    pass
        except Exception as exc:  # collected and asserted below
            failures.append(exc)
        finally:
            conn.close()

    run_threads(act, 32)
    assert failures == []
    assert world.db.scalar("SELECT COUNT(*) FROM pulse_tasks WHERE status = 'SUCCEEDED'") == 16
    assert world.db.scalar("SELECT COUNT(*) FROM pulse_tasks WHERE status = 'QUEUED'") == 16
    assert world.db.in_flight("app") == 16 and world.db.in_flight("queue") == 16


def test_R4_R7_a_start_queues_the_first_task_in_its_own_transaction_with_its_audit_rows(world):
    """A definition with a TASK step: the start activates it as the ROOT advance would, its task created (and the
    app's quota taken) in the start's own transaction; nothing is left for a checkpoint."""
    world.publish(TASKY)
    wf = world.start("charge", {"x": 1}, business_key="order-7")
    inst = world.instance(wf)
    assert inst["status"] == "RUNNING" and inst["control"] == "ACTIVE" and inst["gate"] == "OPEN"
    assert inst["business_key"] == "order-7" and inst["input"] == {"x": 1}
    assert [(s["key"], s["status"]) for s in inst["steps"]] == [("charge", "ACTIVE")]
    assert world.db.scalar("SELECT status FROM pulse_tasks") == "QUEUED"
    assert world.db.scalar("SELECT COUNT(*) FROM weave_pending_advances") == 0
    started = world.db.scalar("SELECT created_at FROM weave_instances")
    assert world.db.scalar("SELECT created_at FROM pulse_tasks") == started  # one transaction, one clock reading
    audit = world.db.rows("SELECT actor, action FROM weave_audit WHERE instance_id = %s ORDER BY id",
                          world.internal_id(wf))
    assert [a["action"] for a in audit] == ["instance.start", "task.create"] and audit[0]["actor"] == "ops"


def test_R7_start_activates_the_first_steps_of_a_definition_without_tasks_and_answers_them(world):
    world.publish(TIMER)
    started = routines.instance_start(world.db.conn, world.token, "acme", definition="cool-off", app="billing",
                                      input={}, idempotency_key="t-1", deadline_ms=86_400_000)
    inst = started["instance"]
    assert started["status"] == "RUNNING" and inst == world.instance(started["workflow_id"])
    assert [(s["key"], s["status"], s["wait"]["status"]) for s in inst["steps"]] == [("wait", "ACTIVE", "WAITING")]
    assert world.db.scalar("SELECT kind FROM weave_pending_advances") == "TIMER"


@pytest.mark.parametrize("field, kwargs", [
    ("DEADLINE_INVALID", {"deadline_ms": 0}),
    ("DEADLINE_INVALID", {"deadline_ms": None}),
    ("INPUT_INVALID", {"input_json": "{not json"}),
    ("APP_NOT_FOUND", {"app": "nope"}),
    ("DEFINITION_NOT_FOUND", {"definition": "nope"}),
    ("IDEMPOTENCY_KEY_INVALID", {"idempotency_key": "has space"}),
    ("IDEMPOTENCY_KEY_INVALID", {"idempotency_key": "k" * 129}),
])
def test_start_rejects_bad_input_with_a_precise_code_and_writes_nothing(world, field, kwargs):
    world.publish(TIMER)
    before = world.db.table_counts()
    args = {"definition": "cool-off", "app": "billing", "idempotency_key": "k1", "deadline_ms": 60_000, **kwargs}
    with pytest.raises(errors.ValidationFailed) as info:
        routines.instance_start(world.db.conn, world.token, "acme", **args)
    assert info.value.field_code == field
    assert world.db.table_counts() == before



@pytest.mark.parametrize("deadline_at", ["0000-00-00 00:00:00", "2030-00-10 00:00:00", "2030-01-00 00:00:00"])
def test_Z4_start_with_a_deadline_that_is_no_time_is_DEADLINE_INVALID_from_a_session_that_passes_it(world, deadline_at):
    """A session without NO_ZERO_DATE (MariaDB's default sql_mode) hands a zero date to the routine as it is."""
    world.publish(TIMER)
    before = world.db.table_counts()
    conn = world.db.client()
    try:
        with pytest.raises(errors.ValidationFailed) as info:
            routines.instance_start(conn, world.token, "acme", definition="cool-off", app="billing",
                                    idempotency_key="k1", deadline_at=deadline_at)
    finally:
        conn.close()
    assert info.value.field_code == "DEADLINE_INVALID"
    assert world.db.table_counts() == before

def test_R4_audit_insert_failure_leaves_nothing_of_a_start(world):
    world.publish(TIMER)
    world.db.execute("CREATE TRIGGER test_audit_fails BEFORE INSERT ON weave_audit FOR EACH ROW "
                     "BEGIN IF NEW.action = 'instance.start' THEN "
                     "SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'audit store down'; END IF; END")
    before = world.db.table_counts()
    with pytest.raises(Exception, match="audit store down"):
        world.start("cool-off")
    assert world.db.table_counts() == before


def test_R3_a_subquery_of_a_locking_read_locks_nothing(world):
    """The routines read a queue's name (or a definition step's spec) in a scalar subquery of a locking read: the
    server locks the rows of the outer read only, so a queue row shared by every task of the queue stays free."""
    queue = world.db.scalar("SELECT id FROM weave_queues LIMIT 1")
    holder = world.db.connect()
    other = world.db.connect()
    try:
        with holder.cursor() as cur:
            cur.execute("SET TRANSACTION ISOLATION LEVEL READ COMMITTED")
            cur.execute("START TRANSACTION")
            cur.execute("SELECT i.id, (SELECT q.name FROM weave_queues q WHERE q.id = %s) FROM weave_install i "
                        "WHERE i.id = 1 FOR UPDATE", (queue,))
        with other.cursor() as cur:
            cur.execute("START TRANSACTION")
            cur.execute("SELECT id FROM weave_queues WHERE id = %s FOR UPDATE NOWAIT", (queue,))  # free: no 1205
            assert cur.fetchone()["id"] == queue
            with pytest.raises(pymysql.err.OperationalError, match="1205"):
                cur.execute("SELECT id FROM weave_install WHERE id = 1 FOR UPDATE NOWAIT")  # the outer row is held
    finally:
        other.rollback()
        holder.rollback()
        other.close()
        holder.close()


def test_R3_every_engine_routine_takes_the_instance_lock_after_identity_and_never_the_app():
    """Lock order R-3 is a property of the routine text: identity, then instance. App and queue rows are never
    locked for a decision: a decision waiting for a held instance would hold them all that time, and every task
    creation and start of the app would queue behind it. They are written only where a task is created (its slot
    taken), by one UPDATE of both rows in the order app, queue. A task's end never writes them: it releases its
    slot into release stripes, which no creation locks."""
    from procedures.installer import PROCEDURES_DIR

    # The second is the first's sequence, fused into the candidate's opening; the third opens a worker's report.
    lockers = {"_weave_instance_lock": "core", "_weave_candidate_open": "core", "_pulse_attempt_current": "pulse"}
    for name, room in lockers.items():
        text = (PROCEDURES_DIR / room / f"{name}.sql").read_text()
        body = re.sub(r"--[^\n]*", "", text[text.index("BEGIN"):])
        instance = re.search(r"FROM weave_instances WHERE id = \w+\s+FOR UPDATE", body)
        assert instance, name
        assert body.index("FROM weave_credentials") < instance.start(), name
        assert "weave_apps" not in body[:instance.start()], name
    for path in PROCEDURES_DIR.rglob("*.sql"):
        code = re.sub(r"--[^\n]*", "", path.read_text())
        # A scalar subquery of a locking read is a plain read (test_R3_a_subquery_of_a_locking_read_locks_nothing).
        outer = re.sub(r"\(SELECT [^()]*\)", "", code)
        for table in ("weave_apps", "weave_queues"):
            locking = re.search(rf"FROM {table}\b[^;]*FOR UPDATE", outer)
            assert not locking or path.stem == "_weave_provision_put", f"{path.name} locks {table}"
        if re.search(r"\bslots_taken\s*=", code):
            assert path.stem == "_pulse_slot_take", f"{path.name} takes a task slot"
            assert re.search(r"weave_apps a\b[^;]*?STRAIGHT_JOIN weave_queues q", code), path.name
        if re.search(r"\breleased\s*=", code):
            assert path.stem == "_pulse_inbox_add", f"{path.name} releases a task slot"
            assert not re.search(r"UPDATE[^;]*\b(weave_apps|weave_queues)\b", code), path.name
    # Retention locks a window of settled instances at once, after its admin credential, and never waits for one
    # (SKIP LOCKED): an instance another transaction holds is left for the next run.
    purge = re.sub(r"--[^\n]*", "", (PROCEDURES_DIR / "admin" / "weave_instances_purge.sql").read_text())
    window = re.search(r"(?:FROM|JOIN) weave_instances\b[^;]*FOR UPDATE SKIP LOCKED;", purge)
    assert window and purge.index("CALL _weave_admin_begin(") < window.start()
    for path in PROCEDURES_DIR.rglob("*.sql"):
        if path.stem in lockers or path.stem == "weave_instances_purge":
            continue
        statements = re.sub(r"--[^\n]*", "", path.read_text()).split(";")
        # A locking read of an instance is a re-read of one that _weave_instance_lock has locked already.
        locked = next((n for n, st in enumerate(statements) if "CALL _weave_instance_lock(" in st), len(statements))
        # A scalar subquery of a locking read is a plain read (the instance's last time, read beside the clock).
        locks_instance = [st for st in statements[:locked] if re.match(r"\s*SELECT\b", st)
                          and "FROM weave_instances" in re.sub(r"\(SELECT [^()]*\)", "", st)
                          and re.search(r"\bFOR\s+UPDATE\b", st)]
        assert not locks_instance, f"{path.name} locks an instance directly; use _weave_instance_lock"


def test_R8_M4_7_every_task_creation_takes_its_slot_as_its_decision_s_last_write():
    """A task's slot is taken from its app's and queue's rows, where the creations of one app wait for each other:
    each task creation writes its task, round, state, checkpoint and event first and takes the slot last
    (_pulse_slot_take), so that it holds those rows only for the rest of its transaction. A round start takes it
    itself; a TASK or POLL activation creates its task and leaves the slot to the activation skeleton, which
    writes the activation's event after it and then takes the slot."""
    from procedures.installer import PROCEDURES_DIR

    creators, takers, bodies = [], [], {}
    for path in PROCEDURES_DIR.rglob("*.sql"):
        code = re.sub(r"--[^\n]*", "", path.read_text())
        statements = [st.strip() for st in code[code.index("BEGIN"):].split(";")]
        bodies[path.stem] = statements
        if "CALL _pulse_task_create(" in code:
            creators.append(path.stem)
        if "CALL _pulse_slot_take(" not in code:
            continue
        takers.append(path.stem)
        take = next(n for n, st in enumerate(statements) if "CALL _pulse_slot_take(" in st)
        later = [st.split("(")[0] for st in statements[take + 1:] if re.match(r"(INSERT|UPDATE|DELETE|CALL)\b", st)]
        assert not later, f"{path.stem} writes after taking its slot: {later}"
    assert sorted(creators) == ["_weave_poll_activate", "_weave_poll_round_start", "_weave_task_activate"]
    assert sorted(takers) == ["_weave_poll_round_start", "_weave_step_activate"]
    for routine in takers:  # each creates its task (itself, or through the activation it calls) before the slot
        calls = re.findall(r"\bCALL (\w+)\(", ";".join(bodies[routine]))
        created = [n for n, c in enumerate(calls) if c in creators or c == "_pulse_task_create"]
        assert created and max(created) < calls.index("_pulse_slot_take"), routine


def test_workflow_scopes_fixture_lists_every_workflow_scope():
    assert sorted(WORKFLOW_SCOPES) == sorted(["workflows:read", "workflows:start", "workflows:signal",
                                              "workflows:control", "workflows:review"])


@pytest.mark.parametrize("ms", [2**62, 315_360_000_000_000], ids=["product-overflows", "past-9999"])
def test_R2_a_test_clock_move_past_the_last_time_is_INVALID_ARGUMENT_and_the_clock_stays(world, ms):
    before = world.db.scalar("SELECT clock_offset_us FROM weave_install")
    with pytest.raises(errors.ValidationFailed) as info:
        world.db.advance(ms)
    assert errors.errno_of(info.value.__cause__) == 50100  # the routine's own refusal, not a server error
    assert world.db.scalar("SELECT clock_offset_us FROM weave_install") == before


@pytest.mark.parametrize("status", ["ACTIVE ", "DISABLED  ", "active"])
def test_R8_an_app_status_other_than_exactly_ACTIVE_or_DISABLED_is_INVALID_ARGUMENT(world, status):
    """Stored only as one of its two values: a padded one would pass a check under the padding collation, and be
    answered as it came (outside the API's enum)."""
    before = world.db.table_counts(), world.db.rows("SELECT * FROM weave_apps")
    for name in ("billing", "new-app"):
        with pytest.raises(errors.ValidationFailed) as info:
            routines.app_put(world.db.conn, world.admin, "acme", name, 10, status)
        assert info.value.field_code == "INVALID_ARGUMENT"
    assert (world.db.table_counts(), world.db.rows("SELECT * FROM weave_apps")) == before


def test_M2_a_name_key_or_id_with_a_final_newline_is_refused_not_stored_or_read_as_another(world):
    """The patterns that check names, keys and ids ended in $, which also matches before a final newline: keys and
    names were stored with a newline the docs refuse (1-128 printable ASCII), and wf_1 followed by a newline read
    wf_1."""
    world.publish(TIMER)
    wf = world.start("cool-off", {"order_id": "o1"})
    with pytest.raises(errors.ValidationFailed) as key:
        world.start("cool-off", {"order_id": "o2"}, key="k" * 127 + "\n")
    assert key.value.field_code == "IDEMPOTENCY_KEY_INVALID"
    with pytest.raises(errors.ValidationFailed) as queue:
        routines.queue_put(world.db.conn, world.admin, world.namespace, "late\n", 10)
    assert queue.value.field_code == "NAME_INVALID"
    with pytest.raises(errors.NotFound):
        routines.instance_get(world.db.conn, world.token, world.namespace, wf + "\n")
    with pytest.raises(errors.ValidationFailed) as pause:
        routines.instance_pause(world.db.conn, world.token, world.namespace, wf, "hold", "p" * 127 + "\n")
    assert pause.value.field_code == "IDEMPOTENCY_KEY_INVALID"
    assert world.db.scalar("SELECT COUNT(*) FROM weave_instances") == 1
    assert world.db.scalar("SELECT COUNT(*) FROM weave_queues WHERE name LIKE %s", "late%") == 0


def test_input_and_output_nested_deeper_than_the_server_keeps_are_refused_saying_so(world, orch):
    """An input of a few bytes nested 32 levels deep, which the server's JSON functions do not take, was refused
    with "input must be JSON of at most 1 MiB": the user looked for a size problem that was not there. The message
    names the depth, for an instance's input and for an operator's output alike."""
    deep = "[" * 32 + "]" * 32
    world.publish(TASKY)
    with pytest.raises(errors.ValidationFailed) as start:
        routines.instance_start(world.db.conn, world.token, world.namespace, definition="charge", app=world.app,
                                input_json=f'{{"a": {deep[1:-1]}}}', idempotency_key="deep", deadline_ms=86_400_000)
    assert start.value.field_code == "INPUT_INVALID" and "nested at most 31 levels" in start.value.detail
    assert start.value.field == "input"  # the field the refusal is about, as the answer names it
    failed = world.start("charge", {"order_id": "o-1"})
    claim = pulse.task_claim(world.db.conn, "w1", [world.queue], limit=1)[0]
    pulse.attempt_fail(world.db.conn, claim["attempt_id"], "w1", "declined", retryable=False)
    orch.drain()
    with pytest.raises(errors.ValidationFailed) as output:
        routines.step_resolve(world.db.conn, world.token, world.namespace, failed, "charge", "paid by hand", "r-1",
                              output=None, output_json=deep)
    assert output.value.field_code == "INPUT_INVALID" and "nested at most 31 levels" in output.value.detail
    assert output.value.field == "output"


def _tmp_tables(world: World) -> int:
    return int(world.db.row("SHOW SESSION STATUS LIKE 'Created_tmp_tables'")["Value"])


def test_M2_a_start_reads_its_input_before_it_locks_its_app_and_sizes_before_texts(world, orch):
    """Reading a large document for a key twice takes a while (up to a second at 1 MiB, seconds past it), and every
    task creation of the app waits for a start's lock on the app row: a start reads its input before it takes that
    lock, and an input or an operator's output past its size is refused before its text is read at all (the walk
    of a large document's objects makes temporary tables; a flat one's check makes none)."""
    world.publish(TASKY)
    nested, flat = ('{"pad": "' + "p" * 1_048_576 + tail for tail in ('", "a": {"b": 1}}', '", "a": 1}'))
    conn = world.db.conn

    def start(text: str) -> int:
        made = _tmp_tables(world)
        with pytest.raises(errors.ValidationFailed) as refused:
            routines.instance_start(conn, world.token, world.namespace, definition="charge", app=world.app,
                                    input_json=text, idempotency_key="k", deadline_ms=86_400_000)
        assert refused.value.field_code == "INPUT_INVALID"
        return _tmp_tables(world) - made

    world.db.execute("SET SESSION innodb_lock_wait_timeout = 1")
    other = world.db.connect()
    try:
        with other.cursor() as cur:
            cur.execute("START TRANSACTION")
            cur.execute("SELECT id FROM weave_apps WHERE name = %s FOR UPDATE", (world.app,))
            start('{"a": 1, "a": 2}')  # refused at once, not after waiting for the app
            assert start(nested) == start(flat)
            cur.execute("ROLLBACK")
    finally:
        other.close()
        world.db.execute("SET SESSION innodb_lock_wait_timeout = DEFAULT")
    failed = world.start("charge", {"order_id": "o-1"})
    claim = pulse.task_claim(conn, "w1", [world.queue], limit=1)[0]
    pulse.attempt_fail(conn, claim["attempt_id"], "w1", "declined", retryable=False)
    orch.drain()
    made = []
    for text in (nested, flat):
        before = _tmp_tables(world)
        with pytest.raises(errors.ValidationFailed) as output:
            routines.step_resolve(conn, world.token, world.namespace, failed, "charge", "paid by hand", "r-1",
                                  output=None, output_json=text)
        assert output.value.field_code == "INPUT_INVALID"
        made.append(_tmp_tables(world) - before)
    assert made[0] == made[1]


@pytest.mark.parametrize("text", ['{"a": 1.}', '{"a": [-]}', '{"a": "\\x"}', '{"a": 1, "a": 2}',
                                  '{"a": {"b": [{"c": 1, "\\u0063": 2}]}}', '{"a": [1e400]}'])
def test_M2_json_that_only_the_server_takes_is_refused_as_input_result_and_output(world, orch, text):
    """MariaDB's JSON_VALID takes 1. or a lone - or the escape \\x, which no JSON reader takes back: over SQL an
    instance's input, a task's result and an operator's output were stored so, and every later read of them failed
    (the API's GET, the worker's handler input). Each is refused as a signal's payload is. So is an object with a key
    twice, which the engine and a handler would read as two different values (the first, the last), and a number
    beyond a double's range, which Python reads as infinity and the HTTP API and every worker refuse."""
    world.publish(TASKY)
    with pytest.raises(errors.ValidationFailed) as start:
        routines.instance_start(world.db.conn, world.token, world.namespace, definition="charge", app=world.app,
                                input_json=text, idempotency_key="bad-input", deadline_ms=86_400_000)
    assert start.value.field_code == "INPUT_INVALID"
    done, failed = world.start("charge", {"order_id": "o-1"}), world.start("charge", {"order_id": "o-2"})
    claims = {c["workflow_id"]: c for c in pulse.task_claim(world.db.conn, "w1", [world.queue], limit=2)}
    with pytest.raises(errors.ValidationFailed) as result:
        pulse.attempt_complete(world.db.conn, claims[done]["attempt_id"], "w1", result_json=text)
    assert result.value.field_code == "RESULT_INVALID"
    pulse.attempt_fail(world.db.conn, claims[failed]["attempt_id"], "w1", "declined", retryable=False)
    orch.drain()
    assert world.instance(failed)["status"] == "NEEDS_REVIEW"
    with pytest.raises(errors.ValidationFailed) as output:
        routines.step_resolve(world.db.conn, world.token, world.namespace, failed, "charge", "paid by hand", "r-1",
                              output=None, output_json=text)
    assert output.value.field_code == "INPUT_INVALID"
    assert world.db.scalar("SELECT COUNT(*) FROM weave_instances") == 2


def test_R1_publish_lists_a_definitions_queues_whole_under_a_callers_small_list_cap(world):
    """A definition's queues may take 2048 characters as a list, which GROUP_CONCAT cuts at the session's cap: under
    MySQL's 1024, which a caller may keep, publishing failed with the server's 1260. Publish raises the cap for its
    own statement and gives the session its own back."""
    queues = [f"q{i:02d}-" + "x" * 56 for i in range(30)]
    for queue in queues:
        routines.queue_put(world.db.conn, world.admin, "acme", queue, 10)
    doc = {"name": "many-queues", "steps": [
        {"key": f"s{i}", "type": "TASK", "queue": queue, "handler": "h", "handler_version": "1"}
        for i, queue in enumerate(queues)]}
    world.db.execute("SET SESSION group_concat_max_len = 1024")
    try:
        assert routines.definition_publish(world.db.conn, world.admin, "acme", definitions.validate(doc))["created"]
        assert world.db.scalar("SELECT queues FROM weave_definitions WHERE name = 'many-queues'") == ",".join(queues)
        assert world.db.scalar("SELECT @@group_concat_max_len") == 1024
    finally:
        world.db.execute("SET SESSION group_concat_max_len = DEFAULT")


@pytest.mark.parametrize("deferred", [2, -1])
def test_R18_a_list_refuses_a_deferred_filter_other_than_one_zero_or_null(world, deferred):
    """Any other value matched nothing, and the empty page looked like an answer."""
    world.publish(TIMER)
    world.start("cool-off")
    with pytest.raises(errors.ValidationFailed) as refused:
        world.db.call("weave_instance_list", world.token, "acme", None, None, None, None, None, deferred, None, None)
    assert refused.value.field_code == "INVALID_ARGUMENT" and "deferred" in str(refused.value)
    for fine in (None, 0, 1):
        world.db.call("weave_instance_list", world.token, "acme", None, None, None, None, None, fine, None, None)
