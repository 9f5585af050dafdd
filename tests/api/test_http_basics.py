"""The HTTP contract of 07-api through Falcon's test client against the real database."""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import json

import pytest

from api.openapi import document
from procedures import db as dbmod
from procedures import routines
from tests.api.conftest import auth
from tests.support import json_only
from tests.support.signals import resolved_over_sql
from tests.support.waiting import wait_for

TIMER = {"name": "cool-off", "steps": [{"key": "wait", "type": "TIMER", "delay_ms": 60_000}]}
NS = "/v1/namespaces/acme"


def problem(result, status, code):
    assert result.status_code == status, result.text
    assert result.headers["content-type"].startswith("application/problem+json")
    body = result.json
    assert body["code"] == code and body["status"] == status
    assert {"type", "title", "detail", "errors"} <= set(body)
    return body


def publish(client, world, doc=TIMER):
    return client.simulate_post(f"{NS}/definitions", headers=auth(world.admin), json=doc)


def start(client, world, key="k1", definition="cool-off", **body):
    payload = {"definition": definition, "app": "billing", "input": {"order_id": "o1"}, "deadline_ms": 3_600_000,
               **body}
    return client.simulate_post(f"{NS}/workflows", headers=auth(world.token, key), json=payload)


def test_publish_then_same_content_answers_200_with_the_same_version(client, world):
    first = publish(client, world)
    assert first.status_code == 201 and first.json["version"] == 1
    assert first.headers["location"] == f"{NS}/definitions/cool-off/versions/1"  # a 201 names what it created
    again = publish(client, world)
    assert again.status_code == 200 and again.json == first.json and "location" not in again.headers
    got = client.simulate_get(f"{NS}/definitions/cool-off/versions/1", headers=auth(world.token))
    assert got.status_code == 200 and got.json["digest"] == first.json["digest"]


def test_a_publish_with_an_idempotency_key_replays_its_first_answer_after_later_publishes(client, world):
    """A publish retried after its answer was lost, once another was published meanwhile, published its document
    again as the latest version: the header every POST that creates something takes was ignored here."""
    newer = {**TIMER, "steps": [{**TIMER["steps"][0], "delay_ms": 1_000}]}

    def keyed(doc, key):
        return client.simulate_post(f"{NS}/definitions", headers={**auth(world.admin), "Idempotency-Key": key},
                                    json=doc)

    first = keyed(TIMER, "release-7")
    assert first.status_code == 201 and first.json["version"] == 1 and "idempotent-replayed" not in first.headers
    assert publish(client, world, newer).json["version"] == 2
    replay = keyed(TIMER, "release-7")
    assert replay.status_code == 200 and replay.headers.get("idempotent-replayed") == "true"
    assert replay.text == first.text and "location" not in replay.headers
    latest = client.simulate_get(f"{NS}/definitions/cool-off", headers=auth(world.token))
    assert latest.json["version"] == 2
    problem(keyed(newer, "release-7"), 409, "IDEMPOTENCY_CONFLICT")
    body = problem(keyed(TIMER, "release 8"), 422, "VALIDATION_FAILED")
    assert [e["code"] for e in body["errors"]] == ["IDEMPOTENCY_KEY_INVALID"]
    assert publish(client, world).json["version"] == 3  # without a key: the content decides, as before


def test_a_query_parameter_a_request_does_not_take_is_refused_on_every_api_path(client, world):
    """`GET /workflows/{id}?fields=status` answered the whole instance, as if the query had been taken, and any
    request ignored a query it does not take; the lists that take a query refuse a name they do not know
    (UNKNOWN_FIELD) too."""
    publish(client, world)
    wf = start(client, world).json["workflow_id"]
    for method, url, token in (("GET", f"{NS}/definitions?status=ACTIVE", world.token),
                               ("GET", f"{NS}/definitions/cool-off?version=1", world.token),
                               ("GET", f"{NS}/workflows/{wf}?fields=status", world.token),
                               ("GET", f"{NS}/credentials?status=ACTIVE", world.admin),
                               ("POST", f"{NS}/workflows/{wf}/pause?force=true", world.token)):
        path, _, query = url.partition("?")
        answer = client.simulate_request(method, path, query_string=query,
                                         headers={**auth(token), "Idempotency-Key": "q-1"}, json={"reason": "x"})
        body = problem(answer, 422, "VALIDATION_FAILED")
        assert [e["code"] for e in body["errors"]] == ["UNKNOWN_FIELD"], (url, body)
    assert world.instance(wf)["control"] == "ACTIVE"  # the refused pause did nothing
    listed = client.simulate_get(f"{NS}/workflows", query_string="status=RUNNING", headers=auth(world.token))
    assert listed.status_code == 200 and [i["workflow_id"] for i in listed.json["items"]] == [wf]


def test_M2_admin_posts_with_an_idempotency_key_replay_their_first_answer(client, world):
    """An app's or a queue's put and a credential's creation take the key every POST that creates or changes
    something takes: a retry answers the first answer with Idempotent-Replayed and changes nothing; a credential's
    replay names the credential without its token, which was shown once."""
    def keyed(path, key, body):
        return client.simulate_post(f"{NS}/{path}", headers={**auth(world.admin), "Idempotency-Key": key}, json=body)

    first = keyed("apps", "quota-1", {"name": "reports", "max_in_flight": 5})
    assert first.status_code == 201 and "idempotent-replayed" not in first.headers
    assert client.simulate_post(f"{NS}/apps", headers=auth(world.admin),
                                json={"name": "reports", "max_in_flight": 9}).status_code == 200
    again = keyed("apps", "quota-1", {"name": "reports", "max_in_flight": 5})
    assert again.status_code == 200 and again.headers.get("idempotent-replayed") == "true"
    assert again.json == first.json
    apps = client.simulate_get(f"{NS}/apps", headers=auth(world.admin)).json["items"]
    assert [a["max_in_flight"] for a in apps if a["name"] == "reports"] == [9]
    problem(keyed("apps", "quota-1", {"name": "reports", "max_in_flight": 6}), 409, "IDEMPOTENCY_CONFLICT")
    queue = keyed("queues", "quota-1", {"name": "exports", "capacity": 2})
    assert queue.status_code == 201 and keyed("queues", "quota-1", {"name": "exports", "capacity": 2}).json == \
        queue.json
    made = keyed("credentials", "bot-1", {"actor": "ci-bot", "scopes": ["workflows:read"]})
    assert made.status_code == 201 and made.json["token"].startswith("wv_")
    replay = keyed("credentials", "bot-1", {"actor": "ci-bot", "scopes": ["workflows:read"]})
    assert replay.status_code == 200 and replay.headers.get("idempotent-replayed") == "true"
    assert replay.json == {**made.json, "token": None}
    body = problem(keyed("credentials", "bot 2", {"actor": "ci-bot", "scopes": ["workflows:read"]}), 422,
                   "VALIDATION_FAILED")
    assert [e["code"] for e in body["errors"]] == ["IDEMPOTENCY_KEY_INVALID"]


@pytest.mark.parametrize("version", ["\u00b2", "\u0661", "0", "01x", "9999999999"])
def test_a_version_that_is_not_a_positive_ascii_number_is_not_found(client, world, version):
    publish(client, world)
    got = client.simulate_get(f"{NS}/definitions/cool-off/versions/{version}", headers=auth(world.token))
    problem(got, 404, "NOT_FOUND")


def test_invalid_definition_is_422_with_every_error_listed(client, world):
    bad = {"name": "x", "steps": [{"key": "a", "type": "NAP"}, {"key": "a", "type": "TIMER", "delay_ms": 0}]}
    body = problem(publish(client, world, bad), 422, "VALIDATION_FAILED")
    assert {e["code"] for e in body["errors"]} >= {"UNKNOWN_TYPE", "DUPLICATE_STEP_KEY"}


def test_a_start_s_version_that_is_no_version_is_an_invalid_argument_one_not_published_is_not_found(client, world):
    """A version of 0, -1, "1", null or true was answered DEFINITION_NOT_FOUND, as if such a version could exist and
    had not been published: the request is malformed, and says so. One that could exist and does not is still
    DEFINITION_NOT_FOUND."""
    publish(client, world)
    for n, version in enumerate((0, -1, "1", None, True, 2**31)):
        body = problem(start(client, world, key=f"v-{n}", version=version), 422, "VALIDATION_FAILED")
        assert [(e["field"], e["code"]) for e in body["errors"]] == [("version", "INVALID_ARGUMENT")], version
    body = problem(start(client, world, key="v-9", version=9), 422, "VALIDATION_FAILED")
    assert [e["code"] for e in body["errors"]] == ["DEFINITION_NOT_FOUND"]
    assert start(client, world, key="v-1", version=1).status_code == 201


def test_start_201_then_replay_200_with_header(client, world):
    publish(client, world)
    first = start(client, world)
    assert first.status_code == 201
    assert first.json["status"] == "RUNNING" and first.json["steps"][0]["key"] == "wait"
    located = client.simulate_get(first.headers["location"], headers=auth(world.token))  # a 201 names what it made
    assert located.status_code == 200 and located.json == first.json
    replay = start(client, world)
    assert replay.status_code == 200 and replay.headers.get("idempotent-replayed") == "true"
    assert replay.json["workflow_id"] == first.json["workflow_id"]
    problem(start(client, world, input={"order_id": "other"}), 409, "IDEMPOTENCY_CONFLICT")


