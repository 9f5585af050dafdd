"""What giving a payload's strings one spelling costs the server, by the shape of its escapes.

    python -m tests.benchmarks.bench_escapes [--rounds 3]

A signal's request digest (S-4) and the comparison of final results (F-5, F-6) read a JSON text whose strings may
be written with escapes, and give every string one spelling first (``_weave_json_escapes_canonical``) whenever the
text holds a backslash. A sender chooses the escapes, so their cost is one a sender can make the server pay: this
measures it on payloads at the 256 KiB limit, each of one shape of escapes, next to the server's own JSON reader on
the same text (``JSON_NORMALIZE``, which every payload goes through beside it), in a database of the engine's
routines of its own. The figure is the server's CPU per call (its threads' run time, as ``bench_cpu`` reads it; the
server must run on this machine), the median over ``--rounds``. The database is dropped afterwards. Not collected
by pytest.
"""

from __future__ import annotations

import argparse
import json
import statistics

from procedures import db as dbmod
from procedures import installer
from tests.benchmarks.common import bench_dsn, figure, server_cpu_seconds, server_pid

LIMIT = 256 * 1024


def _filled(unit: str, limit: int = LIMIT - 64) -> str:
    """``{"t": "<unit><unit>..."}`` (as json.dumps writes it, every character beyond ASCII escaped), under ``limit``."""
    per_unit = len(json.dumps(unit)) - 2  # without its quotes
    return json.dumps({"t": unit * ((limit - len('{"t": ""}')) // per_unit)})


SHAPES = {
    "another script, every character escaped": _filled("中文字"),
    "Latin with accents, one escape in six characters": _filled("Zoë Mü"),
    "characters beyond the BMP (surrogate pairs)": _filled("😀"),
    "a JSON text carried in a string (quotes, newlines)": _filled('{"a": "b"}\n'),
    "escaped slashes": _filled("a/b", (LIMIT - 64) * 3 // 4).replace("/", "\\/"),
    "decoded and kept escapes alternating": _filled('é"'),
    "control characters (each rewritten alone)": _filled("\x01"),
    "many short strings of one escape each": json.dumps(["Zoë"] * ((LIMIT - 64) // 12)),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="calls per shape, the median kept (default 3)")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    dsn = bench_dsn("escapes")
    installer.migrate(dsn)
    try:
        with dbmod.connect(dsn) as conn, conn.cursor() as cur:
            pid = server_pid(conn)
            for shape, text in SHAPES.items():
                assert len(text.encode()) <= LIMIT, shape
                costs: dict[str, list[float]] = {"canonical": [], "reader": []}
                for _ in range(args.rounds):
                    for kind, sql in (("canonical", "SELECT _weave_json_escapes_canonical(%s) AS x"),
                                      ("reader", "SELECT JSON_NORMALIZE(%s) AS x")):
                        before = server_cpu_seconds(pid)
                        cur.execute(sql, (text,))
                        cur.fetchall()
                        costs[kind].append(server_cpu_seconds(pid) - before)
                ms = {kind: statistics.median(values) * 1000 for kind, values in costs.items()}
                figure("escapes, server CPU per 256 KiB payload", shape=shape, kib=round(len(text.encode()) / 1024),
                       escapes=text.count("\\"), canonical_ms=round(ms["canonical"], 1),
                       json_reader_ms=round(ms["reader"], 1),
                       ratio=round(ms["canonical"] / ms["reader"], 1) if ms["reader"] else None)
    finally:
        with dbmod.connect(dsn, database=False) as conn, conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{dsn.database}`")


if __name__ == "__main__":
    main()
