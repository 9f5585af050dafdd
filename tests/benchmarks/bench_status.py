"""The live figures (`weave_status`: the console's dashboard, `weave status`, /metrics) against how many instances are
running: the rows the call makes the server read and its time, as live work grows.

    python -m tests.benchmarks.bench_status [--running 1000,10000,100000]

One instance of a one-TIMER flow (an hour's delay) is started through the engine, then cloned with its checkpoint by
INSERT ... SELECT up to each count (the figures read the instances' status index and the checkpoints; the clones
carry nothing else, so the database is for this benchmark alone and dropped after). Rows read are the session's
Handler_read_* deltas, the least of three calls after a warm one; the time is the mean of five calls. One JSON line
per count.
"""

from __future__ import annotations

import argparse
import functools
import time

from procedures import db as dbmod
from tests.benchmarks.bench_reads import reads_of
from tests.benchmarks.bench_scan import seq
from tests.benchmarks.common import ascending_counts, drop_database, figure, fresh_database, world_on
from tests.support.db import Db

FLOW = {"name": "waits", "steps": [{"key": "wait", "type": "TIMER", "delay_ms": 3_600_000}]}


def _clone(db: Db, table: str, key: str, first: int, count: int, source: int, renames: dict[str, str]) -> None:
    """``count`` copies of the rows of ``table`` whose ``key`` is ``source``, each column as the source's but those
    ``renames`` gives (expressions over the source row ``o`` and the copy's number ``s.n``)."""
    columns = [r["c"] for r in db.rows("SELECT COLUMN_NAME AS c FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = "
                                       "DATABASE() AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION", table)]
    values = ", ".join(renames.get(c, f"o.{c}").format(first=first) for c in columns)
    db.execute(f"INSERT INTO {table} ({', '.join(columns)}) SELECT {values} FROM {table} o, {seq(count)} "
               f"AND o.{key} = {source}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--running", type=ascending_counts, default=ascending_counts("1000,10000,100000"),
                        help="instances running at each measure, ascending (comma list)")
    counts = parser.parse_args().running
    dsn = fresh_database("weave_bench_status")
    world = world_on(dsn)
    db = world.db
    world.publish(FLOW)
    source = world.internal_id(world.start("waits"))
    have = 1
    try:
        for count in counts:
            if count > have:
                n = count - have
                _clone(db, "weave_instances", "id", have, n, source,
                       {"id": "o.id + s.n + {first}", "idempotency_key": "CONCAT('clone-', s.n + {first})"})
                _clone(db, "weave_pending_advances", "instance_id", have, n, source,
                       {"id": "o.id + s.n + {first}", "instance_id": "o.instance_id + s.n + {first}"})
                have = count
            conn = db.connect()
            try:
                call = functools.partial(dbmod.call, conn, "weave_status")
                rows = reads_of(conn, call)
                begun = time.perf_counter()
                for _ in range(5):
                    call()
                figure("live figures", running=have, rows_read=rows,
                       call_ms=round((time.perf_counter() - begun) / 5 * 1000, 1))
            finally:
                conn.close()
    finally:
        db.close()
        drop_database(dsn)


if __name__ == "__main__":
    main()
