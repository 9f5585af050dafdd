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

The model is core, not a daemon's: the API, the CLI and the tests all validate through it. One module
per step type (``timer``, ``signal``, ``task``, ``poll``) holds that type's fields and checks;
``fields`` holds the checks they share, ``graph`` the `after` graph, ``document`` the whole document.
"""

from __future__ import annotations

from typing import Any

from ..jsontext import FieldError, InvalidJson, parse_strict
from .document import DocumentChecker
from .model import CompiledStep, Definition, DefinitionError, Template

__all__ = [
    "CompiledStep",
    "Definition",
    "DefinitionError",
    "FieldError",
    "Template",
    "parse_json_strict",
    "validate",
]


def parse_json_strict(raw: bytes | str) -> Any:
    """Strict JSON (``procedures.jsontext``), its problems reported as a DefinitionError."""
    try:
        return parse_strict(raw)
    except InvalidJson as exc:
        raise DefinitionError(exc.errors, exc.unlisted) from exc


def validate(doc: Any) -> Definition:
    """Validates a definition document, already parsed or as raw JSON, and compiles it.

    Raises DefinitionError listing every problem found.
    """
    if isinstance(doc, (bytes, str)):
        doc = parse_json_strict(doc)
    return DocumentChecker().definition(doc)
