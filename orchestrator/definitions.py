"""Workflow definition documents: validation, defaults, canonical form, digest and compiled expressions.

A definition is checked once, when it is published, so that every later stage can trust it. All
problems are reported together, each with a dotted field path and a stable code. Defaults are filled
in, so the same workflow written with or without them has one canonical form and one digest. Every
expression-bearing field is compiled into a template that the SQL layer applies with ``JSON_SET``
when the step is activated: expressions are resolved once, then frozen (04-polls, P-4).

A template is ``{"skeleton": <the field's value, each expression replaced by null>, "bindings":
[[target_path, source_path], ...]}``: for each binding, the value at ``source_path`` in the context
document ``{"input": ..., "steps": {<key>: {"output": ...}}}`` goes to ``target_path`` in the
skeleton. Both are MySQL/MariaDB JSON paths.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple, TypedDict

__all__ = [
    "CompiledStep",
    "Definition",
    "DefinitionError",
    "FieldError",
    "Template",
    "parse_json_strict",
    "validate",
]


class FieldError(NamedTuple):
    """One problem: where (a dotted path, "" for the whole document), a stable code, and why."""

    field: str
    code: str
    message: str


class DefinitionError(ValueError):
    """A definition was rejected; ``errors`` holds every problem found, not just the first."""

    def __init__(self, errors: list[FieldError]) -> None:
        super().__init__(errors)
        self.errors = list(errors)

    def __str__(self) -> str:
        count = len(self.errors)
        lines = [f"invalid workflow definition ({count} problem{'' if count == 1 else 's'})"]
        lines += [f"  {error.field or '(document)'}: {error.code}: {error.message}" for error in self.errors]
        return "\n".join(lines)


class Template(TypedDict):
    skeleton: Any
    bindings: list[list[str]]


class CompiledStep(TypedDict):
    input: Template
    business_key: Template | None
    mutex_key: Template | None
    correlation: Template | None


@dataclass(frozen=True)
class Definition:
    name: str
    steps: list[dict[str, Any]]
    canonical_json: str
    digest: str
    queues: list[str]
    compiled: dict[str, CompiledStep]
    compiled_json: str


class _Text(NamedTuple):
    pattern: re.Pattern[str]
    description: str


_DAY_MS = 86_400_000
_YEAR_MS = 365 * _DAY_MS
_MAX_STEPS = 256
# Bounds the recursion of the input walk far below Python's limit, and keeps a frozen input within
# MySQL's 100-level JSON nesting limit once it is embedded in larger documents.
_MAX_INPUT_DEPTH = 64
# No stored JSON array can have this many elements, so a larger index can only be a mistake.
_MAX_ARRAY_INDEX = 2**31 - 1
_MAX_KEY_LITERAL_CHARS = 256
_MAX_CORRELATION_BYTES = 512
_MAX_STATUS_CHARS = 64

_DEFINITION_NAME = _Text(re.compile(r"[A-Za-z0-9_.:-]{1,128}"), "1-128 characters of A-Z a-z 0-9 _ . : -")
_STEP_KEY = _Text(re.compile(r"[A-Za-z0-9_.-]{1,64}"), "1-64 characters of A-Z a-z 0-9 _ . -")
_QUEUE = _Text(re.compile(r"[A-Za-z0-9_.:-]{1,64}"), "1-64 characters of A-Z a-z 0-9 _ . : -")
_HANDLER = _Text(re.compile(r"[A-Za-z0-9_.:-]{1,128}"), "1-128 characters of A-Z a-z 0-9 _ . : -")
_VERSION = _Text(re.compile(r"[ -~]{1,32}"), "1-32 printable ASCII characters")
_SIGNAL_NAME = _Text(re.compile(r"[ -~]{1,128}"), "1-128 printable ASCII characters")

_COMMON_FIELDS = frozenset({"key", "type", "after"})
_TASK_FIELDS = _COMMON_FIELDS | {
    "queue", "handler", "handler_version", "input", "task_timeout_ms", "priority", "retry",
    "business_key", "mutex_key",
}
_STEP_FIELDS: dict[str, frozenset[str]] = {
    "TIMER": _COMMON_FIELDS | {"delay_ms"},
    "POLL": _TASK_FIELDS | {"interval_ms", "max_rounds", "timeout_ms", "result", "final_signal"},
    "SIGNAL": _COMMON_FIELDS | {"signal", "correlation", "timeout_ms"},
    "TASK": _TASK_FIELDS,
}
_RETRY_FIELDS = frozenset({"max_attempts", "initial_backoff_ms", "backoff_coefficient", "max_backoff_ms"})
_RESULT_CLASSES = ("pending", "success", "review")
_PAYLOAD_TYPES = ("object", "array", "string", "number", "boolean", "null", "any")

# Expression grammar: a `.name` member may contain "-" ...
_PATH_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
_PATH_INDEX = re.compile(r"[0-9]+")
# ... but the SQL JSON paths we emit leave only keys of this shape unquoted.
_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def parse_json_strict(raw: bytes | str) -> Any:
    """``json.loads`` that also rejects duplicate object keys and non-finite numbers.

    MariaDB reads the first of duplicate keys and Python the last, so a document with duplicates
    would mean different things on each side; NaN and Infinity are not JSON and the database
    refuses them.
    """
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DefinitionError([_invalid_json(f"not UTF-8: invalid byte at offset {exc.start}")]) from exc
    duplicates: dict[int, list[str]] = {}
    # Values dropped for a duplicate key stay referenced so that their ids cannot be reused by a
    # later object while `duplicates` is keyed by id.
    dropped: list[Any] = []

    def object_from_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        obj: dict[str, Any] = {}
        for key, value in pairs:
            if key in obj:
                dropped.append(value)
                if key not in duplicates.setdefault(id(obj), []):
                    duplicates[id(obj)].append(key)
            else:
                obj[key] = value
        return obj

    try:
        value = json.loads(
            raw, object_pairs_hook=object_from_pairs, parse_constant=_reject_constant,
            parse_float=_finite_float,
        )
    except DefinitionError:
        raise
    except json.JSONDecodeError as exc:
        raise DefinitionError([_invalid_json(f"{exc.msg} at line {exc.lineno} column {exc.colno}")]) from exc
    except RecursionError as exc:
        raise DefinitionError([_invalid_json("nested too deeply")]) from exc
    except ValueError as exc:  # e.g. an integer with more digits than Python converts
        raise DefinitionError([_invalid_json(str(exc))]) from exc
    if duplicates:
        raise DefinitionError(_duplicate_key_errors(value, duplicates))
    return value


def validate(doc: Any) -> Definition:
    """Validates a definition document, already parsed or as raw JSON, and compiles it.

    Raises DefinitionError listing every problem found.
    """
    if isinstance(doc, (bytes, str)):
        doc = parse_json_strict(doc)
    return _Validator().definition(doc)


def _invalid_json(message: str) -> FieldError:
    return FieldError("", "INVALID_JSON", message)


def _reject_constant(name: str) -> Any:
    raise DefinitionError([_invalid_json(f"{name} is not a JSON number")])


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise DefinitionError([_invalid_json(f"number {text[:40]} is too large")])
    return value


def _duplicate_key_errors(root: Any, duplicates: dict[int, list[str]]) -> list[FieldError]:
    errors: list[FieldError] = []
    # Iterative, in document order: the parser accepted nesting deeper than a recursive walk allows.
    pending: list[tuple[Any, str]] = [(root, "")]
    while pending:
        node, path = pending.pop()
        if isinstance(node, dict):
            for key in duplicates.get(id(node), []):
                errors.append(FieldError(_member(path, key), "DUPLICATE_JSON_KEY",
                                         f"key {_describe(key)} appears more than once in one object"))
            children = [(value, _member(path, key)) for key, value in node.items()]
        elif isinstance(node, list):
            children = [(value, f"{path}[{index}]") for index, value in enumerate(node)]
        else:
            continue
        pending.extend(reversed(children))
    return errors


def _member(path: str, name: str) -> str:
    """The dotted field path of member `name` of the object at `path`."""
    if not _PLAIN_KEY.fullmatch(name):
        return f"{path}[{json.dumps(name)}]"
    return f"{path}.{name}" if path else name


def _describe(value: Any) -> str:
    """A short rendering of a bad value for a message."""
    if isinstance(value, str):
        return json.dumps(value if len(value) <= 40 else value[:37] + "...")
    if value is None or isinstance(value, (bool, int, float)):
        return json.dumps(value)
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    return f"a Python {type(value).__name__}"


def _is_unicode(text: str) -> bool:
    """False for strings holding lone surrogates (valid JSON escapes, but not storable text)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class _BadPath(ValueError):
    pass


