"""Structured logs: one JSON object per line on stderr, with the fields a log pipeline indexes."""

from __future__ import annotations

import json
import logging
import sys
import time

from . import settings
from .jsontext import as_text


def _text(value: object) -> object:
    """A log entry's value with every string made text: a lone surrogate (an exception's text may hold one, e.g. a
    file name decoded with surrogateescape) is written as its escape, backslash included, as a report writes it. Left
    alone, it would come out as a \\udXXX JSON escape, which strict parsers refuse and no UTF-8 output can carry."""
    if isinstance(value, str):
        return as_text(value)
    if isinstance(value, dict):
        return {_text(k if isinstance(k, str) else str(k)): _text(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_text(v) for v in value]
    if value is None or isinstance(value, bool | int | float):
        return value
    return _text(str(value))


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
            **getattr(record, "fields", {}),
        }
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(_text(entry))


def configure_logging(level: str | None = None) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger("weave")
    root.handlers[:] = [handler]
    root.setLevel((level or settings.log_level()).upper())
    root.propagate = False


def refuse(process: str, code: str, detail: str, exit_code: int, json_out: bool, text: str | None = None) -> int:
    """Say on stderr why ``weave <process>`` does not start, and answer its exit status: one line for a person
    (``text``, else the code and the detail), or ``{"code", "detail"}`` under ``--json``."""
    said = text or f"{code}: {detail}"
    line = json.dumps({"code": code, "detail": detail}) if json_out else f"weave {process}: {said}"
    print(line, file=sys.stderr, flush=True)
    return exit_code