def test_a_start_answers_the_instance_as_get_shows_it_with_the_start_scope_alone(client, world):
    publish(client, world)
    starter = world.credential(["workflows:start"], actor="starter")["token"]
    first = client.simulate_post(f"{NS}/workflows", headers=auth(starter, "k-only"), json={
        "definition": "cool-off", "app": "billing", "input": {"order_id": "o1"}, "deadline_ms": 3_600_000})
    assert first.status_code == 201, first.text
    wf = first.json["workflow_id"]
    got = client.simulate_get(f"{NS}/workflows/{wf}", headers=auth(world.token))
    assert first.json == got.json
    # As committed: the start activated the timer itself (a definition without tasks), so its checkpoint is there.
    assert [(s["key"], s["status"]) for s in first.json["steps"]] == [("wait", "ACTIVE")]
    assert [c["kind"] for c in first.json["checkpoints"]] == ["TIMER"]
    replay = client.simulate_post(f"{NS}/workflows", headers=auth(starter, "k-only"), json={
        "definition": "cool-off", "app": "billing", "input": {"order_id": "o1"}, "deadline_ms": 3_600_000})
    assert replay.status_code == 200 and replay.json == got.json


def test_a_start_replayed_by_another_client_is_a_replay_whatever_its_input_s_spelling(client, world):
    """A retry through another serialiser, or the same start from the CLI (which passes the input as typed), is the
    same request: the input is compared as a JSON value. Another value is 409."""
    publish(client, world)
    body = '{"definition": "cool-off", "app": "billing", "deadline_ms": 3600000, "input": %s}'
    first = client.simulate_post(f"{NS}/workflows", headers={**auth(world.token, "k-1"), "Content-Type":
                                 "application/json"}, body=body % '{"order_id": "o-1", "amount": 12}')
    assert first.status_code == 201
    again = client.simulate_post(f"{NS}/workflows", headers={**auth(world.token, "k-1"), "Content-Type":
                                 "application/json"}, body=body % '{"amount":12,"order_id":"o\\u002d1"}')
    assert again.status_code == 200 and again.headers["idempotent-replayed"] == "true"
    assert again.json["workflow_id"] == first.json["workflow_id"]
    cli = routines.instance_start(world.db.conn, world.token, "acme", definition="cool-off", app="billing",
                                  input_json='{ "order_id" : "o-1" , "amount" : 12 }', idempotency_key="k-1",
                                  deadline_ms=3_600_000)
    assert (cli["workflow_id"], cli["created"]) == (first.json["workflow_id"], False)
    other = client.simulate_post(f"{NS}/workflows", headers={**auth(world.token, "k-1"), "Content-Type":
                                 "application/json"}, body=body % '{"order_id": "o-1", "amount": 13}')
    problem(other, 409, "IDEMPOTENCY_CONFLICT")


def test_a_start_keeps_its_input_as_sent_every_digit_of_every_number(client, world):
    """The input is stored as the request carried it: a number past a double's precision keeps its digits, and the
    instance answers it so."""
    publish(client, world)
    text = '{"amount": 12345678901234567.5, "rate": 1.10, "count": 1E2, "id": 123456789012345678901234567890}'
    body = '{"definition": "cool-off", "app": "billing", "deadline_ms": 3600000, "input": ' + text + "}"
    started = client.simulate_post(f"{NS}/workflows", body=body,
                                   headers={**auth(world.token, "k-1"), "Content-Type": "application/json"})
    assert started.status_code == 201
    assert world.db.scalar("SELECT input FROM weave_instances") == text
    shown = client.simulate_get(f"{NS}/workflows/{started.json['workflow_id']}", headers=auth(world.token))
    assert '"input": ' + text in shown.text
    huge = client.simulate_post(f"{NS}/workflows", body=body.replace("123456789012345678901234567890", "9" * 5000),
                                headers={**auth(world.token, "k-2"), "Content-Type": "application/json"})
    (error,) = problem(huge, 422, "VALIDATION_FAILED")["errors"]
    assert error["code"] == "INVALID_JSON" and error["message"] == (
        "a number has more than 4,300 digits, more than is taken here")


def test_a_business_key_sent_back_as_read_null_is_absent(client, world):
    """GET shows an absent business key as null: a client that sends back what it read is answered as if it had
    left the field out, not refused for its type."""
    publish(client, world)
    started = start(client, world, business_key=None)
    assert started.status_code == 201 and started.json["business_key"] is None
    again = start(client, world, business_key=None)
    assert again.status_code == 200
    assert start(client, world, "k2", business_key="").status_code == 422  # an empty key is still no key


def test_a_value_of_the_right_type_but_wrong_is_told_what_is_wrong_with_it(client, world):
    """A field that takes one of several forms (a credential's queues: a list of names, or "*") says what is wrong
    with the form the value has, not only that it matches none."""
    body = problem(client.simulate_post(f"{NS}/credentials", headers=auth(world.admin),
                                        json={"actor": "bot", "scopes": ["workflows:read"], "queues": []}),
                   422, "VALIDATION_FAILED")
    assert [(e["field"], e["code"], e["message"]) for e in body["errors"]] == [
        ("queues", "NAME_INVALID", "queues needs at least 1")]
    other = problem(client.simulate_post(f"{NS}/credentials", headers=auth(world.admin),
                                         json={"actor": "bot", "scopes": ["workflows:read"], "queues": 5}),
                    422, "VALIDATION_FAILED")
    assert [(e["field"], e["code"]) for e in other["errors"]] == [("queues", "NAME_INVALID")]


def test_start_needs_an_idempotency_key(client, world):
    publish(client, world)
    result = client.simulate_post(f"{NS}/workflows", headers=auth(world.token),
                                  json={"definition": "cool-off", "app": "billing", "deadline_ms": 1000})
    body = problem(result, 422, "VALIDATION_FAILED")
    assert body["errors"][0]["code"] == "IDEMPOTENCY_KEY_INVALID"


def test_show_list_and_events(client, world, orch):
    publish(client, world)
    wf = start(client, world).json["workflow_id"]
    orch.drain()
    shown = client.simulate_get(f"{NS}/workflows/{wf}", headers=auth(world.token))
    assert shown.status_code == 200 and shown.json["steps"][0]["wait"]["status"] == "WAITING"
    listed = client.simulate_get(f"{NS}/workflows", params={"status": "RUNNING"}, headers=auth(world.token))
    assert [i["workflow_id"] for i in listed.json["items"]] == [wf] and listed.json["next_cursor"] is None
    events = client.simulate_get(f"{NS}/workflows/{wf}/events", headers=auth(world.token))
    assert [e["seq"] for e in events.json["events"]] == [1, 2] and events.json["next_after"] == 2


def test_list_pages_with_a_cursor(client, world):
    publish(client, world)
    ids = [start(client, world, key=f"k{i}").json["workflow_id"] for i in range(5)]
    seen, cursor = [], None
    while True:
        params = {"limit": "2", **({"cursor": cursor} if cursor else {})}
        page = client.simulate_get(f"{NS}/workflows", params=params, headers=auth(world.token)).json
        seen += [i["workflow_id"] for i in page["items"]]
        cursor = page["next_cursor"]
        if not cursor:
            break
    assert seen == list(reversed(ids))


def test_auth_errors(client, world):
    publish(client, world)
    wf = start(client, world).json["workflow_id"]
    problem(client.simulate_get(f"{NS}/workflows/{wf}"), 401, "UNAUTHENTICATED")
    problem(client.simulate_get(f"{NS}/workflows/{wf}", headers=auth("wv_nope")), 401, "UNAUTHENTICATED")
    problem(client.simulate_get(f"{NS}/workflows/{wf}", headers=auth(world.admin)), 403, "FORBIDDEN")
    problem(client.simulate_get(f"/v1/namespaces/other/workflows/{wf}", headers=auth(world.token)), 404,
            "NOT_FOUND")
    problem(client.simulate_get(f"{NS}/workflows/wf_999999", headers=auth(world.token)), 404, "NOT_FOUND")
    problem(client.simulate_get(f"{NS}/workflows/not-an-id", headers=auth(world.token)), 404, "NOT_FOUND")


def test_415_and_413_before_parsing(client, world):
    result = client.simulate_post(f"{NS}/workflows", headers={**auth(world.token, "k"), "Content-Type": "text/plain"},
                                  body="{}")
    problem(result, 415, "UNSUPPORTED_MEDIA_TYPE")
    huge = json.dumps({"definition": "cool-off", "input": "x" * (301 * 1024)})
    result = client.simulate_post(f"{NS}/workflows", headers={**auth(world.token, "k"),
                                                              "Content-Type": "application/json"}, body=huge)
    problem(result, 413, "PAYLOAD_TOO_LARGE")


