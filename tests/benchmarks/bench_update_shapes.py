"""What a multi-table UPDATE costs against the single-table UPDATEs of the same rows, on this server.

    python -m tests.benchmarks.bench_update_shapes [--n 20000] [--rounds 3]

The statement targets of spec 08 reward writing several rows a decision holds in one statement, and the engine's
decisions do (a step with its instance, activation and wait; a round with its poll state and instance). Whether
that also saves the server's CPU is measured here, apart from the engine: in a database of its own, four tables of
1,000 rows each and one procedure per shape, each making ``--n`` transactions in a loop on one connection, each
transaction updating rows of one key in one or more of the tables and committing:

- ``one row``: one single-table UPDATE (the reference);
- ``2 rows, 2 statements`` and ``2 rows, 1 multi-table statement``;
- ``4 rows, 4 statements`` and ``4 rows, 1 multi-table statement`` (joined as the engine joins them,
  ``STRAIGHT_JOIN`` and one ``LEFT JOIN``).

The figure is the server's CPU per transaction (its threads' run time, as ``bench_cpu`` reads it; the server
must run on this machine), the median over ``--rounds`` rounds, the shapes taking turns in each round in an
order that is reversed every other round (the machine's speed drifts). ``extra_us`` is a shape's cost above the
one-row reference: what its other rows and its shape add. The database is dropped afterwards. Not collected by
pytest.
"""

from __future__ import annotations

import argparse
import statistics

from procedures import db as dbmod
from tests.benchmarks.bench_scan import seq
from tests.benchmarks.common import bench_dsn, figure, server_cpu_seconds, server_pid

TABLES = ("a", "b", "c", "d")

SHAPES = {
    "one row": ["UPDATE a SET x = x + 1, y = NOW(6), o = 'out' WHERE id = v_key;"],
    "2 rows, 2 statements": ["UPDATE a SET x = x + 1, y = NOW(6), o = 'out' WHERE id = v_key;",
                             "UPDATE b SET x = x + 1, y = NOW(6) WHERE id = v_key;"],
    "2 rows, 1 multi-table statement": [
        "UPDATE a STRAIGHT_JOIN b ON b.id = a.id SET a.x = a.x + 1, a.y = NOW(6), a.o = 'out', b.x = b.x + 1, "
        "b.y = NOW(6) WHERE a.id = v_key;"],
    "4 rows, 4 statements": ["UPDATE a SET x = x + 1, y = NOW(6), o = 'out' WHERE id = v_key;",
                             "UPDATE b SET x = x + 1, y = NOW(6) WHERE id = v_key;",
                             "UPDATE c SET x = x + 1, y = NOW(6) WHERE id = v_key;",
                             "UPDATE d SET x = x + 1, y = NOW(6) WHERE id = v_key;"],
    "4 rows, 1 multi-table statement": [
        "UPDATE a STRAIGHT_JOIN b ON b.id = a.id STRAIGHT_JOIN c ON c.id = a.id LEFT JOIN d ON d.id = a.id "
        "SET a.x = a.x + 1, a.y = NOW(6), a.o = 'out', b.x = b.x + 1, b.y = NOW(6), c.x = c.x + 1, "
        "c.y = NOW(6), d.x = d.x + 1, d.y = NOW(6) WHERE a.id = v_key;"],
}


def procedure(name: str, statements: list[str]) -> str:
    body = "\n        ".join(statements)
    return f"""CREATE PROCEDURE {name}(IN in_n INT)
BEGIN
    DECLARE v_i INT DEFAULT 0;
    DECLARE v_key INT;
    WHILE v_i < in_n DO
        SET v_key = 1 + v_i MOD 1000;
        START TRANSACTION;
        {body}
        COMMIT;
        SET v_i = v_i + 1;
    END WHILE;
END"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=20_000, help="transactions per shape and round (default 20,000)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds, each running every shape once (default 3)")
    args = parser.parse_args()
    if args.n < 1 or args.rounds < 1:
        parser.error("--n and --rounds must be at least 1")
    dsn = bench_dsn("update_shapes")
    names = {shape: f"shape_{i}" for i, shape in enumerate(SHAPES)}
    with dbmod.connect(dsn, database=False) as conn, conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{dsn.database}`")
        cur.execute(f"CREATE DATABASE `{dsn.database}`")
        try:
            cur.execute(f"USE `{dsn.database}`")
            for table in TABLES:
                extra = ", o LONGTEXT" if table == "a" else ""
                cur.execute(f"CREATE TABLE {table} (id INT PRIMARY KEY, x INT NOT NULL, y DATETIME(6){extra}) "
                            "ENGINE=InnoDB")
                cur.execute(f"INSERT INTO {table} (id, x, y) SELECT n, 0, NOW(6) FROM {seq(1000)}")
            for shape, statements in SHAPES.items():
                cur.execute(procedure(names[shape], statements))
            pid = server_pid(conn)
            for shape in SHAPES:  # once each before measuring: routines parsed, pages in the buffer pool
                cur.execute(f"CALL {names[shape]}(%s)", (min(args.n, 1000),))
            per_round: dict[str, list[float]] = {shape: [] for shape in SHAPES}
            for r in range(args.rounds):
                order = list(SHAPES) if r % 2 == 0 else list(reversed(SHAPES))
                for shape in order:
                    before = server_cpu_seconds(pid)
                    cur.execute(f"CALL {names[shape]}(%s)", (args.n,))
                    per_round[shape].append((server_cpu_seconds(pid) - before) / args.n * 1e6)
        finally:
            cur.execute(f"DROP DATABASE IF EXISTS `{dsn.database}`")
    reference = statistics.median(per_round["one row"])
    for shape, values in per_round.items():
        us = statistics.median(values)
        figure("UPDATE shapes, server CPU per transaction", shape=shape, n=args.n, rounds=args.rounds,
               us=round(us, 1), per_round_us=[round(v, 1) for v in values], extra_us=round(us - reference, 1))


if __name__ == "__main__":
    main()
