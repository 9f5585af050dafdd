"""The OpenAPI 3.1 document: the single source of the HTTP reference and of schemathesis runs.
A test walks the app's routes and this document together, so neither can drift from the other."""

from __future__ import annotations

from typing import Any

from procedures.errors import http_codes

from . import schemas
from .http import IDEMPOTENCY_KEY_MAX

TIME = {"type": "string", "format": "date-time"}
NULLABLE_TIME = {"type": ["string", "null"], "format": "date-time"}
ANY: dict[str, Any] = {}


def _ref(name: str) -> dict:
    return {"$ref": f"#/components/schemas/{name}"}


_PROBLEM_TEXTS = {401: "missing, unknown or disabled credential", 403: "scope or queue not allowed",
                  404: "not found (or in another namespace)", 405: "method not allowed; `Allow` lists the methods",
                  409: "conflict with the current state", 413: "body larger than 300 KiB",
                  415: "body is not application/json", 422: "validation failed (errors[].code says which rule)",
                  503: "database unavailable; retry after `Retry-After` seconds"}
_HEADERS = {401: {"WWW-Authenticate": {"schema": {"type": "string", "pattern": "^Bearer( |$)"}}},
            405: {"Allow": {"schema": {"type": "string"}}},
            503: {"Retry-After": {"schema": {"type": "string", "pattern": "^[0-9]+$"}}}}


def _problem(*statuses: int) -> dict:
    return {str(s): {"description": _PROBLEM_TEXTS[s], **({"headers": _HEADERS[s]} if s in _HEADERS else {}),
                     "content": {"application/problem+json": {"schema": _ref("Problem")}}}
            for s in statuses}


LOCATION = {"Location": {"description": "the path of what was created", "schema": {"type": "string"}}}
REPLAYED = {"Idempotent-Replayed": {"schema": {"type": "string", "enum": ["true"]}}}


def _ok(status: int, schema: dict, description: str = "success", replay: bool = False,
        location: bool = False) -> dict:
    answer: dict[str, Any] = {"description": description, "content": {"application/json": {"schema": schema}}}
    if location:
        answer["headers"] = LOCATION
    out = {str(status): answer}
    if replay:
        out["200"] = {"description": "replay of the first answer", "headers": REPLAYED,
                      "content": {"application/json": {"schema": schema}}}
    return out


def _items(name: str) -> dict:
    """A page of a configuration list, by name (credentials: oldest first)."""
    return {"type": "object", "required": ["items", "next_cursor"],
            "properties": {"items": {"type": "array", "items": _ref(name)},
                           "next_cursor": {"type": ["string", "null"],
                                           "description": "the cursor of the next page; null on the last"}}}


NS = {"name": "ns", "in": "path", "required": True, "schema": {"type": "string"}}
WF = {"name": "workflow_id", "in": "path", "required": True, "schema": {"type": "string"}}
STEP = {"name": "step_key", "in": "path", "required": True, "schema": {"type": "string"}}
IDEMPOTENCY = {"name": "Idempotency-Key", "in": "header", "required": True,
               "schema": {"type": "string", "minLength": 1, "maxLength": IDEMPOTENCY_KEY_MAX,
                          "pattern": "^[!-~]+$"}}
OPTIONAL_IDEMPOTENCY = {**IDEMPOTENCY, "required": False,
                        "description": "a retry with the key answers the key's first answer again, and changes "
                                       "nothing, even after other requests"}
COMMON_ERRORS = (401, 403, 404, 503)


def _op(op_id: str, tag: str, summary: str, scope: str, responses: dict, *, params: list | None = None,
        body: dict | None = None, errors: tuple[int, ...] = COMMON_ERRORS) -> dict:
    op: dict[str, Any] = {"operationId": op_id, "tags": [tag], "summary": summary,
                          "description": f"Scope: `{scope}`.", "security": [{"bearer": []}],
                          "parameters": [NS, *(params or [])],
                          "responses": {**responses, **_problem(*errors)}}
    if body is not None:
        op["requestBody"] = {"required": True, "content": {"application/json": {"schema": body}}}
    return op


