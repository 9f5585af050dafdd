"""HTTP conventions a generated client, schemathesis or a proxy relies on: operation ids and tags, request
schemas that say what validation enforces, query values, auth and method headers, HEAD, no caching, and
every refusal in one problem+json shape listing every invalid field. Also the hostile-input rules of the
edge: an unknown field is refused instead of silently dropped (R-18: nothing stalls silently), and text that
is not text is a 422 naming the field, never a 500."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from api import schemas
from api.openapi import document
from tests.api.conftest import auth

NS = "/v1/namespaces/acme"
FLOW = {"name": "cool-off", "steps": [{"key": "wait", "type": "TIMER", "delay_ms": 60_000}]}
SIGNAL_FLOW = {"name": "approval", "steps": [
    {"key": "approval", "type": "SIGNAL", "signal": {"name": "approval.decided", "payload_version": "1"},
     "correlation": "$.input.order_id", "timeout_ms": 3_600_000}]}


def problem(result, status: int) -> dict:
    assert result.status_code == status, result.text
    assert result.headers["content-type"].startswith("application/problem+json")
    return result.json


def fields(body: dict) -> dict[str, str]:
    return {e["field"]: e["code"] for e in body["errors"]}


def start(client, world, key: str = "k1", **over):
    body = {"definition": "cool-off", "app": "billing", "input": {"order_id": "o1"}, "deadline_ms": 3_600_000, **over}
    return client.simulate_post(f"{NS}/workflows", headers=auth(world.token, key), json=body)


@pytest.fixture
def flows(client, world):
    for flow in (FLOW, SIGNAL_FLOW):
        assert client.simulate_post(f"{NS}/definitions", headers=auth(world.admin), json=flow).status_code in (200, 201)
    return client


def test_every_operation_has_a_unique_operation_id_and_a_tag():
    ops = [op for item in document()["paths"].values() for op in item.values()]
    ids = [op["operationId"] for op in ops]
    assert len(ids) == len(set(ids)) and all(op.get("tags") for op in ops)
    assert "reactivate_step" in ids and "start_workflow" in ids and "send_signal" in ids


def test_every_request_body_refuses_unknown_fields_and_is_the_schema_the_edge_enforces():
    doc = document()
    for item in doc["paths"].values():
        for op in item.values():
            if "requestBody" not in op:
                continue
            ref = op["requestBody"]["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[-1]
            if ref == "DefinitionDocument":  # validated by the definition model, which refuses unknown keys too
                continue
            assert doc["components"]["schemas"][ref] is schemas.BODIES[ref]
            assert schemas.BODIES[ref]["additionalProperties"] is False


def test_R18_an_unknown_field_is_a_422_naming_it_instead_of_a_silent_default(flows, world):
    body = problem(start(flows, world, inputs={"order_id": "o1"}), 422)
    assert fields(body) == {"inputs": "UNKNOWN_FIELD"}
    listed = flows.simulate_get(f"{NS}/workflows", headers=auth(world.token)).json
    assert listed["items"] == []  # nothing was started with input {}


POSTS = [("/workflows", "StartRequest"), ("/workflows/wf_1/signals", "SignalRequest"),
         ("/workflows/wf_1/pause", "ReasonRequest"), ("/workflows/wf_1/resume", "ReasonRequest"),
         ("/workflows/wf_1/cancel", "ReasonRequest"), ("/workflows/wf_1/deadline", "DeadlineRequest"),
         ("/workflows/wf_1/retry", "ReasonRequest"),
         ("/workflows/wf_1/steps/wait/reactivate", "ReactivateRequest"),
         ("/workflows/wf_1/steps/wait/continue", "ContinueRequest"),
         ("/workflows/wf_1/steps/wait/resolve", "ResolveRequest"),
         ("/apps", "AppRequest"), ("/queues", "QueueRequest"), ("/credentials", "CredentialRequest")]


@pytest.mark.parametrize("path, schema", POSTS, ids=[p for p, _ in POSTS])
def test_every_endpoint_names_an_unknown_field(flows, world, path, schema):
    token = world.admin if path in ("/apps", "/queues", "/credentials") else world.token
    body = problem(flows.simulate_post(NS + path, headers=auth(token, "u1"), json={"surprise": 1}), 422)
    assert fields(body)["surprise"] == "UNKNOWN_FIELD"
    required = schemas.BODIES[schema]["required"]
    assert set(required) <= set(fields(body)), "every missing field is listed too"


def test_a_422_lists_every_invalid_field_not_only_the_first(flows, world):
    result = flows.simulate_post(f"{NS}/workflows", headers=auth(world.token, "k9"),
                                 json={"definition": 5, "deadline_ms": "soon", "app": "billing"})
    assert fields(problem(result, 422)) == {"definition": "DEFINITION_NOT_FOUND", "deadline_ms": "DEADLINE_INVALID"}


def test_an_integral_number_is_an_integer_as_json_schema_says(flows, world):
    assert start(flows, world, deadline_ms=3_600_000.0).status_code == 201


@pytest.mark.parametrize("field", ["correlation_key", "reason"])
def test_S1_a_lone_surrogate_in_a_signal_field_is_a_422_naming_it(flows, world, field):
    wf = start(flows, world, definition="approval").json["workflow_id"]
    fields_ = {"name": "approval.decided", "payload_version": "1", "target_step_key": "approval",
               "target_activation_sequence": 1, "correlation_key": "o1", "reason": "ok", "payload": {}}
    text = json.dumps(fields_).replace(f'"{field}": "{fields_[field]}"', f'"{field}": "\\ud800"')
    result = flows.simulate_post(f"{NS}/workflows/{wf}/signals", body=text,
                                 headers={**auth(world.token, "s1"), "Content-Type": "application/json"})
    assert fields(problem(result, 422)) == {field: "INVALID_TEXT"}


@pytest.mark.parametrize("field, text", [("input", '{"order_id": "\\ud800"}'), ("business_key", '"\\udc00x"')])
def test_a_lone_surrogate_in_a_start_is_a_422_naming_the_field(flows, world, field, text):
    body = '{"definition": "cool-off", "app": "billing", "deadline_ms": 3600000, "' + field + '": ' + text + "}"
    result = flows.simulate_post(f"{NS}/workflows", body=body,
                                 headers={**auth(world.token, "s2"), "Content-Type": "application/json"})
    assert {f.split(".")[0]: c for f, c in fields(problem(result, 422)).items()} == {field: "INVALID_TEXT"}


def test_Z4_S1_a_body_of_many_problems_at_long_paths_lists_the_first_and_counts_the_rest(client, world):
    """Sent with a token that names no credential: the body is read before the token is checked, and it held some
    2,000 lone surrogates 150 levels deep under 1,000-character keys, each at a path of 150,000 characters. Listing
    every one took gigabytes; the first is listed whole and the detail counts the others."""
    key = "k" * 1_000
    body = ('{"definition": "cool-off", "app": "billing", "deadline_ms": 1000, "input": ' + f'{{"{key}": ' * 150
            + "[" + ", ".join(['"\\ud800"'] * 2_000) + "]" + "}" * 150 + "}")
    assert len(body) < 307_200
    result = client.simulate_post(f"{NS}/workflows", body=body, headers={
        **auth("not-a-token", "k-many"), "Content-Type": "application/json"})
    answer = problem(result, 422)
    assert [(e["field"], e["code"]) for e in answer["errors"]] == [("input." + ".".join([key] * 150) + "[0]",
                                                                     "INVALID_TEXT")]
    assert answer["detail"] == "the body is not valid JSON: 2,000 problems, of which only the first one is listed"


def test_Z4_M2_a_definition_of_many_problems_at_long_paths_lists_the_first_and_counts_the_rest(client, world):
    """A definition is checked before the token too: 8,000 bad expressions 27 levels under 1,000-character keys
    (147 KB) made 16,000 problems, each listed with its 27,000-character path (a gigabyte). The first are listed
    within the parser's limits, and the detail counts them all."""
    inner: object = ["$.input.a b"] * 8_000
    for _ in range(27):
        inner = {"k" * 1_000: inner}
    result = client.simulate_post(f"{NS}/definitions", json={"name": "x", "steps": [{
        "key": "a", "type": "TASK", "queue": "q", "handler": "h", "handler_version": "1", "input": inner}]},
        headers=auth("not-a-token"))
    answer = problem(result, 422)
    listed = len(answer["errors"])
    assert 1 <= listed <= 100 and answer["errors"][0]["code"] == "BAD_EXPRESSION"
    told = "one is" if listed == 1 else f"{listed} are"
    assert answer["detail"] == f"the definition is not valid: 16,000 problems, of which only the first {told} listed"


