"""Generates docs/sql-api.md from the routine headers: ``python -m procedures.docs [--check]``.

The header (the routine's COMMENT) is the single source: it is what ``information_schema.ROUTINES``
shows a DBA, and what this reference prints. A test keeps the checked-in file current.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from .errors import ERRORS, VALIDATION_CODES
from .installer import PROCEDURES_DIR, shipped_routines

TARGET = PROCEDURES_DIR.parent / "docs" / "sql-api.md"
_SIGNATURE = re.compile(r"CREATE\s+PROCEDURE\s+(\w+)\s*\((.*?)\)\s*COMMENT\s+'((?:[^']|'')*)'", re.S | re.I)


def _parse(text: str) -> tuple[str, list[str], str]:
    match = _SIGNATURE.search(text)
    if not match:
        raise ValueError("routine header not found")
    name, params, comment = match.groups()
    parameters = [" ".join(p.split()) for p in params.split(",") if p.strip()]
    return name, parameters, comment.replace("''", "'")


def render() -> str:
    public, internal = [], []
    for routine in shipped_routines():
        name, params, comment = _parse(routine.text)
        (internal if name.startswith("_") else public).append((name, params, comment))
    out = ["# SQL reference", "",
           "Generated from the routine headers in `procedures/` by `python -m procedures.docs`; do not edit.",
           "Every public routine can be called from any SQL client (`CALL name(...)`): it authenticates, validates",
           "and owns its transaction. Errors are `SQLSTATE 45000` with the errno below and a `MESSAGE_TEXT` that",
           "starts with the stable code.", "", "## Public routines", ""]
    for name, params, comment in public:
        out += [f"### `{name}`", "", "```sql", f"CALL {name}({', '.join(p.split()[1] for p in params)})", "```", ""]
        if params:
            out += ["Parameters: " + "; ".join(f"`{p}`" for p in params), ""]
        out += [comment.strip(), ""]
    out += ["## Error numbers", "", "| errno | code | HTTP |", "| --- | --- | --- |"]
    out += [f"| {errno} | `{code}` | {status} |"
            for code, (errno, status) in sorted(ERRORS.items(), key=lambda x: x[1])]
    out += [f"| {errno} | `VALIDATION_FAILED` / `{code}` | 422 |"
            for code, errno in sorted(VALIDATION_CODES.items(), key=lambda x: x[1])]
    out += ["", "## Internal routines", "", "Not an interface: called only by the routines above.", ""]
    out += [f"- `{name}` — {comment.strip().splitlines()[0].removeprefix('Internal. Description: ')}"
            for name, _, comment in internal]
    return "\n".join(out) + "\n"


def write_or_check(target: Path, text: str, command: str, argv: list[str]) -> int:
    """Write a generated reference, or with --check only say whether the checked-in copy is current."""
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
