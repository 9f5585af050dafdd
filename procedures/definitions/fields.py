"""The checks every step type shares: plain members, expressions, and JSON values with bindings.

A ``Checker`` walks one document and collects every problem instead of stopping at the first.
"""

from __future__ import annotations

import difflib
import json
import math
from collections.abc import Callable
from typing import Any

from ..jsontext import ProblemList, is_text
from ..jsontext import describe as _describe
from ..jsontext import member_path as _member
from .graph import StepGraph
from .model import (
    MAX_CORRELATION_BYTES,
    MAX_INPUT_DEPTH,
    MAX_KEY_LITERAL_CHARS,
    MAX_PATH_CHARS,
    MAX_PATH_LEGS,
    Template,
    Text,
    literal_template,
)
from .paths import PATH_NAME, BadPath, parse_path, sql_path

__all__ = ["Checker", "describe", "member"]

describe = _describe
member = _member


class Checker:
    def __init__(self) -> None:
        # Listed up to jsontext's limits and counted past them: a document of some hundred KiB can hold thousands of
        # problems at paths as long as itself (a template 28 levels deep under 1,000-character keys), which listed
        # in full took a gigabyte.
        self.problems = ProblemList()
        self.graph = StepGraph()

    def error(self, field: str, code: str, message: str) -> None:
        self.problems.add_field(field, code, message)

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

    def text(self, obj: dict[str, Any], path: str, name: str, rule: Text) -> str | None:
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
            elif name not in self.graph.key_index:
                self.error(item, "UNKNOWN_AFTER", f"no step has key {_describe(name)}")
            else:
                keys.append(name)
            seen.add(name)
        return keys

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
            lambda text: len(text) <= MAX_KEY_LITERAL_CHARS, f"1-{MAX_KEY_LITERAL_CHARS} characters",
        )
        return value, template

    def correlation(self, raw: dict[str, Any], path: str, index: int) -> tuple[str | None, Template | None]:
        """A required correlation: a literal of 1-512 UTF-8 bytes (compared byte-exact), or an expression."""
        if not self.present(raw, path, "correlation", required=True):
            return None, None
        value = raw["correlation"]
        template = self.string_or_expression(
            value, f"{path}.correlation", "correlation", index,
            lambda text: len(text.encode("utf-8")) <= MAX_CORRELATION_BYTES,
            f"1-{MAX_CORRELATION_BYTES} bytes of UTF-8",
        )
        return value, template

    def string_or_expression(
        self, value: Any, field: str, name: str, index: int, fits: Callable[[str], bool], limits: str
    ) -> Template | None:
        if not isinstance(value, str):
            self.error(field, "INVALID_TYPE",
                       f"{name} must be a string or a $. expression, got {_describe(value)}")
            return None
        if not is_text(value):
            self.error(field, "INVALID_VALUE", f"{name} holds an unpaired surrogate, which is not text")
            return None
        if value.startswith("$."):
            source = self.expression(value, field, index)
            return None if source is None else {"skeleton": None, "bindings": [["$", *source]]}
        if not value or not fits(value):
            self.error(field, "INVALID_VALUE",
                       f"{name} must be {limits} or a $. expression, got {_describe(value)}")
            return None
        return literal_template(value)

    def json_value(
        self, value: Any, field: str, target: tuple[str | int, ...], index: int,
        bindings: list[list[Any]], depth: int,
    ) -> tuple[Any, Any]:
        """Checks and copies a JSON value; returns (the copy, its skeleton) and collects bindings."""
        if depth > MAX_INPUT_DEPTH and isinstance(value, (list, dict)):
            self.error(field, "INVALID_VALUE",
                       f"input nests arrays and objects deeper than {MAX_INPUT_DEPTH} levels")
            return None, None
        if value is None or isinstance(value, (bool, int)):
            return value, value
        if isinstance(value, float):
            if not math.isfinite(value):
                self.error(field, "INVALID_VALUE", f"{value} is not a JSON number")
            return value, value
        if isinstance(value, str):
            if not is_text(value):
                self.error(field, "INVALID_VALUE", "a string holds an unpaired surrogate, which is not text")
                return None, None
            if not value.startswith("$."):
                return value, value
            source = self.expression(value, field, index)
            destination = sql_path(target)
            dashed = _dashed(target)
            if dashed is not None:
                self.error(field, "INVALID_VALUE",
                           f"an expression's place is inside the member {_describe(dashed)}, whose name begins with "
                           "'-': the database's JSON paths cannot name it, so the value could never be put there")
            elif len(destination) > MAX_PATH_CHARS:
                self.error(field, "INVALID_VALUE",
                           f"the JSON path to this member of input is {len(destination):,} characters long, "
                           f"more than the {MAX_PATH_CHARS:,} an expression's place may take")
            elif source is not None:
                bindings.append([destination, *source])
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
                path = _member(field, key)
                if not is_text(key):
                    self.error(path, "INVALID_VALUE", "the key holds an unpaired surrogate, not text")
                    continue
                copy[key], skeleton[key] = self.json_value(
                    value[key], path, (*target, key), index, bindings, depth + 1
                )
            return copy, skeleton
        self.error(field, "INVALID_TYPE", f"{_describe(value)} is not a JSON value")
        return None, None

    def _quoting_hint(self, text: str) -> str:
        """For `$.steps.<key>...` whose key is not a plain name (it holds "." or "-"), the spelling that reads it."""
        if not text.startswith("$.steps."):
            return ""
        rest = text[len("$.steps."):]
        keys = sorted((k for k in self.graph.key_index if rest.startswith(f"{k}.output")), key=len, reverse=True)
        if keys and not PATH_NAME.fullmatch(keys[0]):  # a name an expression may write after a dot
            return f": a step key that is not a plain name is quoted, as in $.steps[{json.dumps(keys[0])}].output"
        return ""

    def expression(self, text: str, field: str, index: int) -> list[Any] | None:
        """Checks an expression read by step `index`; returns what its bindings hold after their target: its source
        path in the context document, and, when it reads an item of an array, the paths within the document that
        keeps the value (the input, or the step's output) that must hold arrays. The server's JSON paths are lax:
        `$[0]` of a value that is no array is the value itself, where the expression must find nothing (null)."""
        try:
            segments = parse_path(text)
        except BadPath as exc:
            self.error(field, "BAD_EXPRESSION", f"{exc} in {_describe(text)}{self._quoting_hint(text)}")
            return None
        if len(segments) > MAX_PATH_LEGS:
            self.error(field, "BAD_EXPRESSION",
                       f"an expression reads at most {MAX_PATH_LEGS} members and indexes deep, got {len(segments)}")
            return None
        dashed = _dashed(segments)
        if dashed is not None:
            self.error(field, "BAD_EXPRESSION",
                       f"the member {_describe(dashed)} begins with '-', which the database's JSON paths cannot name, "
                       f"so {_describe(text)} could never be read")
            return None
        head = segments[0] if segments else None
        if head == "steps":
            if len(segments) < 3 or not isinstance(segments[1], str) or segments[2] != "output":
                self.error(field, "BAD_EXPRESSION",
                           f"a step's result is read as $.steps.<key>.output..., got {_describe(text)}"
                           f"{self._quoting_hint(text)}")
                return None
            referenced = segments[1]
            if referenced not in self.graph.key_index:
                self.error(field, "UNKNOWN_STEP_REFERENCE", f"no step has key {_describe(referenced)}")
                return None
            if self.graph.key_index[referenced] not in self.graph.ancestors(index):
                self.error(field, "UNKNOWN_STEP_REFERENCE",
                           f"step {_describe(referenced)} does not come before this step through after, "
                           "so its output may not exist when this step starts")
                return None
        elif head != "input":
            self.error(field, "BAD_EXPRESSION",
                       f"an expression starts with $.input or $.steps, got {_describe(text)}")
            return None
        source = sql_path(segments)
        if len(source) > MAX_PATH_CHARS:
            self.error(field, "BAD_EXPRESSION",
                       f"an expression is at most {MAX_PATH_CHARS:,} characters long as a JSON path, "
                       f"got {len(source):,}")
            return None
        kept = segments[3:] if head == "steps" else segments[1:]  # the legs within the document that keeps it
        arrays = [sql_path(kept[:leg]) for leg, segment in enumerate(kept) if isinstance(segment, int)]
        return [source, arrays] if arrays else [source]


def _dashed(segments: tuple[str | int, ...] | list[str | int]) -> str | None:
    """The first member name among ``segments`` that begins with "-", which no MariaDB JSON path can name (it
    refuses `$."-a"` as a syntax error), or None."""
    return next((s for s in segments if isinstance(s, str) and s.startswith("-")), None)
