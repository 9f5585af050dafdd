"""Resources of the HTTP API: each method authenticates through the routines it calls (the routines
authorise), checks the request's shape against its schema (``api.schemas``), shapes the answer, and never
holds SQL or business rules of its own."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

import falcon

from procedures import db, definitions, jsontext, routines

from . import schemas
from .http import (
    Connections,
    bearer,
    idempotency_key,
    invalid,
    json_body,
    json_object,
    json_object_members,
    listed_detail,
    optional_idempotency_key,
    path,
    respond,
    respond_text,
)


def _parse_time(value: Any, field: str) -> dt.datetime:
    """An RFC 3339 time with a zone as naive UTC, the engine's representation; anything else is a 422."""
    if isinstance(value, str):
        try:
            return routines.from_rfc3339(value)
        except ValueError:
            pass
        except OverflowError:
            raise invalid([(field, "DEADLINE_INVALID",
                            f"{field} must fall within the years 1-9999 once moved to UTC")]) from None
    raise invalid([(field, "DEADLINE_INVALID", f"{field} must be an RFC 3339 time with a zone")])


def _time(value: str | None, field: str = "deadline_at") -> dt.datetime | None:
    return None if value is None else _parse_time(value, field)


def _config_page(conn: db.Connection, req: falcon.Request, ns: str, listing: str) -> dict:
    """A page of a configuration list, by ``limit`` and ``cursor`` (the ``next_cursor`` of the page before)."""
    token = bearer(req)
    q = schemas.query(req, f"list_{listing}")
    return routines.config_page(conn, token, ns, listing, limit=q["limit"], cursor=q["cursor"])


class Resource:
    def __init__(self, connections: Connections):
        self.connections = connections

    @property
    def conn(self) -> db.Connection:
        return self.connections.get()


class Definitions(Resource):
    queried = ("GET", "HEAD")  # its list takes a query (schemas.query)

    def on_post(self, req: falcon.Request, resp: falcon.Response, ns: str) -> None:
        token = bearer(req)
        try:
            definition = definitions.validate(json_body(req))
        except definitions.DefinitionError as exc:
            raise invalid(list(exc.errors), listed_detail("the definition is not valid", exc)) from exc
        row = routines.definition_publish(self.conn, token, ns, definition, optional_idempotency_key(req))
        created = row.pop("created") and not row["replayed"]
        respond(resp, {k: row[k] for k in ("name", "version", "digest")}, 201 if created else 200,
                replayed=row["replayed"])
        if created:
            resp.location = path(ns, "definitions", row["name"], "versions", str(row["version"]))


    def on_get(self, req: falcon.Request, resp: falcon.Response, ns: str) -> None:
        respond(resp, _config_page(self.conn, req, ns, "definitions"))


class Definition(Resource):
    """GET /definitions/{name}: the latest version, as GET /definitions/{name}/versions/{version} answers it."""

    def on_get(self, req: falcon.Request, resp: falcon.Response, ns: str, name: str) -> None:
        respond(resp, routines.definition_get(self.conn, bearer(req), ns, name))


class DefinitionVersion(Resource):
    def on_get(self, req: falcon.Request, resp: falcon.Response, ns: str, name: str, version: str) -> None:
        token = bearer(req)
        number = int(version) if version.isascii() and version.isdigit() and len(version) <= 9 else 0
        if number < 1:
            raise falcon.HTTPNotFound(description="no such definition version")
        respond(resp, routines.definition_get(self.conn, token, ns, name, number))


class Workflows(Resource):
    queried = ("GET", "HEAD")  # its list takes a query (schemas.query)

    def on_post(self, req: falcon.Request, resp: falcon.Response, ns: str) -> None:
        token = bearer(req)
        key = idempotency_key(req)
        body, texts = json_object_members(req)
        body = schemas.body("StartRequest", body)
        started = routines.instance_start(
            self.conn, token, ns, definition=body["definition"], version=body.get("version"), app=body["app"],
            input_json=texts["input"].decode() if "input" in texts else "{}", idempotency_key=key,
            deadline_at=_time(body.get("deadline_at")), deadline_ms=body.get("deadline_ms"),
            business_key=body.get("business_key"), verbatim=True)
        respond_text(resp, jsontext.dumps(started["instance"]), 201 if started["created"] else 200,
                     replayed=not started["created"])
        if started["created"]:
            resp.location = path(ns, "workflows", started["instance"]["workflow_id"])

    def on_get(self, req: falcon.Request, resp: falcon.Response, ns: str) -> None:
        token = bearer(req)
        q = schemas.query(req, "list_workflows")
        respond(resp, routines.instance_list(
            self.conn, token, ns, status=q["status"], definition=q["definition"], control=q["control"],
            business_key=q["business_key"], review_code=q["review_code"], deferred=q["deferred"] is True,
            limit=q["limit"], cursor=q["cursor"]))


