"""Operational endpoints outside the namespace prefix: liveness, readiness, metrics, the OpenAPI document."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

import falcon
from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.exposition import choose_encoder

from procedures import candidates, db, errors, installer, routines

from . import traffic
from .http import Connections, problem, respond
from .openapi import document


class Health:
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        respond(resp, {"status": "ok"})


class Ready:
    """Ready = the database answers, is not read-only, and is at exactly the level this code ships (R-16). A
    server that answers reads but is set read-only (a replica, or a primary fenced for a failover) refuses every
    write: a load balancer then sends requests to nodes whose database takes them. The connection that found it so
    is dropped (and with several hosts its node left), so that the next probe reaches whatever server the address
    leads to then: with no requests coming, nothing else would move it."""

    def __init__(self, connections: Connections):
        self.connections = connections

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        conn = self.connections.get()
        try:
            installer.check_level(conn)
        except errors.SchemaMismatch as exc:
            resp.set_header("Retry-After", "5")
            problem(resp, 503, "UNAVAILABLE", exc.detail)
            return
        settings = db.write_settings(conn)
        if db.read_only(settings):
            db.not_writable(conn)
            self.connections.discard()
            resp.set_header("Retry-After", "5")
            problem(resp, 503, "UNAVAILABLE", "NOT_WRITABLE: the database server takes no writes now: it is "
                                               "read-only. Writes answer 503 until it takes them again, or until the "
                                               "database address leads to the server that does (after a failover).")
            return
        if db.logs_statements(settings):  # a setting of the server's, which a person changes: no other node is better
            resp.set_header("Retry-After", "5")
            problem(resp, 503, "UNAVAILABLE", f"NOT_WRITABLE: the database server is {db.why_writes_refused(settings)}."
                                               " Set binlog_format = ROW on the server (docs/operations.md, Tuning "
                                               "the database).")
            return
        respond(resp, {"status": "ready", "level": installer.shipped_level()})


def _histogram(name: str, doc: str, labels: list[str]) -> HistogramMetricFamily:
    return HistogramMetricFamily(name, doc, labels=labels)


def _add_histogram(family: HistogramMetricFamily, labels: list[str], rows: list[dict]) -> None:
    """One histogram series from decision rows (cumulative buckets summed over the rows)."""
    buckets: list[tuple[str, float]] = [(str(le), sum(r["buckets"][i][1] for r in rows))
                                        for i, le in enumerate(routines.LATENCY_BUCKETS)]
    count = sum(r["count"] for r in rows)
    family.add_metric(labels, [*buckets, ("+Inf", count)], sum(r["sum"] for r in rows))


class EngineCollector:
    """Everything /metrics shows, read from the database at scrape time through prometheus-client's own
    metric types, so that every API worker answers the same values (nothing is counted in a process)."""

    def __init__(self, conn: db.Connection):
        self.conn = conn

    def describe(self) -> list[Metric]:
        return []  # built at scrape time only

    def collect(self) -> Iterator[Metric]:
        figures = routines.status(self.conn)
        metrics = routines.engine_metrics(self.conn)
        yield GaugeMetricFamily("weave_database_read_only", "1 while the database server this node reaches refuses "
                                "every write (set read-only, or logging statements; /readyz answers 503), else 0",
                                value=int(db.why_writes_refused(db.write_settings(self.conn)) is not None))
        due = GaugeMetricFamily("weave_due_backlog", "Candidates due now, per class", labels=["class"])
        lag = GaugeMetricFamily("weave_oldest_due_lag_seconds", "How late the oldest due candidate is, per class",
                                labels=["class"])
        for row in figures["backlog"]:
            due.add_metric([row["class"]], row["due"])
            lag.add_metric([row["class"]], float(row["lag_ms"] or 0) / 1000)
        yield due
        yield lag
        failing = GaugeMetricFamily("weave_candidates_failing", "Candidates whose last advance failed, by class; "
                                    "repeated: failed 2 or more times in a row", labels=["class", "repeated"])
        for c in candidates.CLASSES:
            if c.bookkept:
                row = figures["failing"].get(c.name, {"failing": 0, "repeated": 0})
                failing.add_metric([c.name, "false"], row["failing"] - row["repeated"])
                failing.add_metric([c.name, "true"], row["repeated"])
        yield failing
        deferred = GaugeMetricFamily("weave_instances_deferred", "Instances with a deferred check, by reason (R-18)",
                                     labels=["reason"])
        for reason, count in figures["deferred"].items():
            deferred.add_metric([reason], count)
        yield deferred
        oldest = GaugeMetricFamily("weave_oldest_deferral_seconds", "How long the longest-standing deferred check has "
                                   "been deferred, by reason (R-18)", labels=["reason"])
        for reason, ms in figures["deferred_oldest_ms"].items():
            oldest.add_metric([reason], ms / 1000)
        yield oldest
        live = GaugeMetricFamily("weave_instances", "Live instances by status", labels=["status"])
        paused = GaugeMetricFamily("weave_instances_paused", "Live instances with control PAUSED, by status",
                                   labels=["status"])
        for live_status, row in figures["instances"].items():
            live.add_metric([live_status], row["instances"])
            paused.add_metric([live_status], row["paused"])
        yield live
        yield paused
        yield GaugeMetricFamily("weave_review_reasons_open", "Open review reasons of instances in NEEDS_REVIEW",
                                value=figures["open_review_reasons"])
        yield GaugeMetricFamily("weave_instances_in_review", "Instances in NEEDS_REVIEW",
                                value=figures["instances_in_review"])
        by_code = GaugeMetricFamily("weave_review_reasons_open_by_code",
                                    "Open review reasons of instances in NEEDS_REVIEW, by review code", labels=["code"])
        for code, row in sorted(figures["review_by_code"].items()):
            by_code.add_metric([code], row["open_review_reasons"])
        yield by_code
        tasks = GaugeMetricFamily("weave_tasks", "Tasks by status (in flight)", labels=["status"])
        for task_status in ("QUEUED", "RUNNING"):
            tasks.add_metric([task_status], figures["tasks"].get(task_status, 0))
        yield tasks
        yield GaugeMetricFamily("weave_tasks_overdue", "RUNNING tasks past their deadline (attempts that started in "
                                "time and still run)", value=figures["tasks_overdue"])
        waiting = GaugeMetricFamily("weave_queue_wait_seconds", "How long the task the next claim of a queue would "
                                    "take has been ready to start; only queues with such a task",
                                    labels=["namespace", "queue"])
        for head in figures["queues_waiting"]:
            waiting.add_metric([head["namespace"], head["queue"]], head["wait_ms"] / 1000)
        yield waiting
        polls = GaugeMetricFamily("weave_polls", "POLL activations by state", labels=["state"])
        polls.add_metric(["IN_FLIGHT"], figures["polls_in_flight"])
        polls.add_metric(["WAITING"], figures["polls_waiting"])
        yield polls
        expiry = GaugeMetricFamily("weave_credential_expiry_timestamp_seconds", "When an active credential made to "
                                   "expire stops authenticating (Unix time; alert on it minus time())",
                                   labels=["namespace", "credential_id"])
        # No actor: /metrics needs no token, and a name (often a person's) is not the scraper's to read; the id is
        # what `weave credentials list` and the alert's remedy need.
        for cred in figures["expiring_credentials"]:
            expiry.add_metric([cred["namespace"], cred["credential_id"]], _unix(cred["expires_at"]))
        yield expiry
        yield GaugeMetricFamily("weave_signals_pending", "Signals accepted and not yet consumed, rejected or expired",
                                value=figures["signals_pending"])
        signals = CounterMetricFamily("weave_signals", "Signals settled, by status and disposition",
                                      labels=["status", "disposition"])
        for sig_status, disposition, count in metrics["signals"]:
            if sig_status != "PENDING":
                signals.add_metric([sig_status, disposition], count)
        yield signals
        rounds = CounterMetricFamily("weave_poll_rounds", "Poll rounds finished, by outcome", labels=["outcome"])
        for outcome, count in metrics["rounds"].items():
            if outcome != "IN_FLIGHT":
                rounds.add_metric([outcome], count)
        yield rounds
        decisions = CounterMetricFamily("weave_decisions", "Waits decided, by kind and result",
                                        labels=["kind", "result"])
        for row in metrics["decisions"]:
            decisions.add_metric([row["kind"], row["result"]], row["count"])
        yield decisions
        latency = _histogram("weave_decision_latency_seconds", "How long after it was due each wait was decided "
                             "(timers: settled - due; signals: settled - the winner's acceptance)", ["kind"])
        for kind in sorted({r["kind"] for r in metrics["decisions"]}):
            _add_histogram(latency, [kind], [r for r in metrics["decisions"] if r["kind"] == kind])
        yield latency
        lateness = _histogram("weave_timer_lateness_seconds", "Timer lateness: settled - due, of satisfied timers "
                              "(T-8)", [])
        _add_histogram(lateness, [], [r for r in metrics["decisions"]
                                      if r["kind"] == "TIMER" and r["result"] == "SATISFIED"])
        yield lateness


def _unix(rfc3339: str) -> float:
    return dt.datetime.fromisoformat(rfc3339.replace("Z", "+00:00")).timestamp()


class Metrics:
    """Prometheus text, or OpenMetrics when the scraper asks for it (Accept), computed from the database."""

    def __init__(self, connections: Connections):
        self.connections = connections

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        registry = CollectorRegistry(auto_describe=False)
        registry.register(EngineCollector(self.connections.get()))
        traffic.collect_into(registry)
        encoder, content_type = choose_encoder(req.get_header("Accept") or "")
        resp.content_type = content_type
        resp.data = encoder(registry)


class OpenApi:
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.media = document()
        resp.content_type = falcon.MEDIA_JSON