OUTSIDE_THE_CALENDAR = ["9999-12-31T23:00:00-05:00", "0001-01-01T00:00:00+05:00"]


@pytest.mark.parametrize("at", OUTSIDE_THE_CALENDAR)
def test_C4_a_time_whose_zone_moves_it_outside_the_calendar_is_a_422_not_a_500(flows, world, at):
    """A time with a zone is kept in UTC: 9999-12-31T23:00:00-05:00 is in year 10000 there and 0001-01-01T00:00:00+05:00
    in year 0, neither of which the engine (or Python) can hold. The start, the deadline action and a credential's
    expiry each answered 500 INTERNAL for it; each is a 422 naming the field, and nothing is written."""
    before = world.db.table_counts()
    result = flows.simulate_post(f"{NS}/workflows", headers=auth(world.token, "far"), json={
        "definition": "cool-off", "app": "billing", "input": {"order_id": "o1"}, "deadline_at": at})
    assert fields(problem(result, 422)) == {"deadline_at": "DEADLINE_INVALID"}
    credential = flows.simulate_post(f"{NS}/credentials", headers=auth(world.admin), json={
        "actor": "contractor", "scopes": ["workflows:read"], "expires_at": at})
    assert list(fields(problem(credential, 422))) == ["expires_at"]
    assert world.db.table_counts() == before
    wf = start(flows, world).json["workflow_id"]
    deadline = world.instance(wf)["deadline_at"]
    moved = flows.simulate_post(f"{NS}/workflows/{wf}/deadline", headers=auth(world.token, "d1"),
                                json={"reason": "more time", "deadline_at": at})
    assert fields(problem(moved, 422)) == {"deadline_at": "DEADLINE_INVALID"}
    assert world.instance(wf)["deadline_at"] == deadline


