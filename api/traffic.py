"""The API's own request metrics: how many requests each route answered, with which status, and how long they took.

They sit beside the engine's figures on ``/metrics``. Those are read from the database and are the same on every
node; these are the node's own (one API process group, however many gunicorn workers it has). Under gunicorn each
worker counts in files of one folder that ``weave api`` makes for its workers (prometheus_client's multiprocess
mode), and ``/metrics`` sums them, so that a scrape answered by any worker shows the whole node; the counts of a
worker that exited stay in the sums (its files stay in the folder until the API stops). One process (the test
client, ``weave dev``) counts in memory.

A route is the path's template (``/v1/namespaces/{ns}/workflows/{workflow_id}``), so the series do not grow with
ids or namespaces; a path that no route takes is counted as ``unmatched``, the console's own 404s as ``/console``.
"""

from __future__ import annotations

import os
import time
from typing import Any

import falcon
from prometheus_client import CollectorRegistry, Counter, Histogram, multiprocess, values

FOLDER = "PROMETHEUS_MULTIPROC_DIR"  # prometheus_client's own name for the folder of the workers' files
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

_registry = CollectorRegistry(auto_describe=False)
_metrics: tuple[Counter, Histogram] | None = None


def _made() -> tuple[Counter, Histogram]:
    """The metrics, made on first use in the process that counts: in a worker, after ``weave api`` has named the
    folder, whatever imported prometheus_client before."""
    global _metrics
    if _metrics is None:
        values.ValueClass = values.get_value_class()  # files of the folder when it is named, else memory
        _metrics = (
            Counter("weave_http_requests", "HTTP requests answered, by method, route and status",
                    ["method", "route", "status"], registry=_registry),
            Histogram("weave_http_request_duration_seconds",
                      "Time from a request's arrival in the app to its answer, by method and route",
                      ["method", "route"], buckets=BUCKETS, registry=_registry))
    return _metrics


def route(req: falcon.Request) -> str:
    if req.uri_template:
        return req.uri_template
    return "/console" if req.path == "/console" or req.path.startswith("/console/") else "unmatched"


# The methods a request is counted under; any other, as the server accepts any word of capitals, is OTHER: each new
# one was a new series of every route it reached, kept in the workers' files until the API stopped, so that requests
# with made-up methods, no token needed, grew /metrics and the workers' memory without end (5,000 of them: 90,081
# series, 8.5 MB a scrape, 3.3 s to answer it).
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE", "CONNECT"})


class RequestMetrics:
    """Middleware: counts every answer, refusals and errors included. First in the app's list, so that its
    response hook runs after every other's (falcon runs them in reverse)."""

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        req.context.arrived = time.perf_counter()

    def process_response(self, req: falcon.Request, resp: falcon.Response, resource: object,
                         req_succeeded: bool) -> None:
        arrived = getattr(req.context, "arrived", None)
        requests, duration = _made()
        where = route(req)
        method = req.method if req.method in METHODS else "OTHER"
        requests.labels(method, where, str(resp.status)[:3]).inc()
        if arrived is not None:
            duration.labels(method, where).observe(time.perf_counter() - arrived)


def collect_into(registry: CollectorRegistry) -> None:
    """Adds the node's request metrics to a scrape's registry: the workers' files summed, or this process's."""
    folder = os.environ.get(FOLDER)
    if folder and os.path.isdir(folder):
        multiprocess.MultiProcessCollector(registry, path=folder)
    else:
        _made()
        registry.register(_Own())


class _Own:
    def collect(self) -> Any:
        return _registry.collect()


def worker_exited(pid: int) -> None:
    """gunicorn's child_exit hook: the exited worker's live gauges are dropped (prometheus-client's own rule); its
    counters and histograms stay in the sums."""
    if os.environ.get(FOLDER):
        multiprocess.mark_process_dead(pid)
