"""docs/reporting.md lists every event type the routines write into weave_events.type and every action they
write into weave_audit.action, and nothing else: reports built on the tables count by these names.

Pure file reading. The names are found where the rows are written (every INSERT INTO weave_events / weave_audit
in procedures/**/*.sql) and followed back through the routines: a literal, an IF or CASE of literals, a CONCAT,
a local variable (its SET and DECLARE ... DEFAULT, or the OUT parameter of a routine it is passed to), or an IN
parameter (the argument every CALL of the routine passes there). A value read from a table cannot be followed:
such an expression must be listed in DYNAMIC with what it can be, or this test fails and says where it is.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROCEDURES = ROOT / "procedures"
GUIDE = ROOT / "docs" / "reporting.md"

# Expressions whose values come from a table row, keyed by (routine, expression as written with single spaces),
# with the values they can take and the guard in the same routine that keeps them to those values.
DYNAMIC: dict[tuple[str, str], tuple[set[str], re.Pattern[str]]] = {
    ("_weave_inbox_apply", "CONCAT('TASK_', v_kind)"): (
        {"TASK_FAILED", "TASK_UNKNOWN", "TASK_EXPIRED"},
        re.compile(r"IF\s+v_code\s+NOT\s+IN\s*\(([^)]*)\)"),
    ),
}

_HEADER = re.compile(r"CREATE\s+(?:PROCEDURE|FUNCTION)\s+(\w+)\s*\(", re.I)
_CALL = re.compile(r"\bCALL\s+(\w+)\s*\(", re.I)
_INSERT = re.compile(r"\bINSERT\s+INTO\s+(weave_events|weave_audit)\b", re.I)
_LITERAL = re.compile(r"'((?:[^']|'')*)'\Z")
_IDENT = re.compile(r"[A-Za-z_]\w*\Z")


class Unresolved(Exception):
    """An expression whose values the routines alone do not tell."""


def _strip_comments(text: str) -> str:
    """The SQL without its -- comments, string literals kept whole."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if c == "'":
            j = i + 1
            while j < n:
                if text[j] == "'" and j + 1 < n and text[j + 1] == "'":
                    j += 2
                elif text[j] == "'":
                    break
                else:
                    j += 1
            out.append(text[i:j + 1])
            i = j + 1
        elif text.startswith("--", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _outside_literals(text: str, start: int = 0) -> Iterator[tuple[int, str, int]]:
    """(index, character, parenthesis depth after it) of every character of text from start that is outside a
    string literal."""
    depth, i, quote = 0, start, False
    while i < len(text):
        c = text[i]
        if quote:
            if c == "'" and text[i + 1:i + 2] == "'":
                i += 1
            elif c == "'":
                quote = False
        elif c == "'":
            quote = True
        else:
            depth += {"(": 1, ")": -1}.get(c, 0)
            yield i, c, depth
        i += 1


def _balanced(text: str, start: int) -> tuple[str, int]:
    """The text inside the parenthesis that opens at text[start], and the index after its closing one."""
    assert text[start] == "("
    for i, c, depth in _outside_literals(text, start):
        if c == ")" and depth == 0:
            return text[start + 1:i], i + 1
    raise AssertionError(f"unbalanced parenthesis at {text[start:start + 60]!r}")


def _split(text: str, sep: str = ",") -> list[str]:
    """Top-level parts of text, split at sep outside parentheses and string literals."""
    parts, last = [], 0
    for i, c, depth in _outside_literals(text):
        if c == sep and depth == 0:
            parts.append(text[last:i].strip())
            last = i + 1
    parts.append(text[last:].strip())
    return parts


class Routine:
    def __init__(self, name: str, params: list[tuple[str, str]], body: str):
        self.name, self.params, self.body = name, params, body  # params: (mode, name), mode IN/OUT/INOUT

    def index(self, param: str) -> int:
        return [p for _, p in self.params].index(param)


@cache
def _routines() -> dict[str, Routine]:
    found = {}
    for path in sorted(PROCEDURES.rglob("*.sql")):
        text = _strip_comments(path.read_text())
        head = _HEADER.search(text)
        assert head, f"{path}: no CREATE PROCEDURE or CREATE FUNCTION"
        inside, end = _balanced(text, head.end() - 1)
        params = []
        for part in _split(inside):
            words = part.split()
            if not words:
                continue
            mode = words[0].upper() if words[0].upper() in ("IN", "OUT", "INOUT") else "IN"
            params.append((mode, words[1] if mode == words[0].upper() else words[0]))
        found[head.group(1)] = Routine(head.group(1), params, text[end:])
    return found


def _calls_of(callee: str) -> list[tuple[Routine, list[str]]]:
    calls = []
    for routine in _routines().values():
        for match in _CALL.finditer(routine.body):
            if match.group(1) == callee:
                calls.append((routine, _split(_balanced(routine.body, match.end() - 1)[0])))
    return calls


def _assignments(routine: Routine, var: str) -> list[str | tuple]:
    """Every expression assigned to var in routine: SET (one or several assignments) and DECLARE ... DEFAULT."""
    found: list[str | tuple] = []
    for match in re.finditer(r"\bSET\s+(.*?);", routine.body, re.I | re.S):
        for part in _split(match.group(1)):
            name, sep, expr = part.partition("=")
            if sep and name.strip() == var:
                found.append(expr.strip())
    for match in re.finditer(rf"\bDECLARE\s+{var}\b[^;]*?\bDEFAULT\s+(.*?);", routine.body, re.I | re.S):
        found.append(match.group(1).strip())
    if re.search(rf"\bINTO\s+(?:\w+\s*,\s*)*{var}\b", routine.body, re.I):
        raise Unresolved(f"{routine.name}: {var} is read from a table")
    for match in _CALL.finditer(routine.body):
        callee = _routines().get(match.group(1))
        args = _split(_balanced(routine.body, match.end() - 1)[0])
        for position, arg in enumerate(args):
            if arg == var and callee is not None and callee.params[position][0] in ("OUT", "INOUT"):
                found.append(("OUT", callee, callee.params[position][1]))
    return found


def _values(routine: Routine, expr: str | tuple, seen: frozenset = frozenset()) -> set[str]:
    """The string values expr can take in routine (NULL contributes none)."""
    if isinstance(expr, tuple):  # an OUT parameter of a callee
        _, callee, param = expr
        return _values(callee, param, seen)
    expr = " ".join(expr.split())
    key = (routine.name, expr)
    if key in DYNAMIC:
        return set(DYNAMIC[key][0])
    if key in seen:
        return set()
    seen = seen | {key}
    if expr.upper() == "NULL":
        return set()
    literal = _LITERAL.match(expr)
    if literal and expr.startswith("'"):
        return {literal.group(1).replace("''", "'")}
    call = re.match(r"(\w+)\s*\(", expr)
    if call and expr.endswith(")") and _balanced(expr, call.end() - 1)[1] == len(expr):
        function, args = call.group(1).upper(), _split(_balanced(expr, call.end() - 1)[0])
        if function == "IF":
            return _values(routine, args[1], seen) | _values(routine, args[2], seen)
        if function == "COALESCE":
            return set().union(*(_values(routine, a, seen) for a in args))
        if function == "CONCAT":
            results = {""}
            for arg in args:
                options = _values(routine, arg, seen)
                if not options:
                    raise Unresolved(f"{routine.name}: {expr}")
                results = {r + o for r in results for o in options}
            return results
        raise Unresolved(f"{routine.name}: {expr}")
    if expr.upper().startswith("CASE") and expr.upper().endswith("END"):
        branches = re.findall(r"\b(?:THEN|ELSE)\s+('(?:[^']|'')*'|\w+)", expr, re.I)
        return set().union(*(_values(routine, r, seen) for r in branches))
    if _IDENT.match(expr):
        if expr in [p for _, p in routine.params]:
            mode = routine.params[routine.index(expr)][0]
            if mode == "OUT":
                return set().union(set(), *(_values(routine, a, seen) for a in _assignments(routine, expr)))
            callers = _calls_of(routine.name)
            if not callers:
                raise Unresolved(f"{routine.name}: {expr} is a parameter of a public routine")
            return set().union(*(_values(caller, args[routine.index(expr)], seen) for caller, args in callers))
        assigned = _assignments(routine, expr)
        if not assigned:
            raise Unresolved(f"{routine.name}: {expr} is never assigned")
        return set().union(*(_values(routine, a, seen) for a in assigned))
    raise Unresolved(f"{routine.name}: {expr}")


def _written(table: str, column: str) -> set[str]:
    """Every value the routines write into table.column."""
    values: set[str] = set()
    inserts = 0
    for routine in _routines().values():
        for match in _INSERT.finditer(routine.body):
            if match.group(1) != table:
                continue
            inserts += 1
            rest = routine.body[match.end():]
            opening = rest.index("(")
            columns, after = _balanced(rest, opening)
            names = [c.strip() for c in _split(columns)]
            tail = rest[after:].lstrip()
            assert tail.upper().startswith("VALUES"), f"{routine.name}: INSERT INTO {table} is not INSERT ... VALUES"
            position = 0
            tail = tail[len("VALUES"):]
            while True:
                tail = tail.lstrip()
                if not tail.startswith("("):
                    break
                row, after = _balanced(tail, 0)
                values |= _values(routine, _split(row)[names.index(column)])
                tail = tail[after:].lstrip()
                position += 1
                if not tail.startswith(","):
                    break
                tail = tail[1:]
            assert position, f"{routine.name}: INSERT INTO {table} has no row of VALUES"
    assert inserts, f"no routine writes {table}"
    return values


def _guide_table(heading: str) -> set[str]:
    """The names in the first column of the table under the guide's section heading."""
    text = GUIDE.read_text()
    match = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert match, f"docs/reporting.md has no section '## {heading}'"
    names: set[str] = set()
    for line in match.group(1).splitlines():
        cells = line.split("|")
        if len(cells) > 2 and not set(cells[1].strip()) <= set("-: "):
            names |= set(re.findall(r"`([^`]+)`", cells[1]))
    assert names, f"the section '{heading}' has no table"
    return names


def test_every_dynamic_value_is_kept_to_its_list_by_a_guard_in_the_routine() -> None:
    for (routine, expr), (values, pattern) in DYNAMIC.items():
        body = _routines()[routine].body
        assert expr in " ".join(body.split()), f"{routine} no longer builds {expr}: update DYNAMIC"
        guard = pattern.search(body)
        assert guard, f"{routine}: the guard of {expr} is gone"
        assert set(re.findall(r"'([^']*)'", guard.group(1))) == values


def test_the_collector_finds_names_written_in_every_way() -> None:
    events = _written("weave_events", "type")
    actions = _written("weave_audit", "action")
    # A literal, an IF, a CASE in a caller, a parameter two calls up, a CONCAT of a parameter, an OUT parameter.
    assert {"INSTANCE_STARTED", "SIGNAL_ACCEPTED", "SIGNAL_REJECTED", "POLL_UNKNOWN", "TIMER_SETTLED",
            "TASK_FAILED", "STEP_ACTIVATED"} <= events
    assert {"instance.start", "instance.pause", "step.continue", "app.put", "poll.round", "task.create",
            "credential.disable"} <= actions


def test_every_event_type_is_in_the_guide_and_the_guide_lists_no_other() -> None:
    written, listed = _written("weave_events", "type"), _guide_table("Event types")
    assert not written - listed, f"event types missing from docs/reporting.md: {sorted(written - listed)}"
    assert not listed - written, f"docs/reporting.md lists event types no routine writes: {sorted(listed - written)}"


def test_every_audit_action_is_in_the_guide_and_the_guide_lists_no_other() -> None:
    written, listed = _written("weave_audit", "action"), _guide_table("Audit actions")
    assert not written - listed, f"audit actions missing from docs/reporting.md: {sorted(written - listed)}"
    assert not listed - written, f"docs/reporting.md lists audit actions no routine writes: {sorted(listed - written)}"