def test_empty_query_values_and_bad_cursors_are_422_on_every_list(flows, world):
    wf = start(flows, world).json["workflow_id"]
    for path, query in [("/workflows", "status="), ("/workflows", "cursor=garbage"), ("/workflows", "limit="),
                        (f"/workflows/{wf}/events", "after="), (f"/workflows/{wf}/signals", "cursor=garbage"),
                        (f"/workflows/{wf}/signals", "status=")]:
        result = flows.simulate_get(NS + path, query_string=query, headers=auth(world.token))
        assert query.split("=")[0] in fields(problem(result, 422)), (path, query)


def test_a_list_that_fills_its_last_page_exactly_has_no_trailing_empty_page(flows, world):
    for i in range(4):
        start(flows, world, key=f"p{i}")
    first = flows.simulate_get(f"{NS}/workflows", params={"limit": "2"}, headers=auth(world.token)).json
    second = flows.simulate_get(f"{NS}/workflows", params={"limit": "2", "cursor": first["next_cursor"]},
                                headers=auth(world.token)).json
    assert len(first["items"]) == len(second["items"]) == 2 and second["next_cursor"] is None


def test_401_says_how_to_authenticate(flows):
    result = flows.simulate_get(f"{NS}/workflows")
    assert problem(result, 401)["code"] == "UNAUTHENTICATED"
    assert result.headers["www-authenticate"].startswith("Bearer")
    bad = flows.simulate_get(f"{NS}/workflows", headers=auth("wv_unknown"))
    assert problem(bad, 401) and bad.headers["www-authenticate"].startswith("Bearer")


@pytest.mark.parametrize("method, path", [("TRACE", "/healthz"), ("DELETE", f"{NS}/workflows"),
                                          ("PUT", f"{NS}/workflows/wf_1/pause"), ("TRACE", f"{NS}/apps")])
