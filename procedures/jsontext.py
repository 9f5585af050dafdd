"""Strict JSON: the one parser for every document that reaches the engine (HTTP bodies, definition files).

``json.loads`` alone is not enough. MariaDB's ``JSON_EXTRACT`` reads the first of duplicate keys where
Python reads the last, so a document with duplicates would mean different things on each side; NaN and
Infinity are not JSON and the database refuses them; and a string holding a lone surrogate escape
(``"\\ud800"``) decodes in Python but is no text any database column can store. All three are refused
here, each problem with a dotted field path.

``parse_members`` parses an object once and also returns, for each top-level member, the exact bytes
that encode its value, so that a payload can travel to the routine as received (S-4); ``Verbatim`` and ``dumps``
write such a value back into an answer as those bytes.
"""

from __future__ import annotations

import decimal
import json
import math
import re
import secrets
import sys
from collections.abc import Iterator
from typing import Any, NamedTuple

__all__ = ["DocumentError", "FieldError", "InvalidJson", "ProblemList", "Verbatim", "describe", "dumps", "member_path",
           "parse_members", "parse_strict"]

_WHITESPACE = " \t\r\n"
# The dotted paths we print leave only keys of this shape unquoted.
_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class FieldError(NamedTuple):
    """One problem: where (a dotted path, "" for the whole document), a stable code, and why."""

    field: str
    code: str
    message: str


class DocumentError(ValueError):
    """A document was refused; ``errors`` holds every problem found, not just the first."""

    title = "invalid document"

    def __init__(self, errors: list[FieldError], unlisted: int = 0) -> None:
        super().__init__(errors)
        self.errors = list(errors)
        self.unlisted = unlisted  # problems found past the ones listed (jsontext.MAX_LISTED_PROBLEMS)

    def __str__(self) -> str:
        count = len(self.errors) + self.unlisted
        lines = [f"{self.title} ({count} problem{'' if count == 1 else 's'})"]
        lines += [f"  {error.field or '(document)'}: {error.code}: {error.message}" for error in self.errors]
        if self.unlisted:
            lines.append(f"  and {self.unlisted:,} more, not listed")
        return "\n".join(lines)


class InvalidJson(DocumentError):
    """The bytes are not one strict JSON document (codes INVALID_JSON, DUPLICATE_JSON_KEY, INVALID_TEXT)."""

    title = "invalid JSON"


def member_path(path: str, name: str) -> str:
    """The dotted field path of member ``name`` of the object at ``path``."""
    if not _PLAIN_KEY.fullmatch(name):
        return f"{path}[{json.dumps(name)}]"
    return f"{path}.{name}" if path else name


def describe(value: Any) -> str:
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


