"""The shapes a validated definition compiles into, and the limits every step type shares."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, NamedTuple, TypedDict

from ..jsontext import DocumentError


class DefinitionError(DocumentError):
    """A definition was rejected; ``errors`` holds every problem found, not just the first."""

    title = "invalid workflow definition"


class Template(TypedDict):
    skeleton: Any
    # Each binding: [target path, source path], and when the source reads an array's item, a third member: the paths
    # (within the document that keeps the value) that must hold arrays for the source to find anything.
    bindings: list[list[Any]]


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


class Text(NamedTuple):
    pattern: re.Pattern[str]
    description: str


DAY_MS = 86_400_000
YEAR_MS = 365 * DAY_MS
MAX_STEPS = 256
# The distinct queues of a definition's TASK and POLL steps, comma-separated, are stored in a VARCHAR(2048) column
# (weave_definitions.queues) that every instance-level permission check reads.
MAX_QUEUE_LIST_CHARS = 2048
# MariaDB's JSON functions read no document nested deeper than 32 levels (JSON_VALID is false past it; MySQL's limit
# is 100), and the published document holds a step's input at its fourth level (document, steps, step, input): an
# input may nest at most 28 levels of arrays and objects, so that its innermost values sit at the 32nd. This also
# bounds the recursion of the input walk far below Python's limit.
MAX_INPUT_DEPTH = 28
# No stored JSON array can have this many elements, so a larger index can only be a mistake.
MAX_ARRAY_INDEX = 2**31 - 1
# An expression's source path and the path of the member it fills are JSON paths that _weave_template_resolve reads
# into VARCHAR(2048) variables, and MariaDB's JSON functions find nothing through a path of 32 legs or more.
MAX_PATH_CHARS = 2048
MAX_PATH_LEGS = 31
MAX_KEY_LITERAL_CHARS = 256
MAX_CORRELATION_BYTES = 512
MAX_STATUS_CHARS = 64

# A definition's name and a step's key are segments of the API's and the console's paths, where "." and ".." are
# not names: a browser, curl and most HTTP clients resolve them away before the request is sent.
DEFINITION_NAME = Text(re.compile(r"(?!\.\.?\Z)[A-Za-z0-9_.:-]{1,128}"),
                       "1-128 characters of A-Z a-z 0-9 _ . : - (not . or ..)")
# A step key is a member name of the JSON paths the engine builds, and MariaDB's JSON paths cannot name a member that
# begins with "-" (quoted or not, the path is refused): such a key would publish and then fail every activation.
STEP_KEY = Text(re.compile(r"(?!\.\.?\Z)[A-Za-z0-9_.][A-Za-z0-9_.-]{0,63}"),
                "1-64 characters of A-Z a-z 0-9 _ . - (not first: -; not . or ..)")
QUEUE = Text(re.compile(r"[A-Za-z0-9_.:-]{1,64}"), "1-64 characters of A-Z a-z 0-9 _ . : -")
HANDLER = Text(re.compile(r"[A-Za-z0-9_.:-]{1,128}"), "1-128 characters of A-Z a-z 0-9 _ . : -")
VERSION = Text(re.compile(r"[ -~]{1,32}"), "1-32 printable ASCII characters")
SIGNAL_NAME = Text(re.compile(r"[ -~]{1,128}"), "1-128 printable ASCII characters")

COMMON_FIELDS = frozenset({"key", "type", "after"})


def literal_template(value: Any) -> Template:
    return {"skeleton": value, "bindings": []}


def empty_compiled() -> CompiledStep:
    return {"input": literal_template({}), "business_key": None, "mutex_key": None, "correlation": None}
