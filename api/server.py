"""``weave api``: the Falcon app under gunicorn, refusing to start against another schema level (R-16)."""

from __future__ import annotations

import sys

import falcon
from gunicorn.app.base import BaseApplication

from procedures import db, errors, installer


class _Gunicorn(BaseApplication):
    def __init__(self, dsn: str, options: dict):
        self.dsn, self.options = dsn, options
        super().__init__()

    def load_config(self) -> None:
        for key, value in self.options.items():
            self.cfg.set(key, value)

    def load(self) -> falcon.App:
        from api.app import get_app

        return get_app(self.dsn)


def run_api(dsn: db.Dsn, bind: str, workers: int, timeout: int = 30) -> int:
    try:
        with db.connect(dsn) as conn:
            installer.check_level(conn)
    except errors.SchemaMismatch as exc:
        print(f"weave api: {exc}", file=sys.stderr)
        return 1
    except errors.WeaveError as exc:
        print(f"weave api: the database at {dsn.redacted()} is not reachable ({exc.detail}); starting anyway, "
              "requests answer 503 until it is", file=sys.stderr)
    _Gunicorn(dsn.url(), {"bind": bind, "workers": workers, "timeout": timeout, "accesslog": "-",
                          "worker_class": "sync", "graceful_timeout": 10}).run()
    return 0