def test_415_for_json_declared_in_another_charset_and_utf8_spelled_any_way_is_taken(client, world):
    """JSON is UTF-8 (RFC 8259): a body declared latin-1 would be read as other characters than were meant, so it
    is refused before parsing; utf-8 in any case and quoted, as RFC 9110 allows, is JSON."""
    publish(client, world)
    body = json.dumps({"definition": "cool-off", "app": "billing", "deadline_ms": 60_000})
    for charset in ("latin-1", "ISO-8859-1", "utf-16"):
        result = client.simulate_post(f"{NS}/workflows", headers={
            **auth(world.token, f"k-{charset}"), "Content-Type": f"application/json; charset={charset}"}, body=body)
        problem(result, 415, "UNSUPPORTED_MEDIA_TYPE")
    assert world.db.scalar("SELECT COUNT(*) FROM weave_instances") == 0
    for n, charset in enumerate(("utf-8", "UTF-8", '"utf-8"', "utf8")):
        result = client.simulate_post(f"{NS}/workflows", headers={
            **auth(world.token, f"k-{n}"), "Content-Type": f"application/json;charset={charset}"}, body=body)
        assert result.status_code == 201, (charset, result.text)


def test_S1_a_refusal_of_the_engine_names_the_field_it_is_about(client, world):
    """INPUT_INVALID may be about the input or the business key: the engine's message says which, and the
    problem's error names it, as it names the fields the API checks itself; so do the refusals of a malformed
    Idempotency-Key (S-1), a past deadline_at and a past expires_at."""
    publish(client, world)
    body = '{"definition": "cool-off", "app": "billing", "deadline_ms": 60000, "input": {"a": ' + "[" * 31 + \
        "]" * 31 + "}}"
    result = client.simulate_post(f"{NS}/workflows", headers={**auth(world.token, "deep"),
                                                              "Content-Type": "application/json"}, body=body)
    (error,) = problem(result, 422, "VALIDATION_FAILED")["errors"]
    assert (error["field"], error["code"]) == ("input", "INPUT_INVALID"), error
    result = client.simulate_post(f"{NS}/workflows", headers=auth(world.token, "none"),
                                  json={"definition": "no-such-flow", "app": "billing", "deadline_ms": 60000})
    (error,) = problem(result, 422, "VALIDATION_FAILED")["errors"]
    assert (error["field"], error["code"]) == ("definition", "DEFINITION_NOT_FOUND"), error
    # S-1's key, a start's past deadline_at and a credential's past expires_at: each refusal names its field.
    for key in ("has space", "k" * 129, "k" * 2_000):  # a long one was the database's refusal, naming its parameter
        body = problem(start(client, world, key=key), 422, "VALIDATION_FAILED")
        assert [(e["field"], e["code"]) for e in body["errors"]] == [("Idempotency-Key", "IDEMPOTENCY_KEY_INVALID")]
        assert "in_" not in json.dumps(body)
    past = {"definition": "cool-off", "app": "billing", "deadline_at": "2000-01-01T00:00:00Z"}
    body = problem(client.simulate_post(f"{NS}/workflows", headers=auth(world.token, "k-past"), json=past), 422,
                   "VALIDATION_FAILED")
    assert [(e["field"], e["code"]) for e in body["errors"]] == [("deadline_at", "DEADLINE_INVALID")]
    body = problem(client.simulate_post(f"{NS}/credentials", headers=auth(world.admin), json={
        "actor": "late", "scopes": ["workflows:read"], "expires_at": "2000-01-01T00:00:00Z"}), 422, "VALIDATION_FAILED")
    assert [(e["field"], e["code"]) for e in body["errors"]] == [("expires_at", "DEADLINE_INVALID")]


def test_duplicate_keys_in_a_body_are_rejected(client, world):
    publish(client, world)
    body = '{"definition": "cool-off", "app": "billing", "app": "other", "deadline_ms": 1000}'
    result = client.simulate_post(f"{NS}/workflows", headers={**auth(world.token, "k"),
                                                              "Content-Type": "application/json"}, body=body)
    assert problem(result, 422, "VALIDATION_FAILED")["errors"][0]["code"] == "DUPLICATE_JSON_KEY"


def test_admin_objects(client, world):
    app = client.simulate_post(f"{NS}/apps", headers=auth(world.admin), json={"name": "risk", "max_in_flight": 5})
    assert app.status_code == 201 and app.json == {"name": "risk", "max_in_flight": 5, "status": "ACTIVE"}
    again = client.simulate_post(f"{NS}/apps", headers=auth(world.admin), json={"name": "risk", "max_in_flight": 6})
    assert again.status_code == 200 and again.json["max_in_flight"] == 6
    queue = client.simulate_post(f"{NS}/queues", headers=auth(world.admin), json={"name": "q2", "capacity": 9})
    assert queue.status_code == 201 and queue.json == {"name": "q2", "capacity": 9}
    cred = client.simulate_post(f"{NS}/credentials", headers=auth(world.admin),
                                json={"actor": "bot", "scopes": ["workflows:read"], "queues": ["q2"]})
    assert cred.status_code == 201 and cred.json["token"].startswith("wv_") and cred.json["queues"] == ["q2"]
    problem(client.simulate_post(f"{NS}/apps", headers=auth(world.token), json={"name": "x", "max_in_flight": 1}),
            403, "FORBIDDEN")


def test_S2_admin_objects_are_listed_and_a_credential_is_disabled_and_enabled_over_http(client, world):
    """What an admin creates over HTTP is listed there too (a token never), and a leaked token is revoked there,
    with no database access: it stops authenticating at once, and a second disable answers the same."""
    client.simulate_post(f"{NS}/queues", headers=auth(world.admin), json={"name": "q2", "capacity": 9})
    bot = client.simulate_post(f"{NS}/credentials", headers=auth(world.admin),
                               json={"actor": "bot", "scopes": ["workflows:read"], "queues": ["q2"]}).json
    apps = client.simulate_get(f"{NS}/apps", headers=auth(world.admin)).json["items"]
    assert [(a["name"], a["max_in_flight"], a["status"], a["in_flight"]) for a in apps] == [
        ("billing", 1000, "ACTIVE", 0)]
    queues = client.simulate_get(f"{NS}/queues", headers=auth(world.admin)).json["items"]
    assert [(q["name"], q["capacity"], q["queued"], q["running"]) for q in queues] == [
        ("payments", 1000, 0, 0), ("q2", 9, 0, 0)]
    listed = client.simulate_get(f"{NS}/credentials", headers=auth(world.admin))
    assert "wv_" not in listed.text and "token" not in listed.text
    row = next(c for c in listed.json["items"] if c["credential_id"] == bot["credential_id"])
    assert (row["actor"], row["scopes"], row["queues"], row["status"]) == ("bot", ["workflows:read"], ["q2"], "ACTIVE")
    for path in ("apps", "queues", "credentials"):
        problem(client.simulate_get(f"{NS}/{path}", headers=auth(world.token)), 403, "FORBIDDEN")

    listed = client.simulate_get(f"{NS}/definitions", headers=auth(bot["token"]))
    assert listed.json == {"items": [], "next_cursor": None}
    disabled = client.simulate_post(f"{NS}/credentials/{bot['credential_id']}/disable", headers=auth(world.admin))
    assert disabled.status_code == 200 and disabled.json == {"credential_id": bot["credential_id"], "actor": "bot",
                                                             "status": "DISABLED"}
    problem(client.simulate_get(f"{NS}/definitions", headers=auth(bot["token"])), 401, "UNAUTHENTICATED")
    again = client.simulate_post(f"{NS}/credentials/{bot['credential_id']}/disable", headers=auth(world.admin))
    assert again.status_code == 200 and again.json == disabled.json
    problem(client.simulate_post(f"{NS}/credentials/cred_999999/disable", headers=auth(world.admin)),
            404, "NOT_FOUND")
    problem(client.simulate_post(f"{NS}/credentials/{bot['credential_id']}/disable", headers=auth(world.token)),
            403, "FORBIDDEN")
    assert world.db.scalar("SELECT COUNT(*) FROM weave_audit WHERE action = 'credential.disable'") == 2
    enabled = client.simulate_post(f"{NS}/credentials/{bot['credential_id']}/enable", headers=auth(world.admin))
    assert enabled.status_code == 200 and enabled.json == {**disabled.json, "status": "ACTIVE"}
    listed = client.simulate_get(f"{NS}/definitions", headers=auth(bot["token"]))
    assert listed.json == {"items": [], "next_cursor": None}
    problem(client.simulate_post(f"{NS}/credentials/{bot['credential_id']}/enable", headers=auth(world.token)),
            403, "FORBIDDEN")