def _parse_path(text: str) -> list[str | int]:
    """Splits `$` followed by `.name`, `["key"]`, `['key']` or `[n]` segments; raises _BadPath."""
    segments: list[str | int] = []
    position = 1
    while position < len(text):
        char = text[position]
        if char == ".":
            match = _PATH_NAME.match(text, position + 1)
            if match is None:
                raise _BadPath(f"expected a member name after '.' at character {position + 1}")
            segments.append(match.group())
            position = match.end()
        elif char == "[":
            position += 1
            if position < len(text) and text[position] in "\"'":
                key, position = _read_quoted_key(text, position)
                segments.append(key)
            else:
                match = _PATH_INDEX.match(text, position)
                if match is None:
                    raise _BadPath(f"expected an index or a quoted key after '[' at character {position}")
                digits = match.group()
                too_big = len(digits) > 10 or int(digits) > _MAX_ARRAY_INDEX
                if too_big or (digits.startswith("0") and digits != "0"):
                    raise _BadPath(f"array index {digits} is not an integer from 0 to {_MAX_ARRAY_INDEX:,}")
                segments.append(int(digits))
                position = match.end()
            if position >= len(text) or text[position] != "]":
                raise _BadPath(f"expected ']' at character {position + 1}")
            position += 1
        else:
            raise _BadPath(f"unexpected {char!r} at character {position + 1}")
    return segments