def is_text(value: str) -> bool:
    """False for strings holding lone surrogates (valid JSON escapes, but not storable text)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def as_text(value: str) -> str:
    """``value`` with each lone surrogate written as its escape, backslash included (an exception's text may hold
    one, e.g. a file name decoded with surrogateescape): what a report, a log line or any UTF-8 output can carry."""
    return value if is_text(value) else value.encode(errors="backslashreplace").decode()


def _invalid(message: str) -> FieldError:
    return FieldError("", "INVALID_JSON", message)


def _reject_constant(name: str) -> Any:
    raise InvalidJson([_invalid(f"{name} is not a JSON number")])


class Fraction(float):
    """A JSON number written with a fraction or an exponent, as the float it parses to, keeping the text it was
    written as: ``integral`` says whether that text is a whole number exactly (``1.0`` and ``1e0`` are;
    ``1.0000000000000000001`` is not, though it parses to the float 1.0)."""

    __slots__ = ("text",)
    text: str

    def __new__(cls, text: str) -> Fraction:
        value = super().__new__(cls, text)
        value.text = text
        return value

    @property
    def integral(self) -> bool:
        try:
            exact = decimal.Decimal(self.text)
            return exact == exact.to_integral_value()
        except decimal.DecimalException:  # an exponent past what decimal takes (1e-99999999999999999999): not whole
            return False


def finite_float(text: str) -> float:
    """A JSON number with a fraction or an exponent as a float, refused (ValueError) past the range of a double: 1e400
    would be infinity, a value no sender wrote."""
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:40]} is past the range of a double (about 1.8e308)")
    return value


def _finite_float(text: str) -> float:
    try:
        finite_float(text)
    except ValueError as exc:
        raise InvalidJson([_invalid(str(exc))]) from None
    return Fraction(text)


class _Parser:
    """One parse of one document. Objects are built by a hook that remembers duplicate keys; the
    problems are reported after the parse, with paths, in document order."""

    def __init__(self) -> None:
        # Each object's duplicate keys, once each in the order first repeated (a dict: a list's `in` made an object
        # of thousands of keys, each twice, cost the square of their number).
        self.duplicates: dict[int, dict[str, None]] = {}
        # Values dropped for a duplicate key stay referenced so that their ids cannot be reused by a
        # later object while `duplicates` is keyed by id.
        self.dropped: list[Any] = []
        self.decoder = json.JSONDecoder(object_pairs_hook=self.object_from_pairs, parse_constant=_reject_constant,
                                        parse_float=_finite_float)

    def object_from_pairs(self, pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        obj: dict[str, Any] = {}
        for key, value in pairs:
            if key in obj:
                self.dropped.append(value)
                self.duplicates.setdefault(id(obj), {})[key] = None
            else:
                obj[key] = value
        return obj

    def value_at(self, text: str, start: int) -> tuple[Any, int]:
        try:
            return self.decoder.raw_decode(text, start)
        except InvalidJson:
            raise
        except json.JSONDecodeError as exc:
            raise InvalidJson([_invalid(f"{exc.msg} at line {exc.lineno} column {exc.colno}")]) from exc
        except RecursionError as exc:
            raise InvalidJson([_invalid("nested too deeply")]) from exc
        except ValueError as exc:  # an integer with more digits than Python converts (its message names a setting)
            limit = sys.get_int_max_str_digits()
            raise InvalidJson([_invalid(f"a number has more than {limit:,} digits, more than is taken here")]) from exc

    def document(self, text: str) -> tuple[Any, dict[str, str] | None]:
        """The value, and for an object the source text of each top-level member's value."""
        start = _skip(text, 0)
        if text.startswith("{", start):
            value, spans, end = self.top_object(text, start)
        else:
            value, end = self.value_at(text, start)
            spans = None
        end = _skip(text, end)
        if end != len(text):
            raise InvalidJson([_invalid(f"extra data at character {end + 1}")])
        # Text that is text (as any decoded from UTF-8 is) holds no surrogate, and only a \u escape can put
        # one in a string: without a duplicate key and without an escape there is nothing to report, and no
        # walk of the whole value to pay for.
        if self.duplicates or "\\u" in text or not is_text(text):
            problems = _problems(value, self.duplicates)
            if problems.listed:
                raise InvalidJson(problems.listed, problems.unlisted)
        return value, spans

    def top_object(self, text: str, i: int) -> tuple[dict[str, Any], dict[str, str], int]:
        pairs: list[tuple[str, Any]] = []
        spans: dict[str, str] = {}
        i = _skip(text, i + 1)
        if text.startswith("}", i):
            return {}, spans, i + 1
        while True:
            if not text.startswith('"', i):
                raise InvalidJson([_invalid(f"expected a member name in double quotes at character {i + 1}")])
            key, i = self.value_at(text, i)
            i = _skip(text, i)
            if not text.startswith(":", i):
                raise InvalidJson([_invalid(f"expected ':' at character {i + 1}")])
            start = _skip(text, i + 1)
            value, end = self.value_at(text, start)
            pairs.append((key, value))
            spans.setdefault(key, text[start:end])
            i = _skip(text, end)
            if text.startswith("}", i):
                return self.object_from_pairs(pairs), spans, i + 1
            if not text.startswith(",", i):
                raise InvalidJson([_invalid(f"expected ',' or '}}' at character {i + 1}")])
            i = _skip(text, i + 1)


def _skip(text: str, i: int) -> int:
    while i < len(text) and text[i] in _WHITESPACE:
        i += 1
    return i


# The problems of one document listed at most: past either limit the rest are counted, not listed (their paths are
# never built). A document within the body cap may hold some 30,000 problems, each at a path as long as the body
# (200 levels of 1,000-character keys): listing every one would take gigabytes for a few hundred KiB of input.
MAX_LISTED_PROBLEMS = 100
MAX_LISTED_PATH_CHARS = 65_536


class _Place(NamedTuple):
    """Where a value sits: the place of its container (None for the top) and its key there, or its index."""

    parent: _Place | None
    step: str | int


def _path(place: _Place | None) -> str:
    """The dotted field path of ``place``, as ``member_path`` writes it one step at a time, built only when a problem
    is listed: in one join, so that a deep path costs its own length and not that times its depth."""
    steps: list[str | int] = []
    while place is not None:
        steps.append(place.step)
        place = place.parent
    pieces: list[str] = []
    for step in reversed(steps):
        if isinstance(step, int):
            pieces.append(f"[{step}]")
        elif not _PLAIN_KEY.fullmatch(step):
            pieces.append(f"[{json.dumps(step)}]")
        else:
            pieces.append(f".{step}" if pieces else step)
    return "".join(pieces)


class ProblemList:
    """The problems found, in document order: the first listed with their paths, within MAX_LISTED_PROBLEMS and
    MAX_LISTED_PATH_CHARS (the first one always, however long its path), the rest only counted."""

    def __init__(self) -> None:
        self.listed: list[FieldError] = []
        self.unlisted = 0
        self.path_chars = 0

    def full(self) -> bool:
        return bool(self.unlisted) or len(self.listed) >= MAX_LISTED_PROBLEMS

    def add(self, place: _Place | None, code: str, message: str) -> None:
        """A problem at ``place``, whose path is built only when the problem is listed."""
        if self.full():
            self.unlisted += 1
            return
        self.add_field(_path(place), code, message)

    def add_field(self, field: str, code: str, message: str) -> None:
        if self.full() or (self.listed and self.path_chars + len(field) > MAX_LISTED_PATH_CHARS):
            self.unlisted += 1
            return
        self.path_chars += len(field)
        self.listed.append(FieldError(field, code, message))


