"""The API's gunicorn worker tells the arbiter it is alive at most once a second: the arbiter kills a worker whose
liveness file is older than its timeout, and gthread's loop would otherwise touch the file on every request. The
worker's real liveness file (gunicorn's WorkerTmp) is checked here; serving is tested in tests/api."""

from __future__ import annotations

import inspect
import os

from gunicorn.config import Config
from gunicorn.workers.workertmp import WorkerTmp

from api.server import NOTIFY_EVERY, ProblemWorker, run_api


def _worker() -> ProblemWorker:
    worker = ProblemWorker.__new__(ProblemWorker)  # only its liveness file: no sockets, no application
    worker.tmp = WorkerTmp(Config())
    return worker


def _touched(worker: ProblemWorker) -> bool:
    """Whether a notice touches the file: it is set to an old time first."""
    os.utime(worker.tmp.fileno(), (1.0, 1.0))
    worker.notify()
    return worker.tmp.last_update() != 1.0


def test_the_api_worker_tells_the_arbiter_it_is_alive_at_most_once_a_second():
    worker = _worker()
    try:
        assert _touched(worker)  # the first notice goes out
        assert not _touched(worker)  # a request answered right after it: no second utime
        worker._notified -= NOTIFY_EVERY  # a second later
        assert _touched(worker)
        timeout = inspect.signature(run_api).parameters["timeout"].default
        assert NOTIFY_EVERY * 4 <= timeout  # well within the arbiter's patience
    finally:
        worker.tmp.close()