def _read_quoted_key(text: str, position: int) -> tuple[str, int]:
    """Reads a quoted key starting at the quote; returns it and the position after the closing quote."""
    quote = text[position]
    chars: list[str] = []
    position += 1
    while position < len(text):
        char = text[position]
        if char == quote:
            if not chars:
                raise _BadPath("a quoted key must not be empty")
            return "".join(chars), position + 1
        if char == "\\":
            escaped = text[position + 1:position + 2]
            if escaped not in (quote, "\\"):
                raise _BadPath(f"only \\{quote} and \\\\ may be escaped in a quoted key")
            chars.append(escaped)
            position += 2
        else:
            chars.append(char)
            position += 1
    raise _BadPath("unterminated quoted key")


def _sql_path(segments: tuple[str | int, ...] | list[str | int]) -> str:
    """The MySQL/MariaDB JSON path of `segments`; keys that are not plain identifiers are quoted."""
    parts = ["$"]
    for segment in segments:
        if isinstance(segment, int):
            parts.append(f"[{segment}]")
        elif _PLAIN_KEY.fullmatch(segment):
            parts.append(f".{segment}")
        else:
            # A quoted path key is read as a JSON string by both servers: escape it as one.
            parts.append("." + json.dumps(segment, ensure_ascii=False))
    return "".join(parts)


def _literal_template(value: Any) -> Template:
    return {"skeleton": value, "bindings": []}


