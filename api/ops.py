"""Operational endpoints outside the namespace prefix: liveness, readiness, metrics, the OpenAPI document."""

from __future__ import annotations

import falcon
from prometheus_client import CollectorRegistry, Gauge, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from procedures import errors, installer, routines

from .http import Connections, problem, respond
from .openapi import document


class Health:
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        respond(resp, {"status": "ok"})


class Ready:
    """Ready = the database answers and is at exactly the level this code ships (R-16)."""

    def __init__(self, connections: Connections):
        self.connections = connections

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        try:
            installer.check_level(self.connections.get())
        except errors.SchemaMismatch as exc:
            resp.set_header("Retry-After", "5")
            problem(resp, 503, "UNAVAILABLE", exc.detail)
            return
        respond(resp, {"status": "ready", "level": installer.shipped_level()})


class Metrics:
    """Prometheus text, computed from the database at scrape time (index ranges over live rows only)."""

    def __init__(self, connections: Connections):
        self.connections = connections

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        status = routines.engine_status(self.connections.get())
        registry = CollectorRegistry()
        due = Gauge("weave_due_backlog", "Candidates due now, per class", ["class"], registry=registry)
        lag = Gauge("weave_oldest_due_lag_seconds", "How late the oldest due candidate is, per class", ["class"],
                    registry=registry)
        for klass, backlog in status["backlog"].items():
            due.labels(klass).set(backlog["due"])
            lag.labels(klass).set(backlog["oldest_due_lag_ms"] / 1000)
        in_flight = Gauge("weave_tasks", "Tasks by status (in flight)", ["status"], registry=registry)
        for task_status, count in status["tasks_in_flight"].items():
            in_flight.labels(task_status).set(count)
        Gauge("weave_review_reasons_open", "Open review reasons", registry=registry).set(status["open_review_reasons"])
        Gauge("weave_instances_in_review", "Instances in NEEDS_REVIEW", registry=registry).set(
            status["instances_in_review"])
        late = Gauge("weave_timer_lateness_recent", "Timers settled in the last 5 minutes with lateness "
                     "(settled - due) at most le seconds (cumulative buckets)", ["le"], registry=registry)
        for le, timers in status["timer_lateness"]:
            late.labels("+Inf" if le is None else str(le)).set(timers)
        polling = Gauge("weave_polls", "POLL activations by state", ["state"], registry=registry)
        polling.labels("IN_FLIGHT").set(status["polls"]["in_flight"])
        polling.labels("WAITING").set(status["polls"]["waiting"])
        Gauge("weave_signals_pending", "Signals accepted and not yet consumed, rejected or expired",
              registry=registry).set(status["signals_pending"])
        resp.content_type = CONTENT_TYPE_LATEST
        resp.data = generate_latest(registry)


class OpenApi:
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.media = document()
        resp.content_type = falcon.MEDIA_JSON