def _problems(root: Any, duplicates: dict[int, dict[str, None]]) -> ProblemList:
    """Duplicate keys and strings that are not text, with their paths, in document order: an object's duplicate keys,
    then its keys that are not text, then what its values hold. The walk keeps an iterator for each open container
    and each value's place as a link to its container's, so it costs the document's size, whatever its paths' lengths.
    Iterative: the parser accepts nesting deeper than a recursive walk allows."""
    found = ProblemList()
    open_: list[tuple[Iterator[tuple[str | int, Any]], _Place | None]] = []  # a container's members, its place

    def visit(node: Any, place: _Place | None) -> None:
        if isinstance(node, dict):
            for key in duplicates.get(id(node), ()):
                found.add(_Place(place, key), "DUPLICATE_JSON_KEY",
                          f"key {describe(key)} appears more than once in one object")
            for key in node:
                if not is_text(key):
                    found.add(_Place(place, key), "INVALID_TEXT",
                              "the key holds an unpaired surrogate escape, which is not text")
            open_.append((iter(node.items()), place))
        elif isinstance(node, list):
            open_.append((enumerate(node), place))
        elif isinstance(node, str) and not is_text(node):
            found.add(place, "INVALID_TEXT", "the string holds an unpaired surrogate escape, which is not text")

    visit(root, None)
    while open_:
        members, parent = open_[-1]
        member = next(members, None)
        if member is None:
            open_.pop()
        else:
            visit(member[1], _Place(parent, member[0]))
    return found


def _text(raw: bytes | str) -> str:
    if isinstance(raw, str):
        return raw
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidJson([_invalid(f"not UTF-8: invalid byte at offset {exc.start}")]) from exc


class Verbatim:
    """JSON text kept as the bytes it came with (a payload, an input, an output), to be written into an answer as
    it is by ``dumps``: parsed and written again, 12345678901234567890.10 would come back 1.2345678901234567e+19,
    and 1e400 as Infinity, which is not JSON."""

    __slots__ = ("text",)

    def __init__(self, text: str):
        self.text = text

    def __repr__(self) -> str:
        return f"Verbatim({self.text!r})"


def dumps(value: Any) -> str:
    """The JSON text of an answer, as ``json.dumps(value, default=str)`` writes it, except that each ``Verbatim`` in
    it is written as its text: a kept value is never parsed."""
    return _written(value, lambda obj: obj.text if isinstance(obj, Verbatim) else None, str)


def dumps_exact(value: Any, **options: Any) -> str:
    """``json.dumps(value, **options)``, except that each ``Decimal`` in ``value`` is written with every one of its
    digits: json writes none, and a float keeps 17 significant digits (an amount of ``12345678901234567890.10`` as
    ``1.2345678901234567e+19``). A Decimal that is no number (NaN, infinity) is a ValueError."""

    def digits(obj: Any) -> str | None:
        if not isinstance(obj, decimal.Decimal):
            return None
        if not obj.is_finite():
            raise ValueError(f"JSON has no number for {obj!r}")
        finite_float(str(obj))  # past a double's range: the engine refuses such a number wherever it is kept (S-1)
        return str(obj)

    return _written(value, digits, None, **options)


def _written(value: Any, as_text: Any, other: Any, **options: Any) -> str:
    """``json.dumps(value, **options)`` with each object that ``as_text`` gives a text for written as that text, and
    any other object json cannot write as ``other`` gives it (a TypeError, as json's own, without ``other``). The C
    encoder writes the rest, each such object standing in as a string of its own: a mark made afresh for each call,
    which no value written can hold, and its number."""
    texts: list[str] = []
    mark = f"verbatim:{secrets.token_hex(16)}:"

    def stand_in(obj: Any) -> str:
        text = as_text(obj)
        if text is not None:
            texts.append(text)
            return f"{mark}{len(texts) - 1}"
        if other is None:
            raise TypeError(f"Object of type {type(obj).__name__} is not JSON serializable")
        return other(obj)

    pieces = json.dumps(value, default=stand_in, **options).split(f'"{mark}')
    written = [pieces[0]]
    for piece in pieces[1:]:  # each: the stand-in's number, its closing quote, and what follows up to the next one
        number, _, rest = piece.partition('"')
        written += [texts[int(number)], rest]
    return "".join(written)


def parse_strict(raw: bytes | str) -> Any:
    """The value of one strict JSON document; raises InvalidJson listing every problem."""
    return _Parser().document(_text(raw))[0]


def parse_members(raw: bytes | str) -> tuple[Any, dict[str, bytes] | None]:
    """Like ``parse_strict``, and for an object also the exact bytes of each top-level member's value
    (``None`` for any other value). The bytes are a slice of the input: nothing is re-serialised."""
    value, spans = _Parser().document(_text(raw))
    return value, None if spans is None else {key: span.encode("utf-8") for key, span in spans.items()}
