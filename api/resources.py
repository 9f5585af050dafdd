"""Resources of the HTTP API: each method authenticates through the routines it calls (the routines
authorise), shapes the answer, and never holds SQL or business rules of its own."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from typing import Any

import falcon

from procedures import db, definitions, routines

from .http import ApiError, Connections, bearer, idempotency_key, invalid, json_body, json_object, respond


def _int_param(req: falcon.Request, name: str, default: int, low: int, high: int) -> int:
    value = req.get_param(name)
    if value is None or value == "":
        return default
    try:
        number = int(value)
    except ValueError:
        number = None
    if number is None or not low <= number <= high:
        raise ApiError(422, "VALIDATION_FAILED", f"{name} must be an integer {low}..{high}",
                       [{"field": name, "code": "LIMIT_INVALID", "message": f"{name} must be {low}..{high}"}])
    return number


def _require(body: dict, field: str, kind: type | tuple, code: str = "INVALID_ARGUMENT") -> Any:
    value = body.get(field)
    if value is None or not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        raise ApiError(422, "VALIDATION_FAILED", f"{field} is required",
                       [{"field": field, "code": code, "message": f"{field} is required and must be valid"}])
    return value


def _reason(body: dict) -> str:
    """Every operator action carries a reason (06-control); its length is checked by the routine."""
    reason = body.get("reason")
    if not isinstance(reason, str):
        raise ApiError(422, "VALIDATION_FAILED", "reason is required",
                       [{"field": "reason", "code": "REASON_INVALID", "message": "1-1024 characters"}])
    return reason


class Resource:
    def __init__(self, connections: Connections):
        self.connections = connections

    @property
    def conn(self) -> db.Connection:
        return self.connections.get()


class Definitions(Resource):
    def on_post(self, req: falcon.Request, resp: falcon.Response, ns: str) -> None:
        token = bearer(req)
        try:
            definition = definitions.validate(json_body(req))
        except definitions.DefinitionError as exc:
            raise invalid(list(exc.errors), "the definition is not valid") from exc
        row = routines.definition_publish(self.conn, token, ns, definition)
        created = row.pop("created")
        respond(resp, row, 201 if created else 200)


class DefinitionVersion(Resource):
    def on_get(self, req: falcon.Request, resp: falcon.Response, ns: str, name: str, version: str) -> None:
        number = int(version) if version.isdigit() and len(version) <= 9 else 0
        if number < 1:
            raise ApiError(404, "NOT_FOUND", "no such definition version")
        respond(resp, routines.definition_get(self.conn, bearer(req), ns, name, number))


class Workflows(Resource):
    def on_post(self, req: falcon.Request, resp: falcon.Response, ns: str) -> None:
        token = bearer(req)
        key = idempotency_key(req, required=True)
        body = json_object(req)
        definition = _require(body, "definition", str, "DEFINITION_NOT_FOUND")
        app = _require(body, "app", str, "APP_NOT_FOUND")
        if "input" not in body:
            body["input"] = {}
        deadline_ms, deadline_at = body.get("deadline_ms"), body.get("deadline_at")
        if (deadline_ms is None) == (deadline_at is None):
            raise ApiError(422, "VALIDATION_FAILED", "give exactly one of deadline_ms and deadline_at",
                           [{"field": "deadline_ms", "code": "DEADLINE_INVALID", "message": "one deadline needed"}])
        if deadline_ms is not None and (not isinstance(deadline_ms, int) or isinstance(deadline_ms, bool)):
            raise ApiError(422, "VALIDATION_FAILED", "deadline_ms must be an integer",
                           [{"field": "deadline_ms", "code": "DEADLINE_INVALID", "message": "integer ms"}])
        at = None
        if deadline_at is not None:
            at = _parse_time(deadline_at, "deadline_at")
        version = body.get("version")
        if version is not None and (not isinstance(version, int) or isinstance(version, bool) or version < 1):
            raise ApiError(422, "VALIDATION_FAILED", "version must be a positive integer",
                           [{"field": "version", "code": "DEFINITION_NOT_FOUND", "message": "positive integer"}])
        business_key = body.get("business_key")
        if business_key is not None and not isinstance(business_key, str):
            raise ApiError(422, "VALIDATION_FAILED", "business_key must be a string",
                           [{"field": "business_key", "code": "INPUT_INVALID", "message": "string"}])
        started = routines.instance_start(
            self.conn, token, ns, definition=definition, version=version, app=app,
            input_json=json.dumps(body["input"], separators=(",", ":"), ensure_ascii=False),
            idempotency_key=key, deadline_at=at, deadline_ms=deadline_ms, business_key=business_key)
        instance = routines.instance_get(self.conn, token, ns, started["workflow_id"])
        respond(resp, instance, 201 if started["created"] else 200, replayed=not started["created"])

    def on_get(self, req: falcon.Request, resp: falcon.Response, ns: str) -> None:
        limit = _int_param(req, "limit", 50, 1, 500)
        page = routines.instance_list(self.conn, bearer(req), ns, status=req.get_param("status") or None,
                                      definition=req.get_param("definition") or None, limit=limit,
                                      cursor=req.get_param("cursor"))
        respond(resp, page)


class Workflow(Resource):
    def on_get(self, req: falcon.Request, resp: falcon.Response, ns: str, workflow_id: str) -> None:
        respond(resp, routines.instance_get(self.conn, bearer(req), ns, workflow_id))


class Events(Resource):
    def on_get(self, req: falcon.Request, resp: falcon.Response, ns: str, workflow_id: str) -> None:
        after = _int_param(req, "after", 0, 0, 2**62)
        limit = _int_param(req, "limit", 100, 1, 1000)
        events = routines.instance_events(self.conn, bearer(req), ns, workflow_id, after, limit)
        respond(resp, {"events": events, "next_after": events[-1]["seq"] if events else after})


class Apps(Resource):
    def on_post(self, req: falcon.Request, resp: falcon.Response, ns: str) -> None:
        token = bearer(req)
        body = json_object(req)
        name = _require(body, "name", str, "NAME_INVALID")
        quota = _require(body, "max_in_flight", int, "LIMIT_INVALID")
        status = body.get("status")
        row = routines.app_put(self.conn, token, ns, name, quota, status)
        respond(resp, {"name": row["name"], "max_in_flight": row["max_in_flight"], "status": row["status"]},
                201 if row["created"] else 200)


class Queues(Resource):
    def on_post(self, req: falcon.Request, resp: falcon.Response, ns: str) -> None:
        token = bearer(req)
        body = json_object(req)
        name = _require(body, "name", str, "NAME_INVALID")
        capacity = _require(body, "capacity", int, "LIMIT_INVALID")
        row = routines.queue_put(self.conn, token, ns, name, capacity)
        respond(resp, {"name": row["name"], "capacity": row["capacity"]}, 201 if row["created"] else 200)


class Credentials(Resource):
    def on_post(self, req: falcon.Request, resp: falcon.Response, ns: str) -> None:
        token = bearer(req)
        body = json_object(req)
        actor = _require(body, "actor", str, "NAME_INVALID")
        scopes = _require(body, "scopes", list, "SCOPES_INVALID")
        queues = body.get("queues", "*")
        if not all(isinstance(s, str) for s in scopes) or not (
                queues == "*" or isinstance(queues, list) and all(isinstance(q, str) for q in queues)):
            raise ApiError(422, "VALIDATION_FAILED", "scopes must be a list of strings; queues a list or *",
                           [{"field": "scopes", "code": "SCOPES_INVALID", "message": "list of strings"}])
        row = routines.credential_create(self.conn, token, ns, actor, scopes, queues)
        respond(resp, {"credential_id": row["credential_id"], "actor": row["actor"], "scopes": row["scopes"],
                       "queues": row["queues"], "token": row["token"]}, 201)


def _parse_time(value: Any, field: str) -> dt.datetime:
    if isinstance(value, str):
        try:
            moment = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
            if moment.tzinfo is not None:
                return moment.astimezone(dt.timezone.utc).replace(tzinfo=None)
        except ValueError:
            pass
    raise ApiError(422, "VALIDATION_FAILED", f"{field} must be an RFC 3339 time with a zone",
                   [{"field": field, "code": "DEADLINE_INVALID", "message": "RFC 3339, e.g. 2026-12-01T00:00:00Z"}])


class Control(Resource):
    """POST /workflows/{id}/pause | resume: 200 instance; a replay answers 200 with Idempotent-Replayed."""

    def __init__(self, connections: Connections, action: Callable[..., dict]):
        super().__init__(connections)
        self.action = action

    def on_post(self, req: falcon.Request, resp: falcon.Response, ns: str, workflow_id: str) -> None:
        token = bearer(req)
        key = idempotency_key(req, required=True)
        body = json_object(req)
        reason = _reason(body)
        result = self.action(self.conn, token, ns, workflow_id, reason, key)
        respond(resp, routines.instance_get(self.conn, token, ns, workflow_id), replayed=bool(result["replayed"]))


class Deadline(Resource):
    def on_post(self, req: falcon.Request, resp: falcon.Response, ns: str, workflow_id: str) -> None:
        token = bearer(req)
        key = idempotency_key(req, required=True)
        body = json_object(req)
        reason = _reason(body)
        at = _parse_time(body["deadline_at"], "deadline_at") if body.get("deadline_at") is not None else None
        extend = body.get("extend_ms")
        if extend is not None and (not isinstance(extend, int) or isinstance(extend, bool)):
            raise ApiError(422, "VALIDATION_FAILED", "extend_ms must be an integer",
                           [{"field": "extend_ms", "code": "DEADLINE_INVALID", "message": "positive integer"}])
        result = routines.instance_deadline(self.conn, token, ns, workflow_id, reason, key, deadline_at=at,
                                            extend_ms=extend)
        respond(resp, routines.instance_get(self.conn, token, ns, workflow_id), replayed=bool(result["replayed"]))


class StepRecovery(Resource):
    """POST /workflows/{id}/steps/{key}/reactivate | continue | resolve (C-4): 200 instance."""

    def __init__(self, connections: Connections, action: str):
        super().__init__(connections)
        self.action = action

    def on_post(self, req: falcon.Request, resp: falcon.Response, ns: str, workflow_id: str, step_key: str) -> None:
        token = bearer(req)
        key = idempotency_key(req, required=True)
        body = json_object(req)
        reason = _reason(body)
        if self.action == "continue":
            extra, ms = body.get("extra_rounds"), body.get("poll_deadline_ms")
            for name, value in (("extra_rounds", extra), ("poll_deadline_ms", ms)):
                if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
                    raise ApiError(422, "VALIDATION_FAILED", f"{name} must be an integer",
                                   [{"field": name, "code": "INVALID_ARGUMENT", "message": "positive integer"}])
            result = routines.step_continue(self.conn, token, ns, workflow_id, step_key, reason, key,
                                            extra_rounds=extra, poll_deadline_ms=ms)
        elif self.action == "reactivate":
            timeout = body.get("timeout_ms")
            if timeout is not None and (not isinstance(timeout, int) or isinstance(timeout, bool)):
                raise ApiError(422, "VALIDATION_FAILED", "timeout_ms must be an integer",
                               [{"field": "timeout_ms", "code": "INVALID_ARGUMENT", "message": "positive integer"}])
            result = routines.step_reactivate(self.conn, token, ns, workflow_id, step_key, reason, key,
                                              timeout_ms=timeout)
        else:
            if "output" not in body:
                raise ApiError(422, "VALIDATION_FAILED", "output is required",
                               [{"field": "output", "code": "INPUT_INVALID", "message": "any JSON value"}])
            evidence = body.get("evidence_ref")
            if evidence is not None and not isinstance(evidence, str):
                raise ApiError(422, "VALIDATION_FAILED", "evidence_ref must be a string",
                               [{"field": "evidence_ref", "code": "EVIDENCE_REF_INVALID", "message": "string"}])
            result = routines.step_resolve(self.conn, token, ns, workflow_id, step_key, reason, key,
                                           output=body["output"], evidence_ref=evidence)
        respond(resp, routines.instance_get(self.conn, token, ns, workflow_id), replayed=bool(result["replayed"]))
