"""The review queue against how many instances are in review: the rows `weave_review_queue` makes the server read
and the time of the console's page (`/console/review`, 200 shown), as more instances go to review.

    python -m tests.benchmarks.bench_review [--in-review 100,300,1000,3000]

Instances of a one-step SIGNAL flow whose wait times out into review. Rows read are the session's Handler_read_*
deltas of the API's connection over one page; the time is the mean of three pages through the app in-process (the
rendering of 200 cards included). One JSON line per count.
"""

from __future__ import annotations

import argparse
import time

from falcon import testing

from api.app import create_app
from api.http import Connections
from orchestrator.loop import Orchestrator
from tests.benchmarks.bench_reads import reads_of
from tests.benchmarks.common import ascending_counts, figure, fresh_database, world_on
from tests.console.conftest import sign_in
from tests.support import signals as signal_support


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--in-review", type=ascending_counts, default=ascending_counts("100,300,1000,3000"),
                        help="instances in review at each measure, ascending (comma list)")
    counts = parser.parse_args().in_review
    dsn = fresh_database("weave_bench_review")
    world = world_on(dsn)
    db = world.db
    orch = Orchestrator(dsn, concurrency=1, spread=False)
    world.publish(signal_support.signal_flow("waits", timeout_ms=1_000))
    connections = Connections(dsn)
    client = testing.TestClient(create_app(connections))
    cookies = sign_in(client, world.token, world.namespace)

    def page() -> None:
        shown = client.simulate_get("/console/review", cookies=cookies)
        assert shown.status_code == 200, shown.text[:300]

    started = 0
    for count in counts:
        for n in range(started, count):
            world.start("waits", {"order_id": f"o-{n}"})
        started = count
        db.advance(2_000)
        orch.drain()  # every wait times out into review
        page()
        rows = reads_of(connections.get(), page)
        begun = time.perf_counter()
        for _ in range(3):
            page()
        figure("review queue", in_review=count, shown=min(count, 200), rows_read=rows,
               page_ms=round((time.perf_counter() - begun) / 3 * 1000, 1))
    orch.close()
    connections.discard()
    db.close()


if __name__ == "__main__":
    main()