def test_S2_a_credential_made_over_http_may_expire_and_is_listed_expired_after(client, world):
    at = (world.db.now() + dt.timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    bot = client.simulate_post(f"{NS}/credentials", headers=auth(world.admin),
                               json={"actor": "bot", "scopes": ["workflows:read"], "expires_at": at})
    assert bot.status_code == 201 and bot.json["expires_at"] == at
    assert client.simulate_get(f"{NS}/definitions", headers=auth(bot.json["token"])).status_code == 200
    world.db.advance(300_000)
    body = problem(client.simulate_get(f"{NS}/definitions", headers=auth(bot.json["token"])), 401, "UNAUTHENTICATED")
    assert "expired" in body["detail"]
    row = next(c for c in client.simulate_get(f"{NS}/credentials", headers=auth(world.admin)).json["items"]
               if c["actor"] == "bot")
    assert (row["status"], row["expires_at"]) == ("EXPIRED", at)
    past = client.simulate_post(f"{NS}/credentials", headers=auth(world.admin),
                                json={"actor": "late", "scopes": ["workflows:read"], "expires_at": at})
    assert problem(past, 422, "VALIDATION_FAILED")["errors"][0]["code"] == "DEADLINE_INVALID"


def test_R4_the_audit_trail_is_read_over_http_a_page_at_a_time(client, world):
    bot = client.simulate_post(f"{NS}/credentials", headers=auth(world.admin),
                               json={"actor": "bot", "scopes": ["workflows:read"]}).json
    client.simulate_post(f"{NS}/credentials/{bot['credential_id']}/disable", headers=auth(world.admin))
    first = client.simulate_get(f"{NS}/audit", headers=auth(world.admin), params={"limit": "1"})
    assert first.status_code == 200 and [r["action"] for r in first.json["items"]] == ["credential.disable"]
    record = first.json["items"][0]
    assert (record["workflow_id"], record["actor"], record["details"]) == (
        None, "bootstrap", {"credential_id": bot["credential_id"], "console_sessions_ended": 0})
    rest = client.simulate_get(f"{NS}/audit", headers=auth(world.admin),
                               params={"cursor": first.json["next_cursor"], "action": "credential.create"})
    assert [r["details"]["actor"] for r in rest.json["items"]] == ["bot", "ops"]
    problem(client.simulate_get(f"{NS}/audit", headers=auth(world.token)), 403, "FORBIDDEN")
    problem(client.simulate_get(f"{NS}/audit", headers=auth(world.admin), params={"cursor": "x"}), 422,
            "VALIDATION_FAILED")
    publish(client, world)
    wf = start(client, world).json["workflow_id"]
    mine = client.simulate_get(f"{NS}/audit", headers=auth(world.token), params={"workflow_id": wf})
    assert [(r["action"], r["workflow_id"]) for r in mine.json["items"]] == [("instance.start", wf)]


def test_M2_definitions_are_listed_with_their_latest_version_which_reads_like_any_version(client, world):
    publish(client, world)
    second = {**TIMER, "steps": [{**TIMER["steps"][0], "delay_ms": 1_000}]}
    publish(client, world, second)
    listed = client.simulate_get(f"{NS}/definitions", headers=auth(world.token)).json["items"]
    assert [(d["name"], d["latest_version"], d["versions"]) for d in listed] == [("cool-off", 2, 2)]
    latest = client.simulate_get(f"{NS}/definitions/cool-off", headers=auth(world.token))
    assert latest.status_code == 200 and latest.json["version"] == 2 and latest.json["steps"][0]["delay_ms"] == 1_000
    assert latest.json == client.simulate_get(f"{NS}/definitions/cool-off/versions/2", headers=auth(world.token)).json
    problem(client.simulate_get(f"{NS}/definitions/nope", headers=auth(world.token)), 404, "NOT_FOUND")


@pytest.mark.parametrize(("path", "token", "cursor"), [("definitions", "token", "flow-0002"),
                                                     ("apps", "admin", "app-0002"),
                                                     ("queues", "admin", "queue-0002"),
                                                     ("credentials", "admin", None)])
def test_R11_configuration_lists_are_paged_with_limit_and_cursor_over_http(client, world, path, token, cursor):
    """GET /definitions, /apps, /queues and /credentials answered every row in one answer and refused `limit`: they
    take `limit` (1..1000, 100 by default) and `cursor`, and answer `{items, next_cursor}` as the other lists do."""
    for i in range(5):
        publish(client, world, {**TIMER, "name": f"flow-{i:04d}"})
        routines.app_put(world.db.conn, world.admin, world.namespace, f"app-{i:04d}", 5)
        routines.queue_put(world.db.conn, world.admin, world.namespace, f"queue-{i:04d}", 5)
        routines.credential_create(world.db.conn, world.admin, world.namespace, f"bot-{i}", ["workflows:read"])
    headers = auth(getattr(world, token))
    every = client.simulate_get(f"{NS}/{path}", headers=headers).json
    assert every["next_cursor"] is None and len(every["items"]) >= 5
    key = "credential_id" if path == "credentials" else "name"
    seen, after = [], None
    while True:
        page = client.simulate_get(f"{NS}/{path}", headers=headers, params={"limit": 2, **({"cursor": after} if after
                                                                                          else {})})
        assert page.status_code == 200 and len(page.json["items"]) <= 2
        seen += [item[key] for item in page.json["items"]]
        after = page.json["next_cursor"]
        if after is None:
            break
    assert seen == [item[key] for item in every["items"]]
    if cursor is not None:  # the cursor is the last name of the page before: the rows named after it follow
        page = client.simulate_get(f"{NS}/{path}", headers=headers, params={"cursor": cursor, "limit": 1}).json
        assert [item[key] for item in page["items"]] == [cursor[:-1] + "3"]
    for limit in ("0", "1001", "x"):
        body = problem(client.simulate_get(f"{NS}/{path}", headers=headers, params={"limit": limit}), 422,
                       "VALIDATION_FAILED")
        assert [e["code"] for e in body["errors"]] == ["LIMIT_INVALID"]
    body = problem(client.simulate_get(f"{NS}/{path}", headers=headers, params={"cursor": "wf_1 x"}), 422,
                   "VALIDATION_FAILED")
    assert [e["code"] for e in body["errors"]] == ["CURSOR_INVALID"]


def test_a_privilege_taken_back_from_the_api_s_user_is_unavailable_and_readiness_says_which(db, world):
    """A DBA took EXECUTE back from the runtime user: every start and signal answered 500 with a stack trace in the
    log, and /readyz said the routines were not installed and to run `weave migrate`. The refusal is the database
    being unavailable to this node (503, as a refused login is), and readiness names the privilege."""
    from falcon import testing

    from api.app import create_app
    from api.http import Connections
    from tests.support.server import as_user, create_user, drop_user

    world.publish(TIMER)
    admin = db.connect()
    name = "weave_t_revoked"
    drop_user(admin, name)
    create_user(admin, name, "EXECUTE, SELECT", db.dsn.database)
    connections = Connections(as_user(db.dsn, name))
    client = testing.TestClient(create_app(connections))
    try:
        assert start(client, world, key="before").status_code == 201
        with admin.cursor() as cur:
            for host in ("%", "localhost"):
                cur.execute(f"REVOKE EXECUTE ON `{db.dsn.database}`.* FROM '{name}'@'{host}'")
        connections.discard()  # a session opened before keeps what it could run; the next one is refused
        refused = start(client, world, key="after")
        body = problem(refused, 503, "UNAVAILABLE")
        assert refused.headers.get("retry-after") and "privilege" in body["detail"], body
        ready = problem(client.simulate_get("/readyz"), 503, "UNAVAILABLE")
        assert "may not execute them" in ready["detail"] and "GRANT EXECUTE" in ready["detail"], ready
    finally:
        connections.discard()
        drop_user(admin, name)
        admin.close()


def test_a_request_that_gave_up_on_a_held_row_leaves_no_statement_waiting_on_the_server(db, world):
    """The API gives up on an answer after its timeout (0.8 s) and answers 503, but its statement went on waiting on
    the server for the row, for the server's own lock wait (50 s here): a DBA's minute-long lock piled up 200 such
    sessions as clients retried, until the server refused connections to every node and daemon. A request's
    statements now wait for a lock about as long as the request waits for them."""
    from falcon import testing

    from api.app import create_app
    from api.http import ApiConnections

    world.publish(TIMER)
    wf = world.start("cool-off")
    connections = ApiConnections(db.dsn)
    client = testing.TestClient(create_app(connections))
    try:
        with world.held(wf):
            paused = client.simulate_post(f"{NS}/workflows/{wf}/pause", headers=auth(world.token, "p-held"),
                                          json={"reason": "hold"})
            problem(paused, 503, "UNAVAILABLE")
            assert wait_for(lambda: world.db.scalar(  # the server's side of the request has ended too
                "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE DB = DATABASE() AND COMMAND = 'Query' "
                "AND ID <> CONNECTION_ID()") == 0, timeout=5)
    finally:
        connections.discard()
    assert world.instance(wf)["control"] == "ACTIVE"


def test_unknown_route_is_a_problem_404(client):
    problem(client.simulate_get("/v1/nope"), 404, "NOT_FOUND")


def test_health_ready_metrics_openapi(client):
    assert client.simulate_get("/healthz").json == {"status": "ok"}
    ready = client.simulate_get("/readyz")
    assert ready.status_code == 200 and ready.json["status"] == "ready"
    metrics = client.simulate_get("/metrics")
    assert metrics.status_code == 200 and 'weave_due_backlog{class="CHECKPOINT"}' in metrics.text
    doc = client.simulate_get("/openapi.json").json
    assert doc["openapi"].startswith("3.1")


def test_openapi_documents_every_route_of_the_app(client):
    from api.app import PREFIX, create_app
    from api.http import Connections

    app = create_app(Connections(None))
    documented = set(client.simulate_get("/openapi.json").json["paths"])
    routed = set()

    def walk(nodes):
        for node in nodes:
            if node.resource is not None:
                routed.add(node.uri_template)
            walk(node.children)

    walk(app._router._roots)
    # The operator console's HTML pages are not API endpoints: docs/console.md describes them.
    pages = {p for p in routed if p == "/console" or p.startswith("/console/")}
    assert pages and routed - pages == documented
    assert all(p.startswith(PREFIX.split("{")[0]) or p.startswith("/") for p in routed)


def test_database_down_is_503_with_retry_after(world):
    from falcon import testing

    from api.app import create_app
    from api.http import Connections
    from procedures.db import Dsn

    dead = testing.TestClient(create_app(Connections(Dsn(host="127.0.0.1", port=1, database="x"))))
    result = dead.simulate_get(f"{NS}/workflows/wf_1", headers=auth(world.token))
    problem(result, 503, "UNAVAILABLE")
    assert result.headers["retry-after"] == "1"
    assert "Traceback" not in result.text
    # A request without a token is refused before anything asks the database, on every read.
    for read in ("workflows/wf_1", "workflows/wf_1/signals/sig_1", "workflows/wf_1/steps/a/explain",
                 "workflows", "workflows/wf_1/events"):
        problem(dead.simulate_get(f"{NS}/{read}"), 401, "UNAUTHENTICATED")


def test_R13_a_signal_to_an_instance_held_past_the_lock_wait_is_a_503_that_says_so(world, database):
    """A lock wait that runs out is not an outage: the 503 says a row the request needs is held, that nothing was
    done, and to retry with the same key."""
    from falcon import testing

    from api.app import create_app
    from api.http import Connections
    from tests.support.signals import signal_flow

    world.publish(signal_flow())
    wf = world.start("approval-flow", {"order_id": "o-1"})
    connections = Connections(database)
    with connections.get().cursor() as cur:  # this thread's connection, which the test client's requests use
        cur.execute("SET SESSION innodb_lock_wait_timeout = 1")
    api = testing.TestClient(create_app(connections))
    body = {"name": "approval.decided", "payload_version": "1", "target_step_key": "approval",
            "target_activation_sequence": 1, "correlation_key": "o-1", "payload": {"approved": True},
            "reason": "looks good"}
    try:
        with world.held(wf):
            held = api.simulate_post(f"{NS}/workflows/{wf}/signals", headers=auth(world.token, "held-1"), json=body)
        problem(held, 503, "UNAVAILABLE")
        assert "held by another transaction" in held.json["detail"] and "nothing was done" in held.json["detail"]
        again = api.simulate_post(f"{NS}/workflows/{wf}/signals", headers=auth(world.token, "held-1"), json=body)
        assert again.status_code == 201
    finally:
        connections.discard()


def test_Z3_a_database_that_refuses_the_node_s_login_is_503_and_not_ready(world, caplog):
    """A credential rotated in place: the server refuses the password the node still holds (1045). Every request,
    and the readiness probe, answers 503 with Retry-After (the load balancer takes the node out), never 500."""
    from falcon import testing

    from api.app import create_app
    from api.http import Connections

    refused = dataclasses.replace(world.db.dsn, password="not-its-password")
    client = testing.TestClient(create_app(Connections(refused)))
    for path in (f"{NS}/workflows/wf_1", "/readyz"):
        result = client.simulate_get(path, headers=auth(world.token))
        problem(result, 503, "UNAVAILABLE")
        assert result.headers["retry-after"] and "Traceback" not in result.text
    assert not [r for r in caplog.records if r.name == "weave.api" and r.getMessage() == "unhandled error"]


def test_a_503_says_why_in_the_log_once_a_second_with_the_count(world, caplog, monkeypatch):
    """The answer says only UNAVAILABLE; the log says which database error it was (a node that died, a conflict
    the retries did not outlast), at most once a second with the number of 503s answered since the line before."""
    from falcon import testing

    import api.http
    from api.app import create_app
    from api.http import Connections
    from procedures.db import Dsn

    clock = [1000.0]
    monkeypatch.setattr(api.http.UnavailableLog, "clock", staticmethod(lambda: clock[0]))
    dead = testing.TestClient(create_app(Connections(Dsn(host="127.0.0.1", port=1, database="x"))))
    path = f"{NS}/workflows/wf_1"

    def lines() -> list[dict]:
        return [r.fields for r in caplog.records if r.name == "weave.api" and r.getMessage().startswith("answered 503")]

    with caplog.at_level("WARNING", logger="weave.api"):
        for _ in range(3):
            problem(dead.simulate_get(path, headers=auth(world.token)), 503, "UNAVAILABLE")
        assert len(lines()) == 1
        assert lines()[0]["answered_503"] == 1 and lines()[0]["path"] == path
        assert [r.getMessage() for r in caplog.records if r.name == "weave.api"] == [
            "answered 503: the database is unavailable"]
        assert "127.0.0.1:1" in lines()[0]["error"] or "Can't connect" in lines()[0]["error"], lines()[0]
        clock[0] += 1.0
        problem(dead.simulate_get(path, headers=auth(world.token)), 503, "UNAVAILABLE")
        assert [line["answered_503"] for line in lines()] == [1, 3]  # the two unlogged ones and this one


def test_C1_an_action_answers_the_instance_with_its_own_scope_alone(client, world):
    """A credential that may act on instances but not read them (scopes never imply one another) pauses one: 200
    with the instance as it is now, also on a replay. The API used to read the instance back with the caller's
    token after the action committed, and answered 403 for an action that had happened."""
    publish(client, world)
    wf = start(client, world).json["workflow_id"]
    operator = world.credential(["workflows:control"], actor="operator")["token"]
    paused = client.simulate_post(f"{NS}/workflows/{wf}/pause", headers=auth(operator, "p-1"), json={"reason": "audit"})
    assert paused.status_code == 200, paused.text
    got = client.simulate_get(f"{NS}/workflows/{wf}", headers=auth(world.token))
    assert paused.json == got.json and paused.json["control"] == "PAUSED"
    replay = client.simulate_post(f"{NS}/workflows/{wf}/pause", headers=auth(operator, "p-1"), json={"reason": "audit"})
    assert replay.status_code == 200 and replay.headers.get("idempotent-replayed") == "true"
    assert replay.json == got.json
    problem(client.simulate_get(f"{NS}/workflows/{wf}", headers=auth(operator)), 403, "FORBIDDEN")  # still no read


def test_pause_resume_and_deadline_over_http(client, world):
    publish(client, world)
    wf = start(client, world).json["workflow_id"]
    headers = auth(world.token, "pause-1")
    paused = client.simulate_post(f"{NS}/workflows/{wf}/pause", headers=headers, json={"reason": "audit"})
    assert paused.status_code == 200 and paused.json["control"] == "PAUSED"
    again = client.simulate_post(f"{NS}/workflows/{wf}/pause", headers=headers, json={"reason": "audit"})
    assert again.status_code == 200 and again.headers.get("idempotent-replayed") == "true"
    problem(client.simulate_post(f"{NS}/workflows/{wf}/pause", headers=headers, json={"reason": "other"}), 409,
            "IDEMPOTENCY_CONFLICT")
    resumed = client.simulate_post(f"{NS}/workflows/{wf}/resume", headers=auth(world.token, "r"),
                                   json={"reason": "done"})
    assert resumed.json["control"] == "ACTIVE"
    moved = client.simulate_post(f"{NS}/workflows/{wf}/deadline", headers=auth(world.token, "d"),
                                 json={"reason": "more", "extend_ms": 1000})
    assert moved.status_code == 200 and moved.json["deadline_at"] > paused.json["deadline_at"]
    body = problem(client.simulate_post(f"{NS}/workflows/{wf}/deadline", headers=auth(world.token, "d2"),
                                        json={"reason": "less", "deadline_at": "2000-01-01T00:00:00Z"}), 422,
                   "VALIDATION_FAILED")
    assert body["errors"][0]["code"] == "DEADLINE_INVALID"


def test_C4_a_step_action_for_an_activation_the_step_left_is_a_409_and_changes_nothing(client, world, orch):
    """A SIGNAL step that timed out, reactivated, and timed out again: a resolve meant for activation 1 is refused
    409 INVALID_STATE; meant for activation 2 (what GET shows now), it settles the step."""
    publish(client, world, SIGNAL_FLOW)
    wf = start(client, world, definition="approval", deadline_ms=86_400_000).json["workflow_id"]
    for seq in (1, 2):
        world.db.advance(3_600_001)
        orch.drain()
        step = client.simulate_get(f"{NS}/workflows/{wf}", headers=auth(world.token)).json["steps"][0]
        assert (step["status"], step["activation_sequence"]) == ("NEEDS_REVIEW", seq)
        if seq == 1:
            moved = client.simulate_post(f"{NS}/workflows/{wf}/steps/approval/reactivate",
                                         headers=auth(world.token, "again"), json={"reason": "one more hour",
                                                                                   "activation_sequence": 1})
            assert moved.status_code == 200, moved.text
            orch.drain()
    body = {"reason": "approved by phone", "output": {"approved": True}}
    stale = client.simulate_post(f"{NS}/workflows/{wf}/steps/approval/resolve", headers=auth(world.token, "res-1"),
                                 json={**body, "activation_sequence": 1})
    assert "is at activation 2, not 1" in problem(stale, 409, "INVALID_STATE")["detail"]
    output = '{"approved": true, "amount": 12345678901234567.5}'  # kept as sent, every digit
    done = client.simulate_post(f"{NS}/workflows/{wf}/steps/approval/resolve",
                                headers={**auth(world.token, "res-2"), "Content-Type": "application/json"},
                                body='{"reason": "by phone", "activation_sequence": 2, "output": ' + output + "}")
    assert done.status_code == 200 and done.json["steps"][0]["status"] == "SUCCEEDED"
    assert world.db.scalar("SELECT output FROM weave_steps WHERE step_key = 'approval'") == output
    problem(client.simulate_post(f"{NS}/workflows/{wf}/steps/approval/resolve", headers=auth(world.token, "res-3"),
                                 json={**body, "activation_sequence": 0}), 422, "VALIDATION_FAILED")


SIGNAL_FLOW = {"name": "approval", "steps": [
    {"key": "approval", "type": "SIGNAL", "signal": {"name": "approval.decided", "payload_version": "1",
                                                     "payload_type": "object"},
     "correlation": "$.input.order_id", "timeout_ms": 3_600_000}]}


def send_raw(client, world, wf, body: str, key="sig-1"):
    return client.simulate_post(f"{NS}/workflows/{wf}/signals", body=body,
                                headers={**auth(world.token, key), "Content-Type": "application/json"})


def signal_body(payload_text: str, **over) -> str:
    fields = {"name": "approval.decided", "payload_version": "1", "target_step_key": "approval",
              "target_activation_sequence": 1, "correlation_key": "o1", "reason": "approved by risk", **over}
    head = json.dumps(fields)[:-1]
    return f'{head}, "payload": {payload_text}}}'


@pytest.mark.parametrize("written, taken", [("1.0000000000000000001", False), ("0.9999999999999999999", False),
                                             ("1e-99999999999999999999", False), ("1.0", True), ("1e0", True),
                                             ("10e-1", True)])
def test_S1_an_activation_sequence_is_a_whole_number_as_written_not_as_parsed(client, world, written, taken):
    """S-1: target_activation_sequence is an explicit positive integer. A number whose text is not whole parses to
    the float 1.0 all the same; taken, the signal was stored for activation 1, a guess. An integral number written
    with a fraction or an exponent is an integer (JSON Schema), and is taken."""
    publish(client, world, SIGNAL_FLOW)
    wf = start(client, world, definition="approval").json["workflow_id"]
    body = signal_body('{"ok": true}').replace('"target_activation_sequence": 1,',
                                               f'"target_activation_sequence": {written},')
    got = send_raw(client, world, wf, body)
    if taken:
        assert got.status_code == 201, got.text
    else:
        assert [e["code"] for e in problem(got, 422, "VALIDATION_FAILED")["errors"]] == ["ACTIVATION_SEQUENCE_INVALID"]
        assert _stored_signals(world) == 0


def test_S4_http_signal_digest_covers_the_payload_bytes_exactly_as_received(client, world, orch):
    from tests.support.signals import digest

    publish(client, world, SIGNAL_FLOW)
    wf = start(client, world, definition="approval").json["workflow_id"]
    payload = '{"z": 1,  "a": 123456789012345678901234567890, "f": 1.10}'
    first = send_raw(client, world, wf, signal_body(payload))
    assert first.status_code == 201, first.text
    expected = digest(world, name="approval.decided", payload_version="1", target_step_key="approval",
                      target_activation_sequence=1, correlation_key="o1", payload=payload, reason="approved by risk")
    assert first.json["request_digest"] == expected and first.json["status"] == "PENDING"
    replay = send_raw(client, world, wf, signal_body(payload))
    assert replay.status_code == 200 and replay.headers.get("idempotent-replayed") == "true"
    assert replay.text == first.text  # byte-identical receipt
    problem(send_raw(client, world, wf, signal_body('{"a": 2}')), 409, "IDEMPOTENCY_CONFLICT")
    orch.drain()
    stored = world.db.scalar("SELECT payload FROM weave_signals")
    assert stored.decode() == payload  # never re-serialised
    assert first.headers["location"] == f"{NS}/workflows/{wf}/signals/{first.json['signal_id']}"
    assert "location" not in replay.headers
    got = client.simulate_get(first.headers["location"], headers=auth(world.token))
    assert got.json["status"] == "CONSUMED" and got.json["payload"]["a"] == 123456789012345678901234567890
    assert world.step(wf, "approval")["output"]["a"] == 123456789012345678901234567890
    listed = client.simulate_get(f"{NS}/workflows/{wf}/signals", headers=auth(world.token))
    assert [s["signal_id"] for s in listed.json["items"]] == [first.json["signal_id"]]


def test_S4_a_signal_is_answered_with_its_payload_as_the_bytes_accepted(client, world):
    """GET of a signal, and the signal listing, answered the payload parsed and written again: an amount of
    12345678901234567890.10 came back as 1.2345678901234567e+19 and 1.10 as 1.1. The payload is stored as the
    bytes received, and it is answered as those bytes."""
    publish(client, world, SIGNAL_FLOW)
    wf = start(client, world, definition="approval").json["workflow_id"]
    payload = '{"amount": 12345678901234567890.10, "rate": 1.10, "k": 1E2,  "z": [ ]}'
    sent = send_raw(client, world, wf, signal_body(payload))
    assert sent.status_code == 201, sent.text
    got = client.simulate_get(f"{NS}/workflows/{wf}/signals/{sent.json['signal_id']}", headers=auth(world.token))
    assert got.status_code == 200 and f'"payload": {payload}' in got.text
    assert json.loads(got.text, parse_float=decimal.Decimal)["payload"]["amount"] == \
        decimal.Decimal("12345678901234567890.10")
    assert {k: v for k, v in got.json.items() if k != "payload"} == {
        **{k: v for k, v in got.json.items() if k != "payload"}, "signal_id": sent.json["signal_id"],
        "status": "CONSUMED"}
    listed = client.simulate_get(f"{NS}/workflows/{wf}/signals", headers=auth(world.token))
    assert listed.status_code == 200 and f'"payload": {payload}' in listed.text
    assert [s["signal_id"] for s in listed.json["items"]] == [sent.json["signal_id"]]
    assert listed.json["next_cursor"] is None and listed.json["items"][0] == got.json


@pytest.mark.parametrize(("over", "field", "code"), [
    ({"reason": ""}, "reason", "REASON_INVALID"),
    ({"evidence_ref": "has space"}, "evidence_ref", "EVIDENCE_REF_INVALID"),
    ({"target_step_key": "nope"}, "target_step_key", "TARGET_STEP_INVALID"),
    ({"target_activation_sequence": 2}, "target_activation_sequence", "FUTURE_ACTIVATION"),
    ({"correlation_key": "x" * 513}, "correlation_key", "CORRELATION_KEY_TOO_LONG"),
])
def test_S1_a_field_the_engine_refuses_is_named_in_the_problem(client, world, over, field, code):
    """A rule the engine holds (S-1) answered 422 with `errors[0].field` null: a client could not tell which field
    of its request to correct. The problem names it, as it does for the rules the API checks itself."""
    publish(client, world, SIGNAL_FLOW)
    wf = start(client, world, definition="approval").json["workflow_id"]
    answer = send_raw(client, world, wf, signal_body('{"approved": true}', **over))
    problem(answer, 422, "VALIDATION_FAILED")
    assert [(e["field"], e["code"]) for e in answer.json["errors"]] == [(field, code)]


def test_a_start_for_an_app_that_does_not_exist_names_the_field(client, world):
    publish(client, world)
    answer = start(client, world, app="nope")
    problem(answer, 422, "VALIDATION_FAILED")
    assert [(e["field"], e["code"]) for e in answer.json["errors"]] == [("app", "APP_NOT_FOUND")]


def test_S4_the_instance_answers_the_winning_payload_as_the_steps_output_exactly(client, world):
    """The step that a signal settles has the payload, exactly as sent, as its output (05-signals): the instance
    answered it parsed and written again (12345678901234567890.10 as 1.2345678901234567e+19)."""
    publish(client, world, SIGNAL_FLOW)
    wf = start(client, world, definition="approval").json["workflow_id"]
    payload = '{"amount": 12345678901234567890.10, "rate": 1.10}'
    assert send_raw(client, world, wf, signal_body(payload)).status_code == 201
    got = client.simulate_get(f"{NS}/workflows/{wf}", headers=auth(world.token))
    assert got.status_code == 200 and f'"output": {payload}' in got.text
    assert got.json["steps"][0]["output"]["rate"] == 1.1 and got.json["status"] == "SUCCEEDED"


def test_M2_an_input_kept_over_sql_is_answered_as_json_even_beyond_a_double(client, world):
    """An input started over SQL with a number no double holds (1e400) was answered as {"n": Infinity}, which is not
    JSON: every client failed to read the instance. Such a number is refused where it comes in now, but an input
    kept before that still is answered as it was kept."""
    world.publish(TIMER)
    wf = routines.instance_start(world.db.conn, world.token, world.namespace, definition="cool-off", app=world.app,
                                 input_json='{"n": 1, "m": 1.10}', idempotency_key="sql-1",
                                 deadline_ms=3_600_000)["workflow_id"]
    world.db.execute("UPDATE weave_instances SET input = %s WHERE id = %s", '{"n": 1e400, "m": 1.10}',
                     world.internal_id(wf))  # kept before such numbers were refused
    got = client.simulate_get(f"{NS}/workflows/{wf}", headers=auth(world.token))
    assert got.status_code == 200 and '"input": {"n": 1e400, "m": 1.10}' in got.text
    json_only(got.text)
    paused = client.simulate_post(f"{NS}/workflows/{wf}/pause", headers=auth(world.token, "p-1"),
                                  json={"reason": "look"})
    assert paused.status_code == 200 and '"input": {"n": 1e400, "m": 1.10}' in paused.text


def test_M2_an_output_resolved_over_sql_is_answered_in_the_event_history_as_kept(client, world, orch):
    """A resolve's output is in its STEP_RESOLVED event. The history parsed it and wrote it again: a number no
    double holds (1e400, which a SQL client could resolve with until it was refused where it comes in) came back as
    Infinity, which is not JSON, so no client could read the page, 1e300 as 1e+300, and 12345678901234567890.10 as
    1.2345678901234567e+19, another amount than the step's."""
    output = '{"n": 1e300, "m": 12345678901234567890.10}'
    wf = resolved_over_sql(world, orch, output)
    got = client.simulate_get(f"{NS}/workflows/{wf}/events", headers=auth(world.token))
    assert got.status_code == 200
    events = json_only(got.text)["events"]
    assert [e["type"] for e in events].count("STEP_RESOLVED") == 1
    assert f'"data": {{"output": {output}, ' in got.text
    shown = client.simulate_get(f"{NS}/workflows/{wf}", headers=auth(world.token)).text
    assert f'"output": {output}' in shown


def test_S1_http_signal_validation_and_duplicate_keys(client, world):
    publish(client, world, SIGNAL_FLOW)
    wf = start(client, world, definition="approval").json["workflow_id"]
    body = problem(send_raw(client, world, wf, signal_body('{"a": 1, "a": 2}')), 422, "VALIDATION_FAILED")
    assert body["errors"][0]["code"] == "DUPLICATE_JSON_KEY"
    missing = json.dumps({"name": "approval.decided", "payload_version": "1", "target_step_key": "approval",
                          "target_activation_sequence": 1, "correlation_key": "o1", "reason": "r"})
    body = problem(send_raw(client, world, wf, missing, key="k2"), 422, "VALIDATION_FAILED")
    assert body["errors"][0]["code"] == "PAYLOAD_MISSING"
    body = problem(send_raw(client, world, wf, signal_body("null", name="x" * 129), key="k3"), 422,
                   "VALIDATION_FAILED")
    assert body["errors"][0]["code"] == "NAME_TOO_LONG"
    explain = client.simulate_get(f"{NS}/workflows/{wf}/steps/approval/explain", headers=auth(world.token))
    assert explain.status_code == 200 and explain.json["step_key"] == "approval"


def test_T8_metrics_show_timer_lateness_of_recent_settlements(client, world, orch):
    publish(client, world)
    start(client, world)
    orch.drain()
    world.db.advance(62_000)  # settles about 2 s late
    orch.drain()
    text = client.simulate_get("/metrics").text
    assert 'weave_timer_lateness_seconds_bucket{le="0.1"} 0.0' in text
    assert 'weave_timer_lateness_seconds_bucket{le="5.0"} 1.0' in text
    assert 'weave_timer_lateness_seconds_bucket{le="+Inf"} 1.0' in text
    assert "weave_timer_lateness_seconds_count 1.0" in text
    assert "weave_signals_pending 0.0" in text and 'weave_polls{state="WAITING"}' in text


def test_list_filters_by_business_key_and_control_and_instances_show_their_checkpoints(client, world):
    publish(client, world)
    first = start(client, world, "k-a", business_key="order-a").json["workflow_id"]
    second = start(client, world, "k-b", business_key="order-b").json["workflow_id"]
    client.simulate_post(f"{NS}/workflows/{second}/pause", headers=auth(world.token, "p-b"), json={"reason": "hold"})
    by_key = client.simulate_get(f"{NS}/workflows", params={"business_key": "order-a"}, headers=auth(world.token))
    assert [i["workflow_id"] for i in by_key.json["items"]] == [first]
    paused = client.simulate_get(f"{NS}/workflows", params={"control": "PAUSED"}, headers=auth(world.token))
    assert [i["workflow_id"] for i in paused.json["items"]] == [second]
    none = client.simulate_get(f"{NS}/workflows", params={"review_code": "POLL_DEADLINE", "deferred": "true"},
                               headers=auth(world.token))
    assert none.status_code == 200 and none.json["items"] == []
    problem(client.simulate_get(f"{NS}/workflows", params={"deferred": "maybe"}, headers=auth(world.token)),
            422, "VALIDATION_FAILED")
    problem(client.simulate_get(f"{NS}/workflows", params={"control": "SLEEPY"}, headers=auth(world.token)),
            422, "VALIDATION_FAILED")
    shown = client.simulate_get(f"{NS}/workflows/{first}", headers=auth(world.token)).json
    assert [(c["step_key"], c["kind"], c["deferred_reason"]) for c in shown["checkpoints"]] == [("wait", "TIMER", None)]


def test_C6_an_action_key_is_scoped_to_its_instance_and_action_and_a_replay_is_still_authorised(client, world):
    """One Idempotency-Key on another instance or another action is a new action, not a replay of the first; the
    deadline's digest tells extend_ms from deadline_at; a replay after the instance changed state still answers
    200 replayed; and a replay by a credential without the action's scope is 403."""
    publish(client, world)
    a, b = (start(client, world, key=k).json["workflow_id"] for k in ("a", "b"))

    def act(wf, action, body, token=None, key="k"):
        return client.simulate_post(f"{NS}/workflows/{wf}/{action}", headers=auth(token or world.token, key),
                                    json=body)

    first = act(a, "pause", {"reason": "hold"})
    assert first.status_code == 200 and "idempotent-replayed" not in first.headers
    other_instance = act(b, "pause", {"reason": "hold"})
    assert other_instance.status_code == 200 and "idempotent-replayed" not in other_instance.headers
    assert other_instance.json["control"] == "PAUSED"
    other_action = act(a, "resume", {"reason": "hold"})
    assert other_action.status_code == 200 and "idempotent-replayed" not in other_action.headers
    assert other_action.json["control"] == "ACTIVE"
    moved = act(a, "deadline", {"reason": "more", "extend_ms": 1000}, key="d")
    assert moved.status_code == 200
    problem(act(a, "deadline", {"reason": "more", "deadline_at": moved.json["deadline_at"]}, key="d"), 409,
            "IDEMPOTENCY_CONFLICT")
    assert act(a, "cancel", {"reason": "stop"}, key="c").json["status"] == "CANCELLED"
    problem(act(a, "pause", {"reason": "hold"}, key="late"), 409, "INVALID_STATE")
    replay = act(a, "pause", {"reason": "hold"})
    assert replay.status_code == 200 and replay.headers.get("idempotent-replayed") == "true"
    assert replay.json["status"] == "CANCELLED"  # the instance as it is now
    reader = world.credential(["workflows:read"])["token"]
    problem(act(a, "pause", {"reason": "hold"}, token=reader), 403, "FORBIDDEN")
    events = client.simulate_get(f"{NS}/workflows/{a}/events", headers=auth(world.token)).json["events"]
    assert [e["type"] for e in events].count("INSTANCE_PAUSED") == 1


def test_event_pages_are_gap_free_and_a_list_cursor_ignores_instances_started_meanwhile(client, world, orch):
    publish(client, world)
    wf = start(client, world).json["workflow_id"]
    orch.drain()
    every = client.simulate_get(f"{NS}/workflows/{wf}/events", headers=auth(world.token)).json
    total = len(every["events"])
    assert [e["seq"] for e in every["events"]] == list(range(1, total + 1)) and every["next_after"] == total
    seen, after = [], 0
    while True:  # a page size that divides the history exactly: the last full page is followed by an empty one
        page = client.simulate_get(f"{NS}/workflows/{wf}/events", params={"after": str(after), "limit": "1"},
                                   headers=auth(world.token)).json
        if not page["events"]:
            assert page["next_after"] == after
            break
        seen += [e["seq"] for e in page["events"]]
        after = page["next_after"]
    assert seen == list(range(1, total + 1))
    ids = [wf] + [start(client, world, key=f"n{i}").json["workflow_id"] for i in range(3)]
    first = client.simulate_get(f"{NS}/workflows", params={"limit": "2"}, headers=auth(world.token)).json
    start(client, world, key="meanwhile")
    rest = client.simulate_get(f"{NS}/workflows", params={"limit": "2", "cursor": first["next_cursor"]},
                               headers=auth(world.token)).json
    assert [i["workflow_id"] for i in first["items"] + rest["items"]] == list(reversed(ids))
    assert rest["next_cursor"] is None


def _stored_signals(world) -> int:
    return world.db.scalar("SELECT COUNT(*) FROM weave_signals")


def test_S1_http_a_body_that_is_not_one_utf8_json_object_is_refused_before_the_routine(client, world):
    """A BOM, trailing bytes after the object, UTF-16, or a top-level value that is no object: each is a 422 naming
    why, and nothing is stored."""
    publish(client, world, SIGNAL_FLOW)
    wf = start(client, world, definition="approval").json["workflow_id"]
    good = signal_body('{"ok": true}')
    cases = {"bom": "\ufeff" + good, "trailing": good + " x", "two objects": good + good,
             "utf-16": good.encode("utf-16"), "utf-16-le": good.encode("utf-16-le"), "array": f"[{good}]",
             "scalar": '"payload"', "null": "null"}
    for name, body in cases.items():
        headers = {**auth(world.token, f"k-{len(name)}"), "Content-Type": "application/json"}
        result = client.simulate_post(f"{NS}/workflows/{wf}/signals", body=body, headers=headers)
        errors_ = problem(result, 422, "VALIDATION_FAILED")["errors"]
        assert errors_ and errors_[0]["code"] in ("INVALID_JSON", "INVALID_TYPE"), (name, errors_)
    assert _stored_signals(world) == 0
    assert send_raw(client, world, wf, good + " \r\n\t").status_code == 201  # JSON whitespace is no garbage


@pytest.mark.parametrize("over, code", [
    ({"target_activation_sequence": 0}, "ACTIVATION_SEQUENCE_INVALID"),
    ({"target_activation_sequence": -1}, "ACTIVATION_SEQUENCE_INVALID"),
    ({"target_activation_sequence": 2**63}, "ACTIVATION_SEQUENCE_INVALID"),
    ({"target_activation_sequence": 10**30}, "ACTIVATION_SEQUENCE_INVALID"),
    ({"target_activation_sequence": 1.5}, "ACTIVATION_SEQUENCE_INVALID"),
    ({"target_activation_sequence": True}, "ACTIVATION_SEQUENCE_INVALID"),
    ({"target_activation_sequence": "1"}, "ACTIVATION_SEQUENCE_INVALID"),
    ({"target_activation_sequence": 2}, "FUTURE_ACTIVATION"),
    ({"target_activation_sequence": 2**31}, "FUTURE_ACTIVATION"),
    ({"correlation_key": "é" * 257}, "CORRELATION_KEY_TOO_LONG"),
    ({"correlation_key": 1}, "CORRELATION_KEY_MISSING"),
    ({"reason": "ü" * 1025}, "REASON_INVALID"),
    ({"evidence_ref": "a b"}, "EVIDENCE_REF_INVALID"),
    ({"evidence_ref": None}, "EVIDENCE_REF_INVALID"),
    ({"name": "n" * 129}, "NAME_TOO_LONG"),
    ({"name": "approval.décidé"}, "NAME_INVALID"),
    ({"payload_version": "v" * 33}, "PAYLOAD_VERSION_INVALID"),
    ({"target_step_key": "approval "}, "TARGET_STEP_INVALID"),
])
def test_S1_S8_http_each_field_rule_answers_its_code_and_stores_nothing(client, world, over, code):
    publish(client, world, SIGNAL_FLOW)
    wf = start(client, world, definition="approval").json["workflow_id"]
    body = problem(send_raw(client, world, wf, signal_body('{"ok": true}', **over)), 422, "VALIDATION_FAILED")
    assert [e["code"] for e in body["errors"]] == [code]
    assert _stored_signals(world) == 0


def test_S1_S5_http_payload_limit_is_bytes_as_received_and_the_receipt_has_the_s5_fields(client, world):
    publish(client, world, {**SIGNAL_FLOW, "name": "any", "steps": [
        {**SIGNAL_FLOW["steps"][0], "signal": {"name": "approval.decided", "payload_version": "1",
                                                "payload_type": "any"}}]})
    wf = start(client, world, definition="any").json["workflow_id"]
    at_limit = '"' + "é" * (128 * 1024 - 1) + '"'  # 262,144 bytes as received
    assert len(at_limit.encode()) == 256 * 1024
    receipt = send_raw(client, world, wf, signal_body(at_limit), key="at")
    assert receipt.status_code == 201, receipt.text
    assert list(receipt.json) == ["signal_id", "workflow_id", "idempotency_key", "status", "disposition",
                                  "accepted_at", "expires_at", "request_digest"]
    # Every S-5 field is in every receipt (disposition null until a rejection), as its schema says.
    assert document()["components"]["schemas"]["Receipt"]["required"] == list(receipt.json)
    assert receipt.json["workflow_id"] == wf and receipt.json["idempotency_key"] == "at"
    assert receipt.json["status"] == "PENDING" and receipt.json["disposition"] is None
    assert receipt.json["signal_id"].startswith("sig_") and len(receipt.json["request_digest"]) == 64
    escaped = '"' + "\\u00e9" * (256 * 1024 // 6 + 1) + '"'  # fewer characters, but more bytes as received
    assert len(escaped.encode()) > 256 * 1024
    body = problem(send_raw(client, world, wf, signal_body(escaped), key="past"), 422,
                   "VALIDATION_FAILED")
    assert [e["code"] for e in body["errors"]] == ["PAYLOAD_TOO_LARGE"]
    null = send_raw(client, world, wf, signal_body("null"), key="null")
    assert null.status_code == 201 and world.db.scalar(
        "SELECT payload FROM weave_signals WHERE idempotency_key = 'null'") == b"null"


def test_a_query_parameter_the_request_does_not_take_is_refused_as_an_unknown_field(client, world):
    """A mistyped filter (?stauts=NEEDS_REVIEW) listed every instance, as if no filter had been given; an unknown
    body field was already refused. Each list refuses a name it does not take, naming the ones it does."""
    world.publish(TIMER)
    wf = world.start("cool-off")
    for path in (f"{NS}/workflows?stauts=NEEDS_REVIEW", f"{NS}/workflows/{wf}/events?cursor=5",
                 f"{NS}/workflows/{wf}/signals?after=sig_1", f"{NS}/audit?workflow=wf_1"):
        result = client.simulate_get(path.split("?")[0], query_string=path.split("?")[1], headers=auth(world.admin))
        body = problem(result, 422, "VALIDATION_FAILED")
        assert [e["code"] for e in body["errors"]] == ["UNKNOWN_FIELD"], path
    listed = client.simulate_get(f"{NS}/workflows", query_string="status=RUNNING", headers=auth(world.token))
    assert listed.status_code == 200 and [i["workflow_id"] for i in listed.json["items"]] == [wf]


def test_R16_a_database_dropped_or_left_empty_under_a_running_api_is_unavailable_never_an_internal_error(client, db,
                                                                                                        world):
    """A running API whose database was dropped (a restore, a wrong name after a failover) answered every request,
    /readyz too, with 500 INTERNAL, and one whose database was there but empty (never migrated) with 500 as well:
    the SDK does not retry a 500, so webhook senders stopped retrying exactly when they should have. Each is the
    database at another level than this build's (R-16): 503 UNAVAILABLE with Retry-After, as documented."""
    from falcon import testing

    from api.app import create_app
    from api.http import Connections

    name = f"{db.dsn.database}_gone"
    db.execute(f"CREATE DATABASE `{name}`")  # empty: none of the engine's tables or routines
    connections = Connections(dataclasses.replace(db.dsn, database=name))
    other = testing.TestClient(create_app(connections))
    try:
        for path in (f"{NS}/apps", f"{NS}/workflows/wf_1", "/readyz"):
            got = other.simulate_get(path, headers=auth(world.admin))
            assert got.status_code == 503 and got.headers["retry-after"], (path, got.text)
            assert got.json["code"] == "UNAVAILABLE", got.text
        db.execute(f"DROP DATABASE `{name}`")  # and now gone
        for path in (f"{NS}/apps", "/readyz"):
            got = other.simulate_get(path, headers=auth(world.admin))
            assert got.status_code == 503 and got.json["code"] == "UNAVAILABLE", (path, got.text)
    finally:
        connections.discard()
        db.execute(f"DROP DATABASE IF EXISTS `{name}`")


def test_R16_a_column_or_a_routine_not_this_builds_is_unavailable_never_an_internal_error(db, world):
    """A database part-way between two levels (a migration rolled back, a routine being installed again, a node of
    another build) lacks a column or has a routine of other parameters: the API answered 500 INTERNAL on 1054 and
    1318, which the SDK does not retry. Each is the database at another level than this build's (R-16): 503."""
    from falcon import testing

    from api.app import create_app
    from api.http import Connections
    from procedures import installer

    other = dataclasses.replace(db.dsn, database=f"{db.dsn.database}_between")
    installer.migrate(other, test_clock=True)
    with dbmod.connect(other) as conn:
        admin = routines.namespace_bootstrap(conn, "acme")["token"]
    connections = Connections(other)
    client = testing.TestClient(create_app(connections))
    try:
        assert client.simulate_get(f"{NS}/apps", headers=auth(admin)).status_code == 200
        with dbmod.connect(other) as conn, conn.cursor() as cur:
            cur.execute("ALTER TABLE weave_apps RENAME COLUMN max_in_flight TO quota")  # 1054 for this build
        got = client.simulate_get(f"{NS}/apps", headers=auth(admin))
        assert got.status_code == 503 and got.json["code"] == "UNAVAILABLE" and got.headers["retry-after"], got.text
        assert "a `weave migrate` may be running" in got.json["detail"], got.text
        with dbmod.connect(other) as conn, conn.cursor() as cur:
            cur.execute("ALTER TABLE weave_apps RENAME COLUMN quota TO max_in_flight")
            cur.execute("DROP PROCEDURE weave_app_list")
            cur.execute("CREATE PROCEDURE weave_app_list(IN in_token VARCHAR(512)) SELECT 1")  # 1318 for this build
        got = client.simulate_get(f"{NS}/apps", headers=auth(admin))
        assert got.status_code == 503 and got.json["code"] == "UNAVAILABLE", got.text
    finally:
        connections.discard()
        db.execute(f"DROP DATABASE IF EXISTS `{other.database}`")
