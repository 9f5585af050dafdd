"""The operator console at ``/console``: server-rendered pages over the same routines as the HTTP API."""

from __future__ import annotations

import falcon

from ..http import Connections
from . import pages


def register(app: falcon.App, connections: Connections) -> None:
    routes = {
        "": pages.Dashboard,
        "/signin": pages.SignIn,
        "/signout": pages.SignOut,
        "/instances": pages.Instances,
        "/instances/{workflow_id}": pages.Instance,
        "/instances/{workflow_id}/{action}": pages.InstanceAction,
        "/instances/{workflow_id}/steps/{step_key}/rounds": pages.StepRounds,
        "/instances/{workflow_id}/steps/{step_key}/{action}": pages.StepAction,
        "/review": pages.Review,
        "/bulk": pages.Bulk,
    }
    for path, resource in routes.items():
        app.add_route("/console" + path, resource(connections))
    app.add_route("/console/static/{name}", pages.Static())
    app.add_sink(pages.Missing(connections), prefix=pages.CONSOLE_PATH)
