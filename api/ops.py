"""Operational endpoints outside the namespace prefix: liveness, readiness, metrics, the OpenAPI document."""

from __future__ import annotations

import falcon
from prometheus_client import CollectorRegistry, Gauge, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from procedures import db, errors, installer

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
        backlog, tasks, review, lateness, polls, deferred, failing = db.call(self.connections.get(), "weave_status")
        registry = CollectorRegistry()
        due = Gauge("weave_due_backlog", "Candidates due now, per class", ["class"], registry=registry)
        lag = Gauge("weave_oldest_due_lag_seconds", "How late the oldest due candidate is, per class", ["class"],
                    registry=registry)
        for row in backlog:
            due.labels(row["class"]).set(row["due"])
            lag.labels(row["class"]).set(float(row["lag_ms"] or 0) / 1000)
        in_flight = Gauge("weave_tasks", "Tasks by status (in flight)", ["status"], registry=registry)
        for status in ("QUEUED", "RUNNING"):
            in_flight.labels(status).set(next((r["tasks"] for r in tasks if r["status"] == status), 0))
        open_reasons = review[0]["open_review_reasons"]
        Gauge("weave_review_reasons_open", "Open review reasons", registry=registry).set(open_reasons)
        Gauge("weave_instances_in_review", "Instances in NEEDS_REVIEW", registry=registry).set(
            review[0]["instances_in_review"])
        late = Gauge("weave_timer_lateness_recent", "Timers settled in the last 5 minutes with lateness "
                     "(settled - due) at most le seconds (cumulative buckets)", ["le"], registry=registry)
        for row in lateness:
            late.labels("+Inf" if row["le_seconds"] is None else str(float(row["le_seconds"]))).set(row["timers"])
        polling = Gauge("weave_polls", "POLL activations by state", ["state"], registry=registry)
        polling.labels("IN_FLIGHT").set(polls[0]["polls_in_flight"])
        polling.labels("WAITING").set(polls[0]["polls_waiting"])
        Gauge("weave_signals_pending", "Signals accepted and not yet consumed, rejected or expired",
              registry=registry).set(polls[0]["signals_pending"])
        deferrals = Gauge("weave_instances_deferred", "Instances with a deferred check, by reason (R-18)", ["reason"],
                          registry=registry)
        for row in deferred:
            deferrals.labels(row["reason"]).set(row["instances"])
        failures = Gauge("weave_candidates_failing", "Candidates whose last advance failed, by class; repeated: "
                         "failed 2 or more times in a row", ["class", "repeated"], registry=registry)
        for row in failing:
            failures.labels(row["class"], "false").set(int(row["failing"]) - int(row["repeated"]))
            failures.labels(row["class"], "true").set(int(row["repeated"]))
        resp.content_type = CONTENT_TYPE_LATEST
        resp.data = generate_latest(registry)


class OpenApi:
    def on_get(self, req, resp):
        resp.media = document()
        resp.content_type = falcon.MEDIA_JSON