class Workflow(Resource):
    def on_get(self, req: falcon.Request, resp: falcon.Response, ns: str, workflow_id: str) -> None:
        token = bearer(req)  # 401 before anything asks the database
        # The kept values (input, outputs, results) as they were kept: a payload that settled a step is its output
        # exactly as sent (S-4).
        respond_text(resp, jsontext.dumps(routines.instance_get(self.conn, token, ns, workflow_id, verbatim=True)))


class Events(Resource):
    queried = ("GET", "HEAD")  # its list takes a query (schemas.query)

    def on_get(self, req: falcon.Request, resp: falcon.Response, ns: str, workflow_id: str) -> None:
        token = bearer(req)
        q = schemas.query(req, "list_events")
        after = q["after"] or 0
        # Each event's data as kept: a resolve's output (STEP_RESOLVED) as the step holds it, every digit kept.
        events = routines.instance_events(self.conn, token, ns, workflow_id, after, q["limit"], verbatim=True)
        respond_text(resp, jsontext.dumps({"events": events, "next_after": events[-1]["seq"] if events else after}))


class Rounds(Resource):
    queried = ("GET", "HEAD")  # its list takes a query (schemas.query)

    def on_get(self, req: falcon.Request, resp: falcon.Response, ns: str, workflow_id: str, step_key: str) -> None:
        token = bearer(req)
        q = schemas.query(req, "list_rounds")
        # Each result as kept, as the instance gives it.
        respond_text(resp, jsontext.dumps(routines.step_rounds(
            self.conn, token, ns, workflow_id, step_key, activation_sequence=q["activation"], after=q["after"] or 0,
            limit=q["limit"], verbatim=True)))


class Audit(Resource):
    """GET /audit: the audit trail, newest first; the namespace's own actions, or one instance's rows."""

    queried = ("GET", "HEAD")  # its list takes a query (schemas.query)

    def on_get(self, req: falcon.Request, resp: falcon.Response, ns: str) -> None:
        token = bearer(req)
        q = schemas.query(req, "list_audit")
        page = routines.audit_list(self.conn, token, ns, workflow_id=q["workflow_id"], action=q["action"],
                                   limit=q["limit"], cursor=q["cursor"], verbatim=True)
        respond_text(resp, jsontext.dumps(page))


class Apps(Resource):
    queried = ("GET", "HEAD")  # its list takes a query (schemas.query)

    def on_post(self, req: falcon.Request, resp: falcon.Response, ns: str) -> None:
        token = bearer(req)
        body = schemas.body("AppRequest", json_object(req))
        row = routines.app_put(self.conn, token, ns, body["name"], body["max_in_flight"], body.get("status"),
                               optional_idempotency_key(req))
        respond(resp, {"name": row["name"], "max_in_flight": row["max_in_flight"], "status": row["status"]},
                201 if row["created"] and not row["replayed"] else 200, replayed=row["replayed"])

    def on_get(self, req: falcon.Request, resp: falcon.Response, ns: str) -> None:
        respond(resp, _config_page(self.conn, req, ns, "apps"))


class Queues(Resource):
    queried = ("GET", "HEAD")  # its list takes a query (schemas.query)

    def on_post(self, req: falcon.Request, resp: falcon.Response, ns: str) -> None:
        token = bearer(req)
        body = schemas.body("QueueRequest", json_object(req))
        row = routines.queue_put(self.conn, token, ns, body["name"], body["capacity"], optional_idempotency_key(req))
        respond(resp, {"name": row["name"], "capacity": row["capacity"]},
                201 if row["created"] and not row["replayed"] else 200, replayed=row["replayed"])

    def on_get(self, req: falcon.Request, resp: falcon.Response, ns: str) -> None:
        respond(resp, _config_page(self.conn, req, ns, "queues"))


class Credentials(Resource):
    queried = ("GET", "HEAD")  # its list takes a query (schemas.query)

    def on_post(self, req: falcon.Request, resp: falcon.Response, ns: str) -> None:
        token = bearer(req)
        body = schemas.body("CredentialRequest", json_object(req))
        row = routines.credential_create(self.conn, token, ns, body["actor"], body["scopes"], body.get("queues", "*"),
                                         expires_at=_time(body.get("expires_at"), "expires_at"),
                                         idempotency_key=optional_idempotency_key(req))
        # A replay names the credential the key made; its token was shown once, in the first answer (null here).
        respond(resp, {"credential_id": row["credential_id"], "actor": row["actor"], "scopes": row["scopes"],
                       "queues": row["queues"], "expires_at": row["expires_at"], "token": row["token"]},
                200 if row["replayed"] else 201, replayed=row["replayed"])

    def on_get(self, req: falcon.Request, resp: falcon.Response, ns: str) -> None:
        respond(resp, _config_page(self.conn, req, ns, "credentials"))  # never a token


