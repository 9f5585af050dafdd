from __future__ import annotations

import pytest
from falcon import testing

from api.app import create_app
from api.http import Connections


@pytest.fixture
def client(db, world):
    connections = Connections(db.dsn)
    yield testing.TestClient(create_app(connections))
    connections.discard()


def auth(token: str, key: str | None = None) -> dict:
    headers = {"Authorization": f"Bearer {token}"}
    if key:
        headers["Idempotency-Key"] = key
    return headers
