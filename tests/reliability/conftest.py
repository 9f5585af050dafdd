"""Fixtures of the reliability battery: a private Galera cluster (started once per module that asks for it)."""

from __future__ import annotations

import os
import time

import pytest

from procedures import installer
from tests.support.db import Db, reset
from tests.support.galera import GaleraCluster


def figure(name: str, **values) -> None:
    """One JSON line per figure, like the benchmarks print, so that runs can be compared."""
    import json

    print("\n" + json.dumps({"figure": name, **values}, default=str), flush=True)


def count_param(name: str, default: int) -> int:
    """A run size from the environment (``make reliability`` raises them); the suite's short default otherwise."""
    return int(os.environ.get(name, default))


@pytest.fixture(scope="module")
def galera():
    """A 3-node cluster on its own ports under a temp directory, with a test-clock database ``weave_ha``.
    Always killed and removed afterwards, whatever the test did to its nodes."""
    cluster = GaleraCluster()
    began = time.monotonic()
    try:
        cluster.start()
    except RuntimeError as exc:
        cluster.close()
        pytest.fail(f"could not start a private Galera cluster: {exc}")
    try:
        dsn = cluster.dsn("weave_ha", connect_timeout=2)
        installer.migrate(dsn, test_clock=True)
        figure("galera_cluster_started", seconds=round(time.monotonic() - began, 1),
               ports=[n.sql_port for n in cluster.nodes])
        cluster.database = dsn
        yield cluster
    finally:
        cluster.close()


@pytest.fixture
def cluster_db(galera) -> Db:
    """A clean scenario on the cluster, reached through the DSN that lists every node."""
    for node in galera.nodes:  # a previous test may have left a node down
        if not node.alive():
            node.restart()
            node.wait_synced()
    handle = Db(galera.database)
    reset(handle.conn)
    yield handle
    handle.close()
