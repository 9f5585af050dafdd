"""The Falcon WSGI app: ``create_app`` wires routes to resources and one error handler; ``get_app``
reads the environment, checks the database level (R-16) and builds the real dependencies.

Served by gunicorn: ``weave api --bind 0.0.0.0:8080 --workers 4`` (or ``gunicorn 'api.app:get_app()'``).
"""

from __future__ import annotations

import falcon

from procedures import db, errors, installer, routines

from . import ops, resources, signals
from .http import Connections, make_error_handler

PREFIX = "/v1/namespaces/{ns}"


def create_app(connections: Connections) -> falcon.App:
    app = falcon.App(media_type=falcon.MEDIA_JSON)
    app.req_options.strip_url_path_trailing_slash = True
    handler = make_error_handler(connections)
    app.add_error_handler(Exception, handler)
    app.add_error_handler(falcon.HTTPError, handler)
    routes = {
        "/definitions": resources.Definitions,
        "/definitions/{name}/versions/{version}": resources.DefinitionVersion,
        "/workflows": resources.Workflows,
        "/workflows/{workflow_id}": resources.Workflow,
        "/workflows/{workflow_id}/events": resources.Events,
        "/apps": resources.Apps,
        "/queues": resources.Queues,
        "/credentials": resources.Credentials,
    }
    for path, resource in routes.items():
        app.add_route(PREFIX + path, resource(connections))
    app.add_route(PREFIX + "/workflows/{workflow_id}/signals", signals.Signals(connections))
    app.add_route(PREFIX + "/workflows/{workflow_id}/signals/{signal_id}", signals.Signal(connections))
    app.add_route(PREFIX + "/workflows/{workflow_id}/steps/{step_key}/explain", signals.Explain(connections))
    app.add_route(PREFIX + "/workflows/{workflow_id}/pause", resources.Control(connections, routines.instance_pause))
    app.add_route(PREFIX + "/workflows/{workflow_id}/resume", resources.Control(connections, routines.instance_resume))
    app.add_route(PREFIX + "/workflows/{workflow_id}/cancel", resources.Control(connections, routines.instance_cancel))
    app.add_route(PREFIX + "/workflows/{workflow_id}/deadline", resources.Deadline(connections))
    for action in ("reactivate", "continue", "resolve"):
        app.add_route(PREFIX + "/workflows/{workflow_id}/steps/{step_key}/" + action,
                      resources.StepRecovery(connections, action))
    app.add_route("/healthz", ops.Health())
    app.add_route("/readyz", ops.Ready(connections))
    app.add_route("/metrics", ops.Metrics(connections))
    app.add_route("/openapi.json", ops.OpenApi())
    return app


def get_app(dsn: str | None = None) -> falcon.App:
    """The app for gunicorn: refuses to start against a database at another level (R-16)."""
    from procedures.logs import configure_logging

    configure_logging()
    target = db.dsn_from_env(dsn)
    connections = Connections(target)
    try:
        installer.check_level(connections.get())
    except errors.SchemaMismatch:
        raise
    except errors.WeaveError:
        pass  # database down at start: serve 503 UNAVAILABLE until it answers
    return create_app(connections)