class CredentialDisable(Resource):
    """POST /credentials/{credential_id}/disable: a leaked or retired token stops working at once (S-2, R-8), from
    wherever an admin token reaches the API, with no database access. Disabling a disabled credential changes
    nothing and answers the same."""

    def on_post(self, req: falcon.Request, resp: falcon.Response, ns: str, credential_id: str) -> None:
        respond(resp, routines.credential_disable(self.conn, bearer(req), ns, credential_id))


class CredentialEnable(Resource):
    """POST /credentials/{credential_id}/enable: a disabled credential authenticates again (until its expiry), and the
    instances it started, whose new work waited (IDENTITY_DISABLED), go on. Enabling an active credential changes
    nothing and answers the same."""

    def on_post(self, req: falcon.Request, resp: falcon.Response, ns: str, credential_id: str) -> None:
        respond(resp, routines.credential_enable(self.conn, bearer(req), ns, credential_id))


class Action(Resource):
    """POST /workflows/{id}/<action> and /workflows/{id}/steps/{key}/<action>: one operator action with a
    reason and an idempotency key (06-control); 200 with the instance as it is now (the action's own answer), a
    replay with Idempotent-Replayed. ``act(conn, token, ns, workflow_id, step_key, reason, key, body, texts)`` calls
    its routine (``texts``: the exact bytes of each member of the body, for JSON passed on as it was sent)."""

    def __init__(self, connections: Connections, schema: str,
                 act: Callable[[db.Connection, str, str, str, str | None, str, str, dict[str, Any],
                                dict[str, bytes]], dict]):
        super().__init__(connections)
        self.schema, self.act = schema, act

    def on_post(self, req: falcon.Request, resp: falcon.Response, ns: str, workflow_id: str,
                step_key: str | None = None) -> None:
        token = bearer(req)
        key = idempotency_key(req)
        body, texts = json_object_members(req)
        body = schemas.body(self.schema, body)
        result = self.act(self.conn, token, ns, workflow_id, step_key, body["reason"], key, body, texts)
        # The instance as the action answered it: the action's scope is enough (a read of its own would ask for
        # workflows:read, which a credential that may act need not hold).
        respond_text(resp, jsontext.dumps(result["instance"]), replayed=bool(result["replayed"]))


def _instance(routine: Callable[..., dict]) -> Callable[..., dict]:
    """An instance action whose routine takes only the reason and the key (pause, resume, cancel, retry)."""
    return lambda conn, token, ns, wf, _step, reason, key, _body, _texts: routine(conn, token, ns, wf, reason, key,
                                                                                  verbatim=True)


# action path -> (request schema, the call of its routine)
ACTIONS: dict[str, tuple[str, Callable[..., dict]]] = {
    "pause": ("ReasonRequest", _instance(routines.instance_pause)),
    "resume": ("ReasonRequest", _instance(routines.instance_resume)),
    "cancel": ("ReasonRequest", _instance(routines.instance_cancel)),
    "retry": ("ReasonRequest", _instance(routines.instance_retry)),
    "deadline": ("DeadlineRequest", lambda conn, token, ns, wf, _step, reason, key, body, _texts:
                 routines.instance_deadline(conn, token, ns, wf, reason, key,
                                            deadline_at=_time(body.get("deadline_at")),
                                            extend_ms=body.get("extend_ms"), verbatim=True)),
    "steps/{step_key}/reactivate": ("ReactivateRequest", lambda conn, token, ns, wf, step, reason, key, body, _texts:
                                    routines.step_reactivate(conn, token, ns, wf, step, reason, key,
                                                             timeout_ms=body.get("timeout_ms"),
                                                             activation_sequence=body.get("activation_sequence"),
                                                             verbatim=True)),
    "steps/{step_key}/continue": ("ContinueRequest", lambda conn, token, ns, wf, step, reason, key, body, _texts:
                                  routines.step_continue(conn, token, ns, wf, step, reason, key,
                                                         extra_rounds=body.get("extra_rounds"),
                                                         poll_deadline_ms=body.get("poll_deadline_ms"),
                                                         activation_sequence=body.get("activation_sequence"),
                                                         verbatim=True)),
    "steps/{step_key}/resolve": ("ResolveRequest", lambda conn, token, ns, wf, step, reason, key, body, texts:
                                 routines.step_resolve(conn, token, ns, wf, step, reason, key,
                                                       evidence_ref=body.get("evidence_ref"),
                                                       output_json=texts["output"].decode(),
                                                       activation_sequence=body.get("activation_sequence"),
                                                       verbatim=True)),
}
