"""Expressions: `$.input...` and `$.steps.<key>.output...` paths, parsed and rewritten as SQL JSON paths."""

from __future__ import annotations

import functools
import json
import re

from .model import MAX_ARRAY_INDEX

# Expression grammar: a `.name` member may contain "-" ...
PATH_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
_PATH_INDEX = re.compile(r"[0-9]+")
# ... but the SQL JSON paths we emit leave only keys of this shape unquoted.
_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class BadPath(ValueError):
    pass


def parse_path(text: str) -> list[str | int]:
    """Splits `$` followed by `.name`, `["key"]`, `['key']` or `[n]` segments; raises BadPath."""
    segments: list[str | int] = []
    position = 1
    while position < len(text):
        char = text[position]
        if char == ".":
            match = PATH_NAME.match(text, position + 1)
            if match is None:
                raise BadPath(f"expected a member name after '.' at character {position + 1}")
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
                    raise BadPath(f"expected an index or a quoted key after '[' at character {position}")
                digits = match.group()
                too_big = len(digits) > 10 or int(digits) > MAX_ARRAY_INDEX
                if too_big or (digits.startswith("0") and digits != "0"):
                    raise BadPath(f"array index {digits} is not an integer from 0 to {MAX_ARRAY_INDEX:,}")
                segments.append(int(digits))
                position = match.end()
            if position >= len(text) or text[position] != "]":
                raise BadPath(f"expected ']' at character {position + 1}")
            position += 1
        else:
            raise BadPath(f"unexpected {char!r} at character {position + 1}")
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
                raise BadPath("a quoted key must not be empty")
            return "".join(chars), position + 1
        if char == "\\":
            escaped = text[position + 1:position + 2]
            if escaped not in (quote, "\\"):
                raise BadPath(f"only \\{quote} and \\\\ may be escaped in a quoted key")
            chars.append(escaped)
            position += 2
        else:
            chars.append(char)
            position += 1
    raise BadPath("unterminated quoted key")


def sql_path(segments: tuple[str | int, ...] | list[str | int]) -> str:
    """The MySQL/MariaDB JSON path of `segments`; keys that are not plain identifiers are quoted."""
    return "$" + "".join(f"[{segment}]" if isinstance(segment, int) else _sql_key(segment) for segment in segments)


@functools.lru_cache(maxsize=1024)
def _sql_key(key: str) -> str:
    """One key's leg of a path. Cached: every value of an input is given its path, and a document may hold thousands
    under the same long keys (before the token is checked), each key matched again for each."""
    if _PLAIN_KEY.fullmatch(key):
        return f".{key}"
    return "." + json.dumps(key, ensure_ascii=False)  # read as a JSON string by both servers: escaped as one
