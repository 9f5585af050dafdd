"""Generates docs/sql-api.md from the routine headers: ``python -m procedures.docs [--check]``.

The header (the routine's COMMENT) is the single source: it is what ``information_schema.ROUTINES``
shows a DBA, and what this reference prints. A test keeps the checked-in file current.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from . import inlining
from .errors import ERRORS, TRANSIENT_CODES, TRANSIENT_ERRNOS, VALIDATION_CODES
from .installer import PROCEDURES_DIR, shipped_routines

TARGET = PROCEDURES_DIR.parent / "docs" / "sql-api.md"
_SIGNATURE = re.compile(r"CREATE\s+(?:PROCEDURE|FUNCTION)\s+(\w+)\s*\((.*?)\)\s*"
                        r"(?:RETURNS\s+\w+(?:\(\d+\))?(?:\s+UNSIGNED)?\s+)?COMMENT\s+'((?:[^']|'')*)'", re.S | re.I)


def _parse(text: str) -> tuple[str, list[str], str]:
    match = _SIGNATURE.search(text)
    if not match:
        raise ValueError("routine header not found")
    name, params, comment = match.groups()
    parameters = [" ".join(p.split()) for p in params.split(",") if p.strip()]
    return name, parameters, comment.replace("''", "'")


AREAS = {
    "core": "Core: clock, errors, events, audit, authorization, instance lock, checkpoints and the scan",
    "instances": "Instances: start, read, list, the ROOT graph walk and step activation",
    "timers": "Timers",
    "polls": "Polls",
    "signals": "Signals",
    "pulse": "Pulse: tasks, attempts, permits, leases and the inbox",
    "control": "Control: pause, resume, cancel, deadline and recovery",
    "admin": "Administration: namespaces, credentials, console sessions, apps, queues and definitions",
}


def render() -> str:
    by_area: dict[str, list[tuple[str, list[str], str, bool, bool]]] = {area: [] for area in AREAS}
    for routine in shipped_routines():
        name, params, comment = _parse(routine.text)
        inlined = bool(inlining.MARKER.search(routine.text))
        by_area[routine.area].append((name, params, comment, routine.public, inlined))
    out = ["# SQL reference", "",
           "Generated from the routine headers in `procedures/<area>/` by `python -m procedures.docs`; do not edit.",
           "Every public routine can be called from any SQL client (`CALL name(...)`): it authenticates, validates",
           "and owns its transaction. Errors are `SQLSTATE 45000` with the errno below and a `MESSAGE_TEXT` that",
           "starts with the stable code. Internal routines (their header opens `Internal.`) are not an interface:",
           "they are called only by other routines. Those marked *inlined* are installed also as a block in place of",
           "each call of them (`procedures/inlining.py`): a caller's installed text holds their body.", "",
           "Times passed in are UTC, written `YYYY-MM-DD HH:MM:SS[.ffffff]` with no zone or offset: a session whose",
           "`sql_mode` is not strict would drop an offset with only a warning, and the time would be off by it. Do not",
           "call the routines while the session holds `LOCK TABLES`: one that owns its transaction starts it, and the",
           "server releases a session's table locks when a transaction starts. Text parameters are converted from",
           "the connection's character set; a signal's payload and correlation key are bytes (`LONGBLOB`,",
           "`VARBINARY`), UTF-8 as the engine takes them: on a connection of another character set send them through",
           "`CONVERT(? USING utf8mb4)`.", "",
           "Besides the errors each routine lists, any of them may answer:", "",
           "- `50013 IN_TRANSACTION` from a routine that owns its transaction, called inside one of yours (before it",
           "  reads anything; nothing of yours is touched);",
           "- `50017 CLOCK_FIXED` from a routine that decides or takes a token (and `weave_console_session_get`),",
           "  called in a session whose clock is fixed with `SET timestamp` (more than a second from the server's):",
           "  the engine decides, and tells whether a credential or a session has expired, by the server's clock",
           "  only, so it refuses before it reads anything; `SET timestamp = DEFAULT` first. A server started with",
           "  `--sysdate-is-now` cannot tell the two clocks apart;",
           "- one of the server's transient errors, after which the same call may be made again:",
           "  " + ", ".join(str(e) for e in sorted(TRANSIENT_ERRNOS) if not 2000 <= e < 3000 and e < 50000) + ";",
           "  1205 is a lock wait timeout, 1213 a deadlock. The routine's work is undone, unless an interrupt came",
           "  after its commit, while it answered (then a call with an idempotency key answers its first outcome",
           "  again). Two of them, 1317 (`KILL QUERY`) and 1969 (`max_statement_time`), can also stop a routine",
           "  between two statements, where none of its handlers runs: roll back (`ROLLBACK`, never `COMMIT`) before",
           "  anything else, since a transaction it began may still be open. An interrupt may also come back as the",
           "  error of the statement it cut short (seen: 1048, a value it left NULL); the routine's handler has then",
           "  undone its work. A `KILL QUERY` that lands in a subquery of a statement's select list is given no",
           "  error at all on MariaDB 10.11 (the subquery comes back empty, and the kill is forgotten): the",
           "  routines' reads that such a kill can empty raise 50016 INTERRUPTED themselves (transient), and their",
           "  work is undone as for the server's own interrupt. Weave's own connections take no statement time limit;",
           "- under a strict `sql_mode`, the server's 1406 (or 1265, 1366) for an argument longer than its parameter,",
           "  or of another type, before the routine runs; a lax mode would cut it short: call in a strict one.",
           "", "Drivers that read error numbers as signed 16-bit values (PyMySQL) show 50013 as -15523: take it modulo",
           "65,536.", ""]
    for area, title in AREAS.items():
        routines = by_area[area]
        if not routines:
            continue
        out += [f"## {title}", ""]
        for name, params, comment, public, _ in routines:
            if not public:
                continue
            out += [f"### `{name}`", "", "```sql", f"CALL {name}({', '.join(p.split()[1] for p in params)})", "```", ""]
            if params:
                out += ["Parameters: " + "; ".join(f"`{p}`" for p in params), ""]
            out += [comment.strip(), ""]
        internal = [(name, comment, inlined) for name, _, comment, public, inlined in routines if not public]
        if internal:
            out += ["Internal routines of this area:", ""]
            out += [f"- `{name}`{' *(inlined)*' if inlined else ''} — "
                    f"{comment.strip().splitlines()[0].removeprefix('Internal. Description: ')}"
                    for name, comment, inlined in internal]
            out += [""]
    out += ["## Error numbers", "", "| errno | code | HTTP |", "| --- | --- | --- |"]
    out += [f"| {errno} | `{code}` | {status} |"
            for code, (errno, status) in sorted(ERRORS.items(), key=lambda x: x[1])]
    out += [f"| {errno} | `VALIDATION_FAILED` / `{code}` | 422 |"
            for code, errno in sorted(VALIDATION_CODES.items(), key=lambda x: x[1])]
    out += [f"| {errno} | `{code}` (transient: the decision is retried) | 503 |"
            for code, errno in sorted(TRANSIENT_CODES.items(), key=lambda x: x[1])]
    return "\n".join(out) + "\n"


def write_or_check(target: Path, text: str, command: str, argv: list[str]) -> int:
    """Write a generated reference, or with --check only say whether the checked-in copy is current."""
    unknown = [arg for arg in argv if arg != "--check"]
    if unknown:
        print(f"usage: {command} [--check]\n\nWrites {target.name} from its source; with --check, writes nothing "
              f"and exits 1 if the checked-in copy is out of date.", file=sys.stderr if unknown != ["--help"]
              and unknown != ["-h"] else sys.stdout)
        return 0 if unknown in (["--help"], ["-h"]) else 2
    if "--check" in argv:
        current = target.read_text() if target.exists() else ""
        if current != text:
            print(f"{target} is out of date: run {command}", file=sys.stderr)
            return 1
        return 0
    target.write_text(text)
    print(f"wrote {target}")
    return 0


def main(argv: list[str]) -> int:
    return write_or_check(TARGET, render(), "python -m procedures.docs", argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
