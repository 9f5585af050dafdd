"""Operational endpoints outside the namespace prefix: liveness, readiness, metrics, the OpenAPI document."""

from __future__ import annotations

import falcon
from prometheus_client import CollectorRegistry, Gauge, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from procedures import errors, installer, routines

from .http import Connections, problem, respond
from .openapi import document


class Health:
    def on_get(self, req, resp):
        respond(resp, {"status": "ok"})


class Ready:
    """Ready = the database answers and is at exactly the level this code ships (R-16)."""

    def __init__(self, connections: Connections):
        self.connections = connections

    def on_get(self, req, resp):
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

    def on_get(self, req, resp):
        resp.content_type = CONTENT_TYPE_LATEST
        resp.data = generate_latest(registry_of(routines.status(self.connections.get())))


def registry_of(figures: dict) -> CollectorRegistry:
    """The Prometheus registry of the figures ``routines.status`` reads; the console shows the same figures."""
    registry = CollectorRegistry()
    due = Gauge("weave_due_backlog", "Candidates due now, per class", ["class"], registry=registry)
    lag = Gauge("weave_oldest_due_lag_seconds", "How late the oldest due candidate is, per class", ["class"],
                registry=registry)
    for row in figures["backlog"]:
        due.labels(row["class"]).set(row["due"])
        lag.labels(row["class"]).set(float(row["lag_ms"] or 0) / 1000)
    in_flight = Gauge("weave_tasks", "Tasks by status (in flight)", ["status"], registry=registry)
    for status in ("QUEUED", "RUNNING"):
        in_flight.labels(status).set(figures["tasks"].get(status, 0))
    Gauge("weave_review_reasons_open", "Open review reasons", registry=registry).set(figures["open_review_reasons"])
    Gauge("weave_instances_in_review", "Instances in NEEDS_REVIEW", registry=registry).set(
        figures["instances_in_review"])
    late = Gauge("weave_timer_lateness_recent", "Timers settled in the last 5 minutes with lateness "
                 "(settled - due) at most le seconds (cumulative buckets)", ["le"], registry=registry)
    for row in figures["lateness"]:
        late.labels("+Inf" if row["le_seconds"] is None else str(float(row["le_seconds"]))).set(row["timers"])
    polling = Gauge("weave_polls", "POLL activations by state", ["state"], registry=registry)
    polling.labels("IN_FLIGHT").set(figures["polls_in_flight"])
    polling.labels("WAITING").set(figures["polls_waiting"])
    Gauge("weave_signals_pending", "Signals accepted and not yet consumed, rejected or expired",
          registry=registry).set(figures["signals_pending"])
    deferrals = Gauge("weave_instances_deferred", "Instances with a deferred check, by reason (R-18)", ["reason"],
                      registry=registry)
    for reason, count in figures["deferred"].items():
        deferrals.labels(reason).set(count)
    failures = Gauge("weave_candidates_failing", "Candidates whose last advance failed, by class; repeated: "
                     "failed 2 or more times in a row", ["class", "repeated"], registry=registry)
    for klass, row in figures["failing"].items():
        failures.labels(klass, "false").set(row["failing"] - row["repeated"])
        failures.labels(klass, "true").set(row["repeated"])
    live = Gauge("weave_instances", "Live instances by status", ["status"], registry=registry)
    paused = Gauge("weave_instances_paused", "Live instances with control PAUSED, by status", ["status"],
                   registry=registry)
    for status, row in figures["instances"].items():
        live.labels(status).set(row["instances"])
        paused.labels(status).set(row["paused"])
    return registry

class OpenApi:
    def on_get(self, req, resp):
        resp.media = document()
        resp.content_type = falcon.MEDIA_JSON
