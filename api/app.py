"""The Falcon WSGI app: ``create_app`` wires routes to resources and one error handler; ``get_app``
reads the environment, checks the database level (R-16) and builds the real dependencies.

Served by gunicorn: ``weave api --bind 0.0.0.0:8080 --workers 4`` (or ``gunicorn 'api.app:get_app()'``).
"""

from __future__ import annotations

from typing import Any

import falcon

from procedures import db, errors, installer, settings

from . import console, ops, resources, signals, traffic
from .http import ApiConnections, Connections, NoStore, PathWidths, QueryNames, failing_over, make_error_handler

PREFIX = "/v1/namespaces/{ns}"


def _with_head(resource: object) -> object:
    """HEAD answers wherever GET does, with the same status and headers and no body."""
    if hasattr(resource, "on_get") and not hasattr(resource, "on_head"):
        resource.on_head = resource.on_get  # type: ignore[attr-defined]
    return resource


def create_app(connections: Connections) -> falcon.App:
    # Each has its own hooks: falcon calls those a class has. The request metrics first: their response hook runs last.
    middleware: list[Any] = [traffic.RequestMetrics(), NoStore(), PathWidths(), QueryNames()]
    app = falcon.App(media_type=falcon.MEDIA_JSON, middleware=middleware)
    app.req_options.strip_url_path_trailing_slash = True
    handler = make_error_handler(connections)
    app.add_error_handler(Exception, handler)
    app.add_error_handler(falcon.HTTPError, handler)
    routes: dict[str, object] = {
        "/definitions": resources.Definitions(connections),
        "/definitions/{name}": resources.Definition(connections),
        "/definitions/{name}/versions/{version}": resources.DefinitionVersion(connections),
        "/workflows": resources.Workflows(connections),
        "/workflows/{workflow_id}": resources.Workflow(connections),
        "/workflows/{workflow_id}/events": resources.Events(connections),
        "/workflows/{workflow_id}/signals": signals.Signals(connections),
        "/workflows/{workflow_id}/signals/{signal_id}": signals.Signal(connections),
        "/workflows/{workflow_id}/steps/{step_key}/rounds": resources.Rounds(connections),
        "/workflows/{workflow_id}/steps/{step_key}/explain": signals.Explain(connections),
        **{f"/workflows/{{workflow_id}}/{action}": resources.Action(connections, schema, act)
           for action, (schema, act) in resources.ACTIONS.items()},
        "/apps": resources.Apps(connections),
        "/queues": resources.Queues(connections),
        "/credentials": resources.Credentials(connections),
        "/credentials/{credential_id}/disable": resources.CredentialDisable(connections),
        "/credentials/{credential_id}/enable": resources.CredentialEnable(connections),
        "/audit": resources.Audit(connections),
    }
    for path, resource in routes.items():
        app.add_route(PREFIX + path, _with_head(failing_over(resource, connections)))
    # Readiness and metrics read like any GET: one whose node was lost under it is read again on a ready node.
    for path, resource in {"/healthz": ops.Health(), "/readyz": failing_over(ops.Ready(connections), connections),
                           "/metrics": failing_over(ops.Metrics(connections), connections),
                           "/openapi.json": ops.OpenApi()}.items():
        app.add_route(path, _with_head(resource))
    console.register(app, connections)
    return app


def get_app(dsn: str | None = None) -> falcon.App:
    """The app for gunicorn: refuses to start against a database at another level (R-16)."""
    from procedures.logs import configure_logging

    configure_logging()
    # What a request would read later, read now: a bad value stops the worker's boot, not a sign-in.
    settings.api_db_timeout()
    settings.console_session_ttl()
    settings.api_client_timeout()
    settings.api_request_read_timeout()
    target = db.dsn_from_env(dsn)
    connections = ApiConnections(target)
    try:
        installer.check_level(connections.get())
    except errors.SchemaMismatch:
        raise
    except errors.WeaveError:
        pass  # database down at start: serve 503 UNAVAILABLE until it answers
    return create_app(connections)