def test_every_405_says_which_methods_are_allowed(flows, method, path):
    result = flows.simulate_request(method, path)
    assert problem(result, 405)["code"] == "METHOD_NOT_ALLOWED"
    assert "allow" in result.headers and method not in result.headers["allow"]


def test_head_answers_on_every_get_resource_without_a_body(flows, world):
    wf = start(flows, world).json["workflow_id"]
    for path, item in document()["paths"].items():
        if "get" not in item:
            continue
        concrete = (path.replace("{ns}", "acme").replace("{workflow_id}", wf).replace("{name}", "cool-off")
                    .replace("{version}", "1").replace("{step_key}", "wait").replace("{signal_id}", "sig_1"))
        got = flows.simulate_get(concrete, headers=auth(world.token))
        head = flows.simulate_head(concrete, headers=auth(world.token))
        assert head.status_code == got.status_code and head.content == b"", path


def test_no_answer_is_cacheable_least_of_all_one_with_a_token(flows, world):
    made = flows.simulate_post(f"{NS}/credentials", headers=auth(world.admin),
                               json={"actor": "ci", "scopes": ["workflows:read"]})
    assert made.status_code == 201 and made.json["token"] and made.headers["cache-control"] == "no-store"
    for result in (flows.simulate_get("/healthz"), flows.simulate_get(f"{NS}/workflows")):
        assert result.headers["cache-control"] == "no-store"


STRING_FIELDS = [(path, schema, name) for path, schema in POSTS
                 for name, prop in schemas.BODIES[schema]["properties"].items()
                 if prop.get("type") == "string" or prop == {}]


@pytest.mark.parametrize("path, schema, name", STRING_FIELDS, ids=[f"{p} {n}" for p, _, n in STRING_FIELDS])
def test_no_string_in_any_post_field_gives_a_server_error(flows, world, path, schema, name):
    """A property over every string field of every POST: whatever text arrives, the answer is never 5xx."""
    token = world.admin if path in ("/apps", "/queues", "/credentials") else world.token
    base = {"definition": "cool-off", "app": "billing", "deadline_ms": 3_600_000, "name": "x", "reason": "r",
            "payload_version": "1", "target_step_key": "wait", "target_activation_sequence": 1,
            "correlation_key": "c", "payload": None, "output": None, "max_in_flight": 1, "capacity": 1,
            "actor": "a", "scopes": ["workflows:read"], "extend_ms": 1, "extra_rounds": 1}
    allowed = schemas.BODIES[schema]["properties"]
    text = st.text(alphabet=st.characters(codec=None), max_size=40) | st.sampled_from(
        ["\\ud800", "\\udfff", "\\u0000", "é" * 300, " ", "", "$.input", "\U0001f600"])

    @given(value=text, raw=st.booleans())
    @settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True,
              database=None)
    def run(value: str, raw: bool) -> None:
        body = {k: v for k, v in base.items() if k in allowed and k != name}
        encoded = json.dumps(body)[:-1] + (", " if body else "") + json.dumps(name) + ": " + (
            f'"{value}"' if raw and '"' not in value and "\\\\" not in value else json.dumps(value)) + "}"
        result = flows.simulate_post(NS + path, body=encoded, headers={
            **auth(token, "prop-1"), "Content-Type": "application/json"})
        assert result.status_code < 500, result.text

    run()


def test_a_list_without_a_limit_gets_the_default_its_openapi_parameter_declares():
    """The defaults (50 workflows, 100 events or signals a page) are the query schemas' own, so the parameter check
    and the OpenAPI document say the same."""
    from falcon import testing

    ops = {m["operationId"]: m for op in document()["paths"].values() for m in op.values() if isinstance(m, dict)}
    for operation, default in (("list_workflows", 50), ("list_events", 100), ("list_signals", 100)):
        limit, = (p for p in ops[operation]["parameters"] if p["name"] == "limit")
        assert limit["schema"]["default"] == default
        assert schemas.query(testing.create_req(), operation)["limit"] == default
        assert schemas.query(testing.create_req(query_string="limit=7"), operation)["limit"] == 7