def _list(op_id: str, tag: str, summary: str, scope: str, page: dict, *path: dict) -> dict:
    """A list's GET: ``page`` answered, the query parameters of ``op_id`` (after the ``path`` parameters), 422 for a
    query it refuses."""
    return _op(op_id, tag, summary, scope, _ok(200, page), params=[*path, *schemas.query_parameters(op_id)],
               errors=(*COMMON_ERRORS, 422))


def _control(op_id: str, summary: str, body: str, scope: str = "workflows:control", *, step: bool = False) -> dict:
    params = [WF, *([STEP] if step else []), IDEMPOTENCY]
    answer = {"description": "the instance after the action (or a replay)",
              "headers": REPLAYED, "content": {"application/json": {"schema": _ref("Instance")}}}
    tag = "recovery" if scope == "workflows:review" else "control"
    return _op(op_id, tag, summary, scope, {"200": answer}, params=params, body=_ref(body),
               errors=(*COMMON_ERRORS, 409, 413, 415, 422))


def document() -> dict:
    schemas_: dict[str, Any] = {
        "Problem": {"type": "object", "required": ["type", "title", "status", "code", "detail", "errors"],
                    "properties": {"type": {"type": "string"}, "title": {"type": "string"},
                                   "status": {"type": "integer"},
                                   "code": {"type": "string", "enum": sorted(http_codes())},
                                   "detail": {"type": "string"},
                                   "errors": {"type": "array", "items": {"type": "object", "properties": {
                                       "field": {"type": ["string", "null"]}, "code": {"type": "string"},
                                       "message": {"type": ["string", "null"]}}}}}},
        "DefinitionDocument": {
            "type": "object", "required": ["name", "steps"], "additionalProperties": False,
            "description": "A workflow definition (docs/concepts.md). Beyond this shape, publishing checks what a "
                           "schema cannot state: each step's fields by type, after-references and cycles, expression "
                           "syntax, and that its queues exist; every problem is listed at once in a 422.",
            "properties": {
                "name": {"type": "string", "pattern": "^[A-Za-z0-9_.:-]{1,128}$"},
                "steps": {"type": "array", "minItems": 1, "maxItems": 256, "items": {
                    "type": "object", "required": ["key", "type"], "properties": {
                        "key": {"type": "string"}, "type": {"type": "string",
                                                            "enum": ["TIMER", "POLL", "SIGNAL", "TASK"]},
                        "after": {"type": "array", "items": {"type": "string"}}}}}}},
        "Published": {"type": "object", "required": ["name", "version", "digest"], "properties": {
            "name": {"type": "string"}, "version": {"type": "integer"}, "digest": {"type": "string"}}},
        "Definition": {"type": "object", "required": ["name", "version", "digest", "steps"], "properties": {
            "name": {"type": "string"}, "version": {"type": "integer"}, "digest": {"type": "string"},
            "steps": {"type": "array", "items": {"type": "object"}}, "created_at": TIME}},
        "Wait": {"type": ["object", "null"], "properties": {
            "kind": {"type": "string"}, "status": {"type": "string"}, "due_at": TIME, "deadline_at": TIME,
            "winner_signal_id": {"type": ["string", "null"]}, "settled_at": NULLABLE_TIME}},
        "Round": {"type": "object", "properties": {
            "number": {"type": "integer"}, "task_id": {"type": "string"}, "outcome": {"type": "string"},
            "result": ANY, "result_at": NULLABLE_TIME,
            "created_at": {**TIME, "description": "when the round was created (in a page of rounds)"}}},
        "Poll": {"type": ["object", "null"], "properties": {
            "state": {"type": "string", "enum": ["IN_FLIGHT", "WAITING", "SETTLED", "STOPPED"]},
            "rounds_used": {"type": "integer"}, "max_rounds": {"type": "integer"},
            "next_poll_at": NULLABLE_TIME, "poll_deadline": NULLABLE_TIME,
            "current_task_id": {"type": ["string", "null"]},
            "rounds": {"type": "array", "items": _ref("Round"),
                       "description": "the latest 50 rounds, by number; GET .../steps/{step_key}/rounds reads them "
                                      "all"}}},
        "RoundPage": {"type": "object", "required": ["step_key", "activation_sequence", "rounds", "next_after"],
                      "properties": {
            "step_key": {"type": "string"},
            "activation_sequence": {"type": ["integer", "null"],
                                    "description": "null while the step was never activated (no rounds)"},
            "latest_activation_sequence": {"type": ["integer", "null"],
                                           "description": "the step's latest activation"},
            "poll_state": {"type": ["string", "null"]}, "rounds_used": {"type": ["integer", "null"]},
            "max_rounds": {"type": ["integer", "null"]},
            "rounds": {"type": "array", "items": _ref("Round")},
            "next_after": {"type": "integer", "description": "the last round of this page: ask after it for more"},
            "more": {"type": "boolean", "description": "whether rounds follow the last of this page"}}},
        "Step": {"type": "object", "required": ["key", "type", "status", "activation_sequence"], "properties": {
            "key": {"type": "string"}, "type": {"type": "string", "enum": ["TIMER", "POLL", "SIGNAL", "TASK"]},
            "status": {"type": "string", "enum": ["PENDING", "ACTIVE", "SUCCEEDED", "NEEDS_REVIEW", "CANCELLED"]},
            "activation_sequence": {"type": "integer"}, "output": ANY, "started_at": NULLABLE_TIME,
            "wait": _ref("Wait"), "final_wait": _ref("Wait"), "poll": _ref("Poll")}},
        "ReviewReason": {"type": "object", "required": ["code"], "properties": {
            "code": {"type": "string"}, "step_key": {"type": ["string", "null"]},
            "activation_sequence": {"type": ["integer", "null"]}, "detail": ANY, "opened_at": TIME}},
        "Instance": {"type": "object", "required": ["workflow_id", "namespace", "app", "definition", "status",
                                                    "control", "gate", "deadline_at", "business_key", "input",
                                                    "review_reasons", "created_at", "updated_at", "steps"],
                     "properties": {
            "workflow_id": {"type": "string"}, "namespace": {"type": "string"}, "app": {"type": "string"},
            "definition": {"type": "object", "properties": {"name": {"type": "string"},
                                                            "version": {"type": "integer"}}},
            "status": {"type": "string", "enum": ["RUNNING", "SUCCEEDED", "NEEDS_REVIEW", "CANCELLING",
                                                  "CANCELLED"]},
            "control": {"type": "string", "enum": ["ACTIVE", "PAUSED"]},
            "gate": {"type": "string", "enum": ["OPEN", "CLOSED"]}, "deadline_at": TIME,
            "business_key": {"type": ["string", "null"]}, "input": ANY,
            "review_reasons": {"type": "array", "items": _ref("ReviewReason")},
            "deferred": {"oneOf": [{"type": "null"}, {
                "type": "object", "description": "The longest-standing deferred check (R-18): new work waits for "
                "something that can clear by itself (pause, quota, capacity, a disabled identity or app).",
                "required": ["reason", "since", "next_check_at", "attempts"], "properties": {
                    "reason": {"type": "string"}, "step_key": {"type": ["string", "null"]}, "since": TIME,
                    "next_check_at": TIME, "attempts": {"type": "integer"},
                    "detail": {"type": ["string", "null"]}}}]},
            "created_at": TIME, "updated_at": TIME, "finished_at": NULLABLE_TIME,
            "steps": {"type": "array", "items": _ref("Step")},
            "checkpoints": {"type": "array", "items": _ref("Checkpoint")}}},
        "Checkpoint": {"type": "object", "required": ["kind", "due_at", "available_at"], "properties": {
            "step_key": {"type": ["string", "null"]}, "kind": {"type": "string"}, "due_at": TIME,
            "available_at": TIME, "attempts": {"type": "integer"}, "last_error": {"type": ["string", "null"]},
            "deferred_reason": {"type": ["string", "null"]}}},
        "InstanceSummary": {"type": "object", "required": ["workflow_id", "status"], "properties": {
            "workflow_id": {"type": "string"}, "definition": {"type": "object"}, "status": {"type": "string"},
            "control": {"type": "string"}, "gate": {"type": "string"}, "deadline_at": TIME,
            "business_key": {"type": ["string", "null"]}, "created_at": TIME, "updated_at": TIME}},
        "InstancePage": {"type": "object", "required": ["items", "next_cursor"], "properties": {
            "items": {"type": "array", "items": _ref("InstanceSummary")},
            "next_cursor": {"type": ["string", "null"]}}},
        "Event": {"type": "object", "required": ["seq", "type", "occurred_at", "data"], "properties": {
            "seq": {"type": "integer"}, "type": {"type": "string"}, "step_key": {"type": ["string", "null"]},
            "activation_sequence": {"type": ["integer", "null"]}, "occurred_at": TIME, "data": ANY}},
        "EventPage": {"type": "object", "required": ["events", "next_after"], "properties": {
            "events": {"type": "array", "items": _ref("Event")}, "next_after": {"type": "integer"}}},
        "Receipt": {"type": "object", "required": ["signal_id", "workflow_id", "idempotency_key", "status",
                                                   "disposition", "accepted_at", "expires_at",
                                                   "request_digest"], "properties": {
            "signal_id": {"type": "string"}, "workflow_id": {"type": "string"},
            "idempotency_key": {"type": "string"}, "status": {"type": "string", "enum": ["PENDING", "REJECTED"]},
            "disposition": {"type": ["string", "null"]}, "accepted_at": TIME, "expires_at": TIME,
            "request_digest": {"type": "string"}}},
        "Signal": {"type": "object", "required": ["signal_id", "workflow_id", "status"], "properties": {
            "signal_id": {"type": "string"}, "workflow_id": {"type": "string"},
            "idempotency_key": {"type": "string"}, "name": {"type": "string"},
            "payload_version": {"type": "string"}, "target_step_key": {"type": "string"},
            "target_activation_sequence": {"type": "integer"}, "correlation_key": {"type": "string"},
            "payload": ANY, "reason": {"type": "string"}, "evidence_ref": {"type": ["string", "null"]},
            "actor": {"type": "string"},
            "status": {"type": "string", "enum": ["PENDING", "CONSUMED", "REJECTED", "EXPIRED"]},
            "disposition": {"type": ["string", "null"]}, "accepted_at": TIME, "expires_at": TIME,
            "consumed_at": {**NULLABLE_TIME, "description": "when the signal left PENDING: consumed by its wait, "
                                                            "or rejected or expired (status says which); null "
                                                            "while PENDING"}}},
        "SignalPage": {"type": "object", "required": ["items", "next_cursor"], "properties": {
            "items": {"type": "array", "items": _ref("Signal")}, "next_cursor": {"type": ["string", "null"]}}},
        "Explain": {"type": "object", "required": ["step_key", "wait", "signals", "timer", "poll", "task", "blockers"],
                    "properties": {
            "step_key": {"type": "string"}, "type": {"type": "string", "enum": ["TIMER", "POLL", "SIGNAL", "TASK"]},
            "status": {"type": "string"}, "instance_status": {"type": "string"}, "control": {"type": "string"},
            "instance_deadline_at": TIME, "now_at": {**TIME, "description": "the engine's clock as it answered"},
            "wait": {"type": "object"},
            "open_review_codes": {"type": "array", "items": {"type": "string"}},
            "timer": {"type": ["object", "null"], "description": "TIMER: due_at, delay_ms, planned_due_at, truncated "
                      "(capped by the instance deadline), lateness_ms so far"},
            "poll": {"type": ["object", "null"], "description": "POLL: state, rounds_used, max_rounds, next_poll_at, "
                     "poll_deadline, last_outcome, stop_reason"},
            "task": {"type": ["object", "null"], "description": "the current task of a TASK or POLL step: task_id, "
                     "status, attempts_used, max_attempts, lease_holder, lease_expires_at, next_retry_at, "
                     "attempt_started_at, deadline_at, cancel_requested, last_error, late_reports (the newest "
                     "five reports that came after their attempt had ended, stored without effect: attempt_id, "
                     "attempt_no, worker_id, kind SUCCEEDED with its result or FAILED with its error and retryable, "
                     "reported_at)"},
            "blockers": {"type": "array", "description": "what holds the instance or step back: PAUSED, GATE_CLOSED, "
                         "DEFERRED (with reason, since, next_check_at, and as detail why: for room, also how many wait "
                         "before it in the app's or queue's line), MUTEX_HELD (the current task waits for its "
                         "mutex key, held since `since`; detail {mutex_key}), TASK_OVERDUE (its attempt runs past "
                         "the task's deadline `since`, which stops no handler: it ends when the handler reports or "
                         "its lease, `next_check_at`, runs out unrenewed; detail {task_id, worker_id, "
                         "attempt_started_at, cancel_requested}) and each open REVIEW reason",
                         "items": {"type": "object", "properties": {
                             "blocker": {"type": "string",
                                         "enum": ["PAUSED", "GATE_CLOSED", "DEFERRED", "MUTEX_HELD", "TASK_OVERDUE",
                                                  "REVIEW"]},
                             "reason": {"type": ["string", "null"]}, "since": NULLABLE_TIME,
                             "next_check_at": NULLABLE_TIME, "detail": ANY}}},
            "signals": {"type": "array", "description": "the latest 100 signals that targeted the step, in "
                        "acceptance order (GET .../signals lists them all)",
                        "items": {"type": "object", "properties": {
                            "signal_id": {"type": "string"}, "why": {"type": "string"}, "detail": ANY}}},
            "signals_total": {"type": "integer", "description": "every signal that targeted the step"}}},
        "App": {"type": "object", "required": ["name", "max_in_flight", "status"], "properties": {
            "name": {"type": "string"}, "max_in_flight": {"type": "integer"},
            "status": {"type": "string", "enum": ["ACTIVE", "DISABLED"]}}},
        "Queue": {"type": "object", "required": ["name", "capacity"], "properties": {
            "name": {"type": "string"}, "capacity": {"type": "integer"}}},
        "DefinitionSummary": {"type": "object", "required": ["name", "latest_version", "digest", "versions"],
                              "properties": {"name": {"type": "string"}, "latest_version": {"type": "integer"},
                                             "digest": {"type": "string"}, "versions": {"type": "integer"},
                                             "queues": {"type": "array", "items": {"type": "string"}},
                                             "created_at": TIME}},
        "AppState": {"type": "object", "required": ["name", "max_in_flight", "status", "in_flight"], "properties": {
            "name": {"type": "string"}, "max_in_flight": {"type": "integer"},
            "status": {"type": "string", "enum": ["ACTIVE", "DISABLED"]},
            "in_flight": {"type": "integer", "description": "tasks QUEUED or RUNNING now"},
            "waiting": {"type": "integer", "description": "work deferred for the app: in its line for room "
                                                          "(QUOTA_FULL), or for it to be enabled (APP_DISABLED)"},
            "created_at": TIME, "updated_at": TIME}},
        "QueueState": {"type": "object", "required": ["name", "capacity", "queued", "running"], "properties": {
            "name": {"type": "string"}, "capacity": {"type": "integer"}, "queued": {"type": "integer"},
            "running": {"type": "integer"},
            "waiting": {"type": "integer", "description": "work deferred in the queue's line for room (QUEUE_FULL)"},
            "created_at": TIME, "updated_at": TIME}},
        "CredentialState": {"type": "object", "required": ["credential_id", "actor", "scopes", "queues", "status"],
                            "description": "A credential as listed: never its token.", "properties": {
            "credential_id": {"type": "string"}, "actor": {"type": "string"},
            "scopes": {"type": "array", "items": {"type": "string"}},
            "queues": {"type": "array", "items": {"type": "string"}},
            "status": {"type": "string", "enum": ["ACTIVE", "DISABLED", "EXPIRED"],
                       "description": "EXPIRED: active, but past its expires_at"}, "created_at": TIME,
            "disabled_at": NULLABLE_TIME, "expires_at": NULLABLE_TIME}},
        "AuditRecord": {"type": "object", "required": ["audit_id", "workflow_id", "actor", "credential_id", "action",
                                                       "accepted_at", "details", "created_at"], "properties": {
            "audit_id": {"type": "string"}, "workflow_id": {"type": ["string", "null"]}, "actor": {"type": "string"},
            "credential_id": {"type": ["string", "null"], "description": "null for the engine's own decisions"},
            "action": {"type": "string"}, "idempotency_key": {"type": ["string", "null"]},
            "request_digest": {"type": ["string", "null"]}, "accepted_at": TIME, "deadline_at": NULLABLE_TIME,
            "reason": {"type": ["string", "null"]}, "details": ANY, "created_at": TIME}},
        "AuditPage": {"type": "object", "required": ["items", "next_cursor"], "properties": {
            "items": {"type": "array", "items": _ref("AuditRecord")}, "next_cursor": {"type": ["string", "null"]}}},
        "Disabled": {"type": "object", "required": ["credential_id", "actor", "status"], "properties": {
            "credential_id": {"type": "string"}, "actor": {"type": "string"},
            "status": {"type": "string", "enum": ["DISABLED"]}}},
        "Enabled": {"type": "object", "required": ["credential_id", "actor", "status"], "properties": {
            "credential_id": {"type": "string"}, "actor": {"type": "string"},
            "status": {"type": "string", "enum": ["ACTIVE"]}}},
        "Credential": {"type": "object", "required": ["credential_id", "actor", "scopes", "queues", "token"],
                       "properties": {"credential_id": {"type": "string"}, "actor": {"type": "string"},
                                      "scopes": {"type": "array", "items": {"type": "string"}},
                                      "queues": {"type": "array", "items": {"type": "string"}},
                                      "expires_at": NULLABLE_TIME,
                                      "token": {"type": ["string", "null"],
                                                "description": "null in a replay: a token is shown once"}}},
    }
    schemas_.update(schemas.BODIES)
    paths = {
        "/v1/namespaces/{ns}/definitions": {
            "post": _op("publish_definition", "definitions", "Publish a definition version", "definitions:publish",
                        {**_ok(201, _ref("Published"), "a new version", location=True),
                         "200": {"description": "same content as the latest version, or a replay of the key's first "
                                                "publish (with Idempotent-Replayed)",
                                 "headers": REPLAYED,
                                 "content": {"application/json": {"schema": _ref("Published")}}}},
                        params=[OPTIONAL_IDEMPOTENCY], body=_ref("DefinitionDocument"),
                        errors=(*COMMON_ERRORS, 409, 413, 415, 422)),
            "get": _list("list_definitions", "definitions", "List definitions by name, each with its latest version",
                         "workflows:read", _items("DefinitionSummary"))},
        "/v1/namespaces/{ns}/definitions/{name}": {"get": _op(
            "get_latest_definition", "definitions", "Read the latest version of a definition", "workflows:read",
            _ok(200, _ref("Definition")),
            params=[{"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}])},
        "/v1/namespaces/{ns}/definitions/{name}/versions/{version}": {"get": _op(
            "get_definition", "definitions", "Read a definition version", "workflows:read",
            _ok(200, _ref("Definition")),
            params=[{"name": "name", "in": "path", "required": True, "schema": {"type": "string"}},
                    {"name": "version", "in": "path", "required": True,
                     "schema": {"type": "integer", "minimum": 1, "maximum": 999_999_999}}])},
        "/v1/namespaces/{ns}/workflows": {
            "post": _op("start_workflow", "workflows", "Start a workflow instance",
                        "workflows:start (+ every queue of the definition)",
                        _ok(201, _ref("Instance"), "started", replay=True, location=True), params=[IDEMPOTENCY],
                        body=_ref("StartRequest"), errors=(*COMMON_ERRORS, 409, 413, 415, 422)),
            "get": _list("list_workflows", "workflows", "List instances, newest first", "workflows:read",
                         _ref("InstancePage"))},
        "/v1/namespaces/{ns}/workflows/{workflow_id}": {"get": _op(
            "get_workflow", "workflows", "Read an instance with its steps, waits, polls and review reasons",
            "workflows:read", _ok(200, _ref("Instance")), params=[WF])},
        "/v1/namespaces/{ns}/workflows/{workflow_id}/events": {"get": _list(
            "list_events", "workflows", "Read the event history (gap-free seq)", "workflows:read", _ref("EventPage"),
            WF)},
        "/v1/namespaces/{ns}/workflows/{workflow_id}/signals": {
            "post": _op("send_signal", "signals",
                        "Send a signal (S-1..S-9); a replay answers the first receipt byte-identical",
                        "workflows:signal (+ every queue of the definition)",
                        _ok(201, _ref("Receipt"), "accepted (PENDING) or stored as REJECTED", replay=True,
                            location=True),
                        params=[WF, IDEMPOTENCY], body=_ref("SignalRequest"),
                        errors=(*COMMON_ERRORS, 409, 413, 415, 422)),
            "get": _list("list_signals", "signals", "List the signals of an instance", "workflows:read",
                         _ref("SignalPage"), WF)},
        "/v1/namespaces/{ns}/workflows/{workflow_id}/signals/{signal_id}": {"get": _op(
            "get_signal", "signals", "Read a signal's current state", "workflows:read", _ok(200, _ref("Signal")),
            params=[WF, {"name": "signal_id", "in": "path", "required": True, "schema": {"type": "string"}}])},
        "/v1/namespaces/{ns}/workflows/{workflow_id}/steps/{step_key}/rounds": {"get": _list(
            "list_rounds", "workflows", "Read a POLL step's rounds, a page at a time (P-5)", "workflows:read",
            _ref("RoundPage"), WF, STEP)},
        "/v1/namespaces/{ns}/workflows/{workflow_id}/steps/{step_key}/explain": {"get": _op(
            "explain_step", "signals", "Why is this wait still open (S-17)", "workflows:read",
            _ok(200, _ref("Explain")), params=[WF, STEP])},
        "/v1/namespaces/{ns}/workflows/{workflow_id}/pause": {"post": _control(
            "pause_workflow", "Pause an instance (C-1)", "ReasonRequest")},
        "/v1/namespaces/{ns}/workflows/{workflow_id}/resume": {"post": _control(
            "resume_workflow", "Resume an instance (C-1)", "ReasonRequest")},
        "/v1/namespaces/{ns}/workflows/{workflow_id}/cancel": {"post": _control(
            "cancel_workflow", "Cancel an instance (C-2)", "ReasonRequest")},
        "/v1/namespaces/{ns}/workflows/{workflow_id}/steps/{step_key}/reactivate": {"post": _control(
            "reactivate_step", "Reactivate a step in review as a new activation (C-4)", "ReactivateRequest",
            "workflows:review", step=True)},
        "/v1/namespaces/{ns}/workflows/{workflow_id}/steps/{step_key}/continue": {"post": _control(
            "continue_step", "Continue a POLL stopped on rounds or deadline, in the same activation (C-4)",
            "ContinueRequest", "workflows:review", step=True)},
        "/v1/namespaces/{ns}/workflows/{workflow_id}/steps/{step_key}/resolve": {"post": _control(
            "resolve_step", "Settle a step in review with an operator-supplied output (C-4)", "ResolveRequest",
            "workflows:review", step=True)},
        "/v1/namespaces/{ns}/workflows/{workflow_id}/deadline": {"post": _control(
            "set_deadline", "Set a later instance deadline (C-4)", "DeadlineRequest", "workflows:review")},
        "/v1/namespaces/{ns}/workflows/{workflow_id}/retry": {"post": _control(
            "retry_workflow", "Retry the failing decisions and the steps they held back, once the cause is fixed (C-4)",
            "ReasonRequest", "workflows:review")},
        "/v1/namespaces/{ns}/apps": {
            "post": _op("put_app", "admin", "Create an app or change its quota", "admin",
                        {**_ok(201, _ref("App"), "created"), "200": {
                            "description": "updated, or a replay of the key's first put (with Idempotent-Replayed)",
                            "headers": REPLAYED, "content": {"application/json": {"schema": _ref("App")}}}},
                        params=[OPTIONAL_IDEMPOTENCY], body=_ref("AppRequest"),
                        errors=(*COMMON_ERRORS, 409, 413, 415, 422)),
            "get": _list("list_apps", "admin", "List apps by name with their quota and tasks in flight", "admin",
                         _items("AppState"))},
        "/v1/namespaces/{ns}/queues": {
            "post": _op("put_queue", "admin", "Create a queue or change its capacity", "admin",
                        {**_ok(201, _ref("Queue"), "created"), "200": {
                            "description": "updated, or a replay of the key's first put (with Idempotent-Replayed)",
                            "headers": REPLAYED, "content": {"application/json": {"schema": _ref("Queue")}}}},
                        params=[OPTIONAL_IDEMPOTENCY], body=_ref("QueueRequest"),
                        errors=(*COMMON_ERRORS, 409, 413, 415, 422)),
            "get": _list("list_queues", "admin", "List queues by name with their capacity and tasks queued and running "
                         "(an admin restricted to some queues: those queues)", "admin", _items("QueueState"))},
        "/v1/namespaces/{ns}/credentials": {
            "post": _op("create_credential", "admin", "Create a credential (its token is returned once)", "admin",
                        {**_ok(201, _ref("Credential")), "200": {
                            "description": "a replay of the key's first create (with Idempotent-Replayed): the "
                                           "credential it made, its token null (shown once, in the first answer)",
                            "headers": REPLAYED, "content": {"application/json": {"schema": _ref("Credential")}}}},
                        params=[OPTIONAL_IDEMPOTENCY], body=_ref("CredentialRequest"),
                        errors=(*COMMON_ERRORS, 409, 413, 415, 422)),
            "get": _list("list_credentials", "admin", "List credentials, oldest first (never a token)", "admin",
                         _items("CredentialState"))},
        "/v1/namespaces/{ns}/credentials/{credential_id}/disable": {"post": _op(
            "disable_credential", "admin",
            "Disable a credential: its token stops working at once, and instances it started get no new work (R-8)",
            "admin", _ok(200, _ref("Disabled"), "disabled (disabling a disabled credential changes nothing)"),
            params=[{"name": "credential_id", "in": "path", "required": True, "schema": {"type": "string"}}])},
        "/v1/namespaces/{ns}/credentials/{credential_id}/enable": {"post": _op(
            "enable_credential", "admin",
            "Enable a disabled credential again: its token works again (until its expiry), and instances it started "
            "take new work again (R-8, R-18)",
            "admin", _ok(200, _ref("Enabled"), "enabled (enabling an active credential changes nothing)"),
            params=[{"name": "credential_id", "in": "path", "required": True, "schema": {"type": "string"}}])},
        "/v1/namespaces/{ns}/audit": {"get": _list(
            "list_audit", "admin", "Read the audit trail, newest first: the namespace's own actions (credentials, "
            "apps, queues, definitions, console sign-ins, retention runs; an admin restricted to some queues reads "
            "those of the credentials it administers), or one instance's audit rows",
            "admin; workflows:read (+ every queue of the definition) with workflow_id", _ref("AuditPage"))},
        "/healthz": {"get": {"operationId": "health", "tags": ["operations"], "summary": "Process alive",
                             "security": [],
                             "responses": {"200": {"description": "alive", "content": {
                                 "application/json": {"schema": {"type": "object"}}}}}}},
        "/readyz": {"get": {"operationId": "ready", "tags": ["operations"],
                            "summary": "Database reachable, taking writes and at the expected level",
                            "security": [],
                            "responses": {"200": {"description": "ready", "content": {
                                "application/json": {"schema": {"type": "object"}}}}, **_problem(503)}}},
        "/metrics": {"get": {"operationId": "metrics", "tags": ["operations"], "summary": "Prometheus metrics",
                             "security": [],
                             "responses": {"200": {"description": "Prometheus text format, or OpenMetrics when the "
                                                                  "Accept header asks for it", "content": {
                                 "text/plain": {"schema": {"type": "string"}},
                                 "application/openmetrics-text": {"schema": {"type": "string"}}}}, **_problem(503)}}},
        "/openapi.json": {"get": {"operationId": "openapi", "tags": ["operations"], "summary": "This document",
                                  "security": [],
                                  "responses": {"200": {"description": "OpenAPI 3.1", "content": {
                                      "application/json": {"schema": {"type": "object"}}}}}}},
    }
    return {
        "openapi": "3.1.0",
        "info": {"title": "Weave", "version": "1",
                 "description": "Durable timers, bounded polls and authenticated, idempotent signals. Errors are "
                                "application/problem+json with a stable `code`."},
        "servers": [{"url": "/"}],
        "paths": paths,
        "components": {"schemas": schemas_,
                       "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
    }