class _Validator:
    """Walks one document, collecting every problem instead of stopping at the first."""

    def __init__(self) -> None:
        self.errors: list[FieldError] = []
        self.key_index: dict[str, int] = {}  # step key -> position of its first use
        self.step_keys: list[str | None] = []
        self.predecessors: list[list[int]] = []  # positions each step names in `after`
        self._ancestors: dict[int, set[int]] = {}

    def error(self, field: str, code: str, message: str) -> None:
        self.errors.append(FieldError(field, code, message))

    # Document and steps

    def definition(self, doc: Any) -> Definition:
        if not isinstance(doc, dict):
            raise DefinitionError(
                [FieldError("", "INVALID_TYPE", f"a definition must be a JSON object, got {_describe(doc)}")]
            )
        self.reject_unknown(doc, "", frozenset({"name", "steps"}))
        name = self.text(doc, "", "name", _DEFINITION_NAME)
        steps, compiled = self.steps(doc)
        if self.errors:
            raise DefinitionError(self.errors)
        assert name is not None
        canonical_json = json.dumps(
            {"name": name, "steps": steps}, sort_keys=True, separators=(",", ":"), ensure_ascii=False
        )
        return Definition(
            name=name,
            steps=steps,
            canonical_json=canonical_json,
            digest=hashlib.sha256(canonical_json.encode("utf-8")).hexdigest(),
            queues=sorted({step["queue"] for step in steps if step["type"] in ("POLL", "TASK")}),
            compiled=compiled,
            compiled_json=json.dumps(compiled, sort_keys=True, separators=(",", ":")),
        )

    def steps(self, doc: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, CompiledStep]]:
        steps: list[dict[str, Any]] = []
        compiled: dict[str, CompiledStep] = {}
        if not self.present(doc, "", "steps", required=True):
            return steps, compiled
        raw_steps = doc["steps"]
        if not isinstance(raw_steps, list):
            self.error("steps", "INVALID_TYPE", f"steps must be an array, got {_describe(raw_steps)}")
            return steps, compiled
        if not 1 <= len(raw_steps) <= _MAX_STEPS:
            # Past the limit the steps are not checked one by one: that bounds the work on hostile input.
            self.error("steps", "INVALID_VALUE",
                       f"steps must hold 1 to {_MAX_STEPS} steps, got {len(raw_steps)}")
            return steps, compiled
        self.index_steps(raw_steps)
        for index, raw in enumerate(raw_steps):
            checked = self.step(index, raw)
            if checked is not None:
                steps.append(checked[0])
                compiled[checked[0]["key"]] = checked[1]
        self.report_cycles()
        return steps, compiled

    def index_steps(self, raw_steps: list[Any]) -> None:
        """Records keys and `after` edges before any step is checked, so references can be resolved.

        Any string key is indexed, even one that breaks the key rules, so that the key itself is
        reported and not every reference to it as well.
        """
        for raw in raw_steps:
            key = raw.get("key") if isinstance(raw, dict) else None
            self.step_keys.append(key if isinstance(key, str) else None)
        for index, key in enumerate(self.step_keys):
            if key is not None:
                self.key_index.setdefault(key, index)
        for raw in raw_steps:
            after = raw.get("after") if isinstance(raw, dict) else None
            names = [name for name in after if isinstance(name, str)] if isinstance(after, list) else []
            known = {self.key_index[name] for name in names if name in self.key_index}
            self.predecessors.append(sorted(known))

    def ancestors(self, index: int) -> set[int]:
        """Every step that must succeed before step `index` activates, directly or transitively."""
        if index not in self._ancestors:
            seen: set[int] = set()
            frontier = list(self.predecessors[index])
            while frontier:
                node = frontier.pop()
                if node not in seen:
                    seen.add(node)
                    frontier.extend(self.predecessors[node])
            self._ancestors[index] = seen
        return self._ancestors[index]

    def report_cycles(self) -> None:
        """One CYCLIC_AFTER per group of steps that wait for each other, at its first step."""
        reported: set[int] = set()
        for index in range(len(self.predecessors)):
            if index in reported or index not in self.ancestors(index):
                continue
            group = {other for other in self.ancestors(index) if index in self.ancestors(other)}
            reported |= group
            loop = " -> ".join(str(self.step_keys[node]) for node in self.shortest_loop(index, group))
            self.error(f"steps[{index}].after", "CYCLIC_AFTER",
                       f"steps wait for each other in a cycle: {loop} (each waits for the next)")

    def shortest_loop(self, start: int, group: set[int]) -> list[int]:
        parents: dict[int, int] = {}
        frontier = [start]
        while frontier:
            next_frontier: list[int] = []
            for node in frontier:
                for successor in self.predecessors[node]:
                    if successor == start:
                        loop = [node]
                        while loop[-1] != start:
                            loop.append(parents[loop[-1]])
                        return [*reversed(loop), start]
                    if successor in group and successor not in parents:
                        parents[successor] = node
                        next_frontier.append(successor)
            frontier = next_frontier
        raise AssertionError("start lies on a cycle, so the search returns before the frontier empties")

    def step(self, index: int, raw: Any) -> tuple[dict[str, Any], CompiledStep] | None:
        path = f"steps[{index}]"
        if not isinstance(raw, dict):
            self.error(path, "INVALID_TYPE", f"a step must be a JSON object, got {_describe(raw)}")
            return None
        key = self.text(raw, path, "key", _STEP_KEY)
        if key is not None and self.key_index[key] != index:
            self.error(f"{path}.key", "DUPLICATE_STEP_KEY",
                       f"step key {_describe(key)} is already used by steps[{self.key_index[key]}]")
        step_type = self.step_type(raw, path)
        after = self.after(raw, path)
        if step_type is None:
            return None  # the allowed fields depend on the type, so nothing more can be checked
        self.reject_unknown(raw, path, _STEP_FIELDS[step_type])
        step: dict[str, Any] = {"key": key, "type": step_type, "after": after}
        compiled: CompiledStep = {
            "input": _literal_template({}), "business_key": None, "mutex_key": None, "correlation": None,
        }
        if step_type == "TIMER":
            step["delay_ms"] = self.integer(raw, path, "delay_ms", 1, _YEAR_MS)
        elif step_type == "SIGNAL":
            step["signal"] = self.signal_contract(raw, path)
            step["correlation"], compiled["correlation"] = self.correlation(raw, path, index)
            step["timeout_ms"] = self.integer(raw, path, "timeout_ms", 1, _YEAR_MS)
        else:
            self.task_fields(raw, path, index, step, compiled)
            if step_type == "POLL":
                step["interval_ms"] = self.integer(raw, path, "interval_ms", 1, _DAY_MS)
                step["max_rounds"] = self.integer(raw, path, "max_rounds", 1, 10_000)
                step["timeout_ms"] = self.integer(raw, path, "timeout_ms", 1, _YEAR_MS)
                step["result"] = self.result_classes(raw, path)
                step["final_signal"], compiled["correlation"] = self.final_signal(raw, path, index)
        return step, compiled

    def step_type(self, raw: dict[str, Any], path: str) -> str | None:
        if not self.present(raw, path, "type", required=True):
            return None
        value = raw["type"]
        if not isinstance(value, str):
            self.error(f"{path}.type", "INVALID_TYPE", f"type must be a string, got {_describe(value)}")
            return None
        if value not in _STEP_FIELDS:
            self.error(f"{path}.type", "UNKNOWN_TYPE",
                       f"type must be one of {', '.join(_STEP_FIELDS)}, got {_describe(value)}")
            return None
        return value

    def after(self, raw: dict[str, Any], path: str) -> list[str]:
        if not self.present(raw, path, "after", required=False):
            return []
        value = raw["after"]
        field = f"{path}.after"
        if not isinstance(value, list):
            self.error(field, "INVALID_TYPE", f"after must be an array of step keys, got {_describe(value)}")
            return []
        keys: list[str] = []
        seen: set[str] = set()
        for position, name in enumerate(value):
            item = f"{field}[{position}]"
            if not isinstance(name, str):
                self.error(item, "INVALID_TYPE", f"after must hold step keys, got {_describe(name)}")
                continue
            if name in seen:
                self.error(item, "INVALID_VALUE", f"step {_describe(name)} is listed twice in after")
            elif name not in self.key_index:
                self.error(item, "UNKNOWN_AFTER", f"no step has key {_describe(name)}")
            else:
                keys.append(name)
            seen.add(name)
        return keys

    def task_fields(
        self, raw: dict[str, Any], path: str, index: int, step: dict[str, Any], compiled: CompiledStep
    ) -> None:
        step["queue"] = self.text(raw, path, "queue", _QUEUE)
        step["handler"] = self.text(raw, path, "handler", _HANDLER)
        step["handler_version"] = self.text(raw, path, "handler_version", _VERSION)
        if self.present(raw, path, "input", required=False):
            bindings: list[list[str]] = []
            step["input"], skeleton = self.json_value(raw["input"], f"{path}.input", (), index, bindings, 1)
            compiled["input"] = {"skeleton": skeleton, "bindings": bindings}
        else:
            step["input"] = {}
        step["task_timeout_ms"] = self.integer(raw, path, "task_timeout_ms", 1, _DAY_MS, default=30_000)
        step["priority"] = self.integer(raw, path, "priority", -1000, 1000, default=0)
        step["retry"] = self.retry(raw, path)
        step["business_key"], compiled["business_key"] = self.optional_key(raw, path, "business_key", index)
        step["mutex_key"], compiled["mutex_key"] = self.optional_key(raw, path, "mutex_key", index)

    def retry(self, raw: dict[str, Any], path: str) -> dict[str, Any] | None:
        retry = self.member_object(raw, path, "retry", _RETRY_FIELDS, required=False)
        if retry is None:
            return None
        field = f"{path}.retry"
        initial = self.integer(retry, field, "initial_backoff_ms", 0, _DAY_MS, default=1000)
        maximum = self.integer(retry, field, "max_backoff_ms", 0, _DAY_MS, default=60_000)
        if initial is not None and maximum is not None and maximum < initial:
            shown = f"{maximum:,}" if "max_backoff_ms" in retry else f"the default {maximum:,}"
            self.error(f"{field}.max_backoff_ms", "OUT_OF_RANGE",
                       f"max_backoff_ms ({shown}) must be at least initial_backoff_ms ({initial:,})")
        return {
            "max_attempts": self.integer(retry, field, "max_attempts", 1, 100, default=3),
            "initial_backoff_ms": initial,
            "backoff_coefficient": self.number(retry, field, "backoff_coefficient", 1.0, 10.0, default=2.0),
            "max_backoff_ms": maximum,
        }

    def result_classes(self, raw: dict[str, Any], path: str) -> dict[str, list[str] | None] | None:
        result = self.member_object(raw, path, "result", frozenset(_RESULT_CLASSES), required=True)
        if result is None:
            return None
        field = f"{path}.result"
        classes = {
            "pending": self.statuses(result, field, "pending", required=True),
            "success": self.statuses(result, field, "success", required=True),
            "review": self.statuses(result, field, "review", required=False),
        }
        owner: dict[str, str] = {}
        for class_name, statuses in classes.items():
            for position, status in enumerate(statuses or []):
                first = owner.setdefault(status, class_name)
                if first != class_name:
                    self.error(f"{field}.{class_name}[{position}]", "RESULT_CLASS_OVERLAP",
                               f"status {_describe(status)} is in both {first} and {class_name}")
        return classes

    def statuses(self, result: dict[str, Any], path: str, name: str, required: bool) -> list[str] | None:
        if not self.present(result, path, name, required=required):
            return None if required else []
        value = result[name]
        field = f"{path}.{name}"
        if not isinstance(value, list):
            self.error(field, "INVALID_TYPE", f"{name} must be an array of statuses, got {_describe(value)}")
            return None
        if required and not value:
            self.error(field, "INVALID_VALUE", f"{name} must list at least one status")
            return None
        statuses: list[str] = []
        for position, status in enumerate(value):
            item = f"{field}[{position}]"
            if not isinstance(status, str):
                self.error(item, "INVALID_TYPE", f"a status must be a string, got {_describe(status)}")
            elif not 1 <= len(status) <= _MAX_STATUS_CHARS or not _is_unicode(status):
                self.error(item, "INVALID_VALUE",
                           f"a status must be 1-{_MAX_STATUS_CHARS} characters, got {_describe(status)}")
            elif status in statuses:
                self.error(item, "INVALID_VALUE", f"status {_describe(status)} is listed twice in {name}")
            else:
                statuses.append(status)
        return statuses if len(statuses) == len(value) else None

    def final_signal(
        self, raw: dict[str, Any], path: str, index: int
    ) -> tuple[dict[str, Any] | None, Template | None]:
        if raw.get("final_signal") is None:  # absent and explicit null both mean "no final signal"
            return None, None
        contract = self.member_object(
            raw, path, "final_signal", frozenset({"name", "payload_version", "correlation"}), required=True
        )
        if contract is None:
            return None, None
        field = f"{path}.final_signal"
        name = self.text(contract, field, "name", _SIGNAL_NAME)
        payload_version = self.text(contract, field, "payload_version", _VERSION)
        correlation, template = self.correlation(contract, field, index)
        return {"name": name, "payload_version": payload_version, "correlation": correlation}, template

    def signal_contract(self, raw: dict[str, Any], path: str) -> dict[str, Any] | None:
        contract = self.member_object(
            raw, path, "signal", frozenset({"name", "payload_version", "payload_type"}), required=True
        )
        if contract is None:
            return None
        field = f"{path}.signal"
        payload_type = contract.get("payload_type", "any")
        if payload_type not in _PAYLOAD_TYPES:
            code = "INVALID_VALUE" if isinstance(payload_type, str) else "INVALID_TYPE"
            allowed = ", ".join(_PAYLOAD_TYPES)
            self.error(f"{field}.payload_type", code,
                       f"payload_type must be one of {allowed}, got {_describe(payload_type)}")
        return {
            "name": self.text(contract, field, "name", _SIGNAL_NAME),
            "payload_version": self.text(contract, field, "payload_version", _VERSION),
            "payload_type": payload_type,
        }

    # Expression-bearing fields

    def optional_key(
        self, raw: dict[str, Any], path: str, name: str, index: int
    ) -> tuple[str | None, Template | None]:
        """business_key / mutex_key: null, a literal of 1-256 characters, or an expression."""
        value = raw.get(name)
        if value is None:
            return None, None
        template = self.string_or_expression(
            value, _member(path, name), name, index,
            lambda text: len(text) <= _MAX_KEY_LITERAL_CHARS, f"1-{_MAX_KEY_LITERAL_CHARS} characters",
        )
        return value, template

    def correlation(self, raw: dict[str, Any], path: str, index: int) -> tuple[str | None, Template | None]:
        """A required correlation: a literal of 1-512 UTF-8 bytes (compared byte-exact), or an expression."""
        if not self.present(raw, path, "correlation", required=True):
            return None, None
        value = raw["correlation"]
        template = self.string_or_expression(
            value, f"{path}.correlation", "correlation", index,
            lambda text: len(text.encode("utf-8")) <= _MAX_CORRELATION_BYTES,
            f"1-{_MAX_CORRELATION_BYTES} bytes of UTF-8",
        )
        return value, template

    def string_or_expression(
        self, value: Any, field: str, name: str, index: int, fits: Callable[[str], bool], limits: str
    ) -> Template | None:
        if not isinstance(value, str):
            self.error(field, "INVALID_TYPE",
                       f"{name} must be a string or a $. expression, got {_describe(value)}")
            return None
        if not _is_unicode(value):
            self.error(field, "INVALID_VALUE", f"{name} holds an unpaired surrogate, which is not text")
            return None
        if value.startswith("$."):
            source = self.expression(value, field, index)
            return None if source is None else {"skeleton": None, "bindings": [["$", source]]}
        if not value or not fits(value):
            self.error(field, "INVALID_VALUE",
                       f"{name} must be {limits} or a $. expression, got {_describe(value)}")
            return None
        return _literal_template(value)

    def json_value(
        self, value: Any, field: str, target: tuple[str | int, ...], index: int,
        bindings: list[list[str]], depth: int,
    ) -> tuple[Any, Any]:
        """Checks and copies a JSON value; returns (the copy, its skeleton) and collects bindings."""
        if depth > _MAX_INPUT_DEPTH:
            self.error(field, "INVALID_VALUE", f"input is nested deeper than {_MAX_INPUT_DEPTH} levels")
            return None, None
        if value is None or isinstance(value, (bool, int)):
            return value, value
        if isinstance(value, float):
            if not math.isfinite(value):
                self.error(field, "INVALID_VALUE", f"{value} is not a JSON number")
            return value, value
        if isinstance(value, str):
            if not _is_unicode(value):
                self.error(field, "INVALID_VALUE", "a string holds an unpaired surrogate, which is not text")
                return None, None
            if not value.startswith("$."):
                return value, value
            source = self.expression(value, field, index)
            if source is not None:
                bindings.append([_sql_path(target), source])
            return value, None
        if isinstance(value, list):
            pairs = [
                self.json_value(item, f"{field}[{position}]", (*target, position), index, bindings, depth + 1)
                for position, item in enumerate(value)
            ]
            return [copy for copy, _ in pairs], [skeleton for _, skeleton in pairs]
        if isinstance(value, dict):
            if not all(isinstance(key, str) for key in value):
                self.error(field, "INVALID_TYPE", "object keys must be strings")
                return None, None
            copy: dict[str, Any] = {}
            skeleton: dict[str, Any] = {}
            # Sorted, so that bindings come out in one order for every spelling of the same definition.
            for key in sorted(value):
                member = _member(field, key)
                if not _is_unicode(key):
                    self.error(member, "INVALID_VALUE", "the key holds an unpaired surrogate, not text")
                    continue
                copy[key], skeleton[key] = self.json_value(
                    value[key], member, (*target, key), index, bindings, depth + 1
                )
            return copy, skeleton
        self.error(field, "INVALID_TYPE", f"{_describe(value)} is not a JSON value")
        return None, None

    def expression(self, text: str, field: str, index: int) -> str | None:
        """Checks an expression read by step `index`; returns its source path in the context document."""
        try:
            segments = _parse_path(text)
        except _BadPath as exc:
            self.error(field, "BAD_EXPRESSION", f"{exc} in {_describe(text)}")
            return None
        head = segments[0]
        if head == "steps":
            if len(segments) < 3 or not isinstance(segments[1], str) or segments[2] != "output":
                self.error(field, "BAD_EXPRESSION",
                           f"a step's result is read as $.steps.<key>.output..., got {_describe(text)}")
                return None
            referenced = segments[1]
            if referenced not in self.key_index:
                self.error(field, "UNKNOWN_STEP_REFERENCE", f"no step has key {_describe(referenced)}")
                return None
            if self.key_index[referenced] not in self.ancestors(index):
                self.error(field, "UNKNOWN_STEP_REFERENCE",
                           f"step {_describe(referenced)} does not come before this step through after, "
                           "so its output may not exist when this step starts")
                return None
        elif head != "input":
            self.error(field, "BAD_EXPRESSION",
                       f"an expression starts with $.input or $.steps, got {_describe(text)}")
            return None
        return _sql_path(segments)

    # Plain members

    def present(self, obj: dict[str, Any], path: str, name: str, required: bool) -> bool:
        if name in obj:
            return True
        if required:
            self.error(_member(path, name), "MISSING_FIELD", f"{name} is required")
        return False

    def reject_unknown(self, obj: dict[Any, Any], path: str, allowed: frozenset[str]) -> None:
        for name in obj:
            if name not in allowed:
                shown = name if isinstance(name, str) else repr(name)
                # A close match is almost always a typo; otherwise the full list helps more.
                guesses = difflib.get_close_matches(shown, allowed, n=1)
                hint = f"did you mean {guesses[0]}?" if guesses else f"allowed: {', '.join(sorted(allowed))}"
                self.error(_member(path, shown), "UNKNOWN_FIELD", f"unknown field {_describe(shown)}; {hint}")

    def member_object(
        self, obj: dict[str, Any], path: str, name: str, allowed: frozenset[str], required: bool
    ) -> dict[str, Any] | None:
        """An object member, checked for unknown fields; {} when it is optional and absent."""
        if not self.present(obj, path, name, required=required):
            return None if required else {}
        value = obj[name]
        field = _member(path, name)
        if not isinstance(value, dict):
            self.error(field, "INVALID_TYPE", f"{name} must be an object, got {_describe(value)}")
            return None
        self.reject_unknown(value, field, allowed)
        return value

    def integer(
        self, obj: dict[str, Any], path: str, name: str, low: int, high: int, default: int | None = None
    ) -> int | None:
        """An integer member in [low, high]; required when `default` is None."""
        if not self.present(obj, path, name, required=default is None):
            return default
        value = obj[name]
        field = _member(path, name)
        # type() rather than isinstance(): JSON true/false must not pass as 1/0.
        if type(value) is not int:
            self.error(field, "INVALID_TYPE", f"{name} must be an integer, got {_describe(value)}")
            return None
        if not low <= value <= high:
            self.error(field, "OUT_OF_RANGE", f"{name} must be from {low:,} to {high:,}, got {value:,}")
            return None
        return value

    def number(
        self, obj: dict[str, Any], path: str, name: str, low: float, high: float, default: float
    ) -> float | None:
        """A number member in [low, high], always returned as a float so that 2 and 2.0 digest alike."""
        if not self.present(obj, path, name, required=False):
            return default
        value = obj[name]
        field = _member(path, name)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.error(field, "INVALID_TYPE", f"{name} must be a number, got {_describe(value)}")
            return None
        if not low <= value <= high:  # NaN fails this too
            self.error(field, "OUT_OF_RANGE", f"{name} must be from {low} to {high}, got {_describe(value)}")
            return None
        return float(value)

    def text(self, obj: dict[str, Any], path: str, name: str, rule: _Text) -> str | None:
        """A required string member matching `rule`."""
        if not self.present(obj, path, name, required=True):
            return None
        value = obj[name]
        field = _member(path, name)
        if not isinstance(value, str):
            self.error(field, "INVALID_TYPE", f"{name} must be a string, got {_describe(value)}")
            return None
        if not rule.pattern.fullmatch(value):
            self.error(field, "INVALID_VALUE", f"{name} must be {rule.description}, got {_describe(value)}")
            return None
        return value
