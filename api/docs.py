"""Generates docs/http-api.md from the OpenAPI document: ``python -m api.docs [--check]``.

``api.openapi.document()`` is the single source: the same document the app serves at ``/openapi.json``
and schemathesis checks every response against. This module only renders it (every path and method with
its summary, scope, parameters, request body fields and responses, then the schemas), plus the
conventions every endpoint shares. A test keeps the checked-in file equal to ``render()``.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

from procedures.errors import EDGE_FIELD_CODES, VALIDATION_CODES, http_codes
from procedures.jsontext import MAX_LISTED_PATH_CHARS, MAX_LISTED_PROBLEMS

from .http import MAX_BODY
from .openapi import document

# Sub-codes from 50200 on belong to the Pulse worker routines, which no HTTP endpoint calls.
HTTP_VALIDATION_CODES = [code for code, errno in VALIDATION_CODES.items() if errno < 50200]

TARGET = Path(__file__).resolve().parent.parent / "docs" / "http-api.md"
PREFIX = "/v1/namespaces/{ns}"
METHODS = ("get", "post", "put", "patch", "delete")

# When each code the API can answer is answered; its status comes from the error table (a test checks that
# every code of the table has a line here, and nothing else does).
WHEN: dict[str, str] = {
    "UNAUTHENTICATED": "no `Authorization: Bearer` header, or an unknown or disabled token",
    "FORBIDDEN": "the credential lacks the endpoint's scope, or a queue of the instance's pinned definition",
    "NOT_FOUND": "no such object, an object of another namespace, or a namespace the credential does not belong to "
                 "(all answered alike)",
    "BAD_REQUEST": "a request HTTP itself refuses (a malformed request line or header), before the API sees it",
    "URI_TOO_LONG": "a request line longer than the server takes (4094 bytes), before the API sees it",
    "HEADERS_TOO_LARGE": "more or larger headers than the server takes, before the API sees it",
    "METHOD_NOT_ALLOWED": "the path exists but not with this method; `Allow` lists the methods it has",
    "VALIDATION_FAILED": "a field broke a rule; `errors[].code` names the rule",
    "IDEMPOTENCY_CONFLICT": "this `Idempotency-Key` was already used for a request with other content",
    "SIGNAL_LIMIT_REACHED": "the instance already stores 1024 signals; a replay of an existing key still answers",
    "INVALID_STATE": "the action does not fit the instance's current state; nothing changed",
    "TASK_IN_FLIGHT": "recovery refused while a task of the instance is unsettled",
    "PAYLOAD_TOO_LARGE": f"request body above {MAX_BODY // 1024} KiB, refused before parsing",
    "UNSUPPORTED_MEDIA_TYPE": "a body that is not `application/json`",
    "UNAVAILABLE": "the database is unreachable or at another schema level, or a row the request needs was held past "
                   "the wait; retry after `Retry-After` seconds with the same Idempotency-Key",
    "INTERNAL": "a fault of this build, logged with its stack trace; the body never carries one",
}
STABLE_CODES: list[tuple[str, int, str]] = sorted(
    ((code, status, WHEN.get(code, "")) for code, status in http_codes().items()), key=lambda row: (row[1], row[0]))

# Meanings the schema cannot express, shown beside a body field of that name.
FIELD_NOTES: dict[str, str] = {
    "deadline_ms": "instance deadline in ms from now; give exactly one of `deadline_ms` and `deadline_at`",
    "deadline_at": "absolute time (RFC 3339 with a zone)",
    "version": "definition version; default the latest",
    "input": "any JSON of at most 1 MiB, nested at most 31 levels; default `{}`",
    "payload": "any JSON (`null` included) of at most 256 KiB as sent, nested at most 31 levels",
    "reason": "why, for the audit trail and the event history",
    "timeout_ms": "the new activation's timeout, measured from now (capped by the instance deadline)",
    "output": "the step's output (any JSON, `null` included)",
    "evidence_ref": "a reference to evidence; never dereferenced",
    "extend_ms": "extend the deadline by this much",
    "activation_sequence": "the step's activation the action is meant for (as read); when the step has moved to "
                           "another, 409 `INVALID_STATE` and nothing changes. Default: the current one",
    "max_in_flight": "quota of QUEUED+RUNNING tasks of the app",
    "capacity": "most QUEUED+RUNNING tasks of the queue at once",
    "queues": "queues the credential may use: a list, or `\"*\"` (default) for all",
    "expires_at": "when the credential stops authenticating (RFC 3339, later than now); default never",
    "status": "ACTIVE or DISABLED (a disabled app starts no new task)",
}

# --- rendering helpers --------------------------------------------------------------------------------------
def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _anchor(name: str) -> str:
    return re.sub(r"[^a-z0-9 -]", "", name.lower()).replace(" ", "-")


def _type(schema: Any) -> str:
    """A short, readable type of a schema: `string (date-time)`, `integer 1..500`, `[Instance](#instance)`."""
    if not isinstance(schema, dict) or not schema:
        return "any JSON"
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#{_anchor(name)})"
    if "const" in schema:
        return f"`{schema['const']!r}`".replace("'", '"')
    if "oneOf" in schema:
        return " or ".join(_type(s) for s in schema["oneOf"])
    kinds = schema.get("type", "any JSON")
    kinds = [kinds] if isinstance(kinds, str) else list(kinds)
    parts = []
    for kind in kinds:
        if kind == "array":
            parts.append(f"array of {_type(schema.get('items', {}))}")
        else:
            parts.append(kind)
    text = " or ".join(parts)
    if "enum" in schema:
        text += ": " + ", ".join(f"`{v}`" for v in schema["enum"])
    if "format" in schema:
        text += f" ({schema['format']})"
    low, high = schema.get("minimum"), schema.get("maximum")
    if low is not None or high is not None:
        text += f", {'' if low is None else low}..{'' if high is None else high}"
    if "minLength" in schema or "maxLength" in schema:
        text += f", {schema.get('minLength', 0)}–{schema.get('maxLength', '')} chars"
    if "pattern" in schema:
        text += f", pattern `{schema['pattern']}`"
    return text


def _resolve(doc: dict, schema: dict) -> tuple[str | None, dict]:
    if isinstance(schema, dict) and "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return name, doc["components"]["schemas"][name]
    return None, schema


def _fields(schema: dict, notes: bool = True) -> list[str]:
    required = set(schema.get("required", []))
    rows = ["| field | type | required | notes |", "| --- | --- | --- | --- |"]
    for name, prop in schema.get("properties", {}).items():
        note = (FIELD_NOTES.get(name, "") if notes else "") or prop.get("description", "")
        rows.append(f"| `{name}` | {_cell(_type(prop))} | {'yes' if name in required else 'no'} | {_cell(note)} |")
    return rows


def _scope(op: dict) -> str:
    match = re.search(r"Scope: `([^`]*)`", op.get("description", ""))
    if match:
        return match.group(1)
    return "none" if op.get("security") == [] else "—"


def _operations(doc: dict) -> list[tuple[str, str, dict]]:
    return [(method, path, item[method]) for path, item in doc["paths"].items() for method in METHODS
            if method in item]


def _operation(doc: dict, method: str, path: str, op: dict) -> list[str]:
    out = [f"### `{method.upper()} {path}`", "", op.get("summary", "").strip() + ".", "",
           f"Scope: `{_scope(op)}`." if op.get("security") != [] else "No credential needed.", ""]
    params = op.get("parameters", [])
    if params:
        out += ["| parameter | in | required | type |", "| --- | --- | --- | --- |"]
        out += [f"| `{p['name']}` | {p['in']} | {'yes' if p.get('required') else 'no'} | {_cell(_type(p['schema']))} |"
                for p in params]
        out.append("")
    body = op.get("requestBody")
    if body:
        schema = body["content"]["application/json"]["schema"]
        name, resolved = _resolve(doc, schema)
        out += [f"Request body (`application/json`){f': [{name}](#{_anchor(name)})' if name else ''}:", ""]
        if resolved.get("properties"):
            out += _fields(resolved) + [""]
    out += ["| status | meaning | body | headers |", "| --- | --- | --- | --- |"]
    for status, answer in sorted(op.get("responses", {}).items()):
        content = answer.get("content", {})
        media, body_text = "", ""
        for media, spec in content.items():
            body_text = f"`{media}` {_type(spec.get('schema', {}))}"
            break
        headers = ", ".join(f"`{h}`" for h in answer.get("headers", {}))
        if status == "503":
            headers = headers or "`Retry-After`"
        out.append(f"| {status} | {_cell(answer.get('description', ''))} | {_cell(body_text)} | {headers} |")
    out.append("")
    return out


def _conventions() -> list[str]:
    return [
        "## Conventions", "",
        "**Base URL and namespaces.** Every engine endpoint lives under `/v1/namespaces/{ns}`. A namespace is "
        "the isolation boundary: a credential belongs to exactly one, and any path under a namespace it does not "
        "belong to, like any object of another namespace, answers `404 NOT_FOUND` exactly as a missing object "
        "would.", "",
        "**Authentication.** `Authorization: Bearer <token>`. Tokens are shown once, when a credential is created "
        "(`weave bootstrap`, `weave credentials create`, `POST /credentials`), and stored only as a SHA-256 hash. "
        "Each endpoint needs one scope (`admin`, `definitions:publish`, `workflows:read`, `workflows:start`, "
        "`workflows:signal`, `workflows:control`, `workflows:review`); scopes never imply one another. Every "
        "scope-protected endpoint about an instance also checks the credential's queues against every queue the "
        "instance's pinned definition uses (403 otherwise). The bootstrap credential holds exactly `admin` and "
        "`definitions:publish`.", "",
        "**JSON.** Bodies are `application/json` in and out, in UTF-8; any other request content type, or a "
        "`charset` other than UTF-8, is `415 UNSUPPORTED_MEDIA_TYPE`. Bodies with duplicate object keys are "
        "refused (422), and so are a body field or a query parameter the request does not take (422 "
        "`UNKNOWN_FIELD`: a mistyped filter would otherwise list everything). Times are RFC 3339 UTC with "
        "microseconds (`2026-11-29T23:59:59.123456Z`), taken from the "
        "database clock. Ids are opaque strings (`wf_…`, `sig_…`, `tsk_…`, `cred_…`).", "",
        f"**Size.** A request body above {MAX_BODY // 1024} KiB ({MAX_BODY} bytes) is refused with "
        "`413 PAYLOAD_TOO_LARGE` before it is parsed, chunked bodies included.", "",
        "**Idempotency and replays.** Every POST that starts or changes an instance, and a definition's publish, "
        "an app's or a queue's put and a credential's creation, takes an `Idempotency-Key` header: 1–128 "
        "printable ASCII characters other than space, required where the parameter table says so "
        "(a missing or malformed key is `422` with `errors[].code = IDEMPOTENCY_KEY_INVALID`). A key identifies one "
        "operation within a scope: the namespace for starting an instance, and the namespace and the kind for "
        "publishing, putting an app, putting a queue and creating a credential; the instance and the action "
        "for pause, resume, cancel, deadline, retry and the step recovery actions, the instance for a signal. The "
        "same key with the same content again answers `200` with the header `Idempotent-Replayed: true` and does "
        "nothing again (for a start or an action the body is the instance as it is now; for a signal it is the first "
        "receipt, byte-identical; for a publish, the version it answered, even after later publishes; for an app "
        "or a queue, what the first put answered, even after later puts; for a credential, the credential the "
        "first made, with `token` null: a token is shown once). JSON in a request "
        "is content as a value: a start's input, a signal's payload or a "
        "resolve's output spelled otherwise (keys in another order, other whitespace, escapes for characters that "
        "need none) is the same content. The same key with different content answers `409 IDEMPOTENCY_CONFLICT` "
        "and changes nothing. A replay still checks the caller's current permissions. Generate one key per logical "
        "operation and reuse it for every retry of that operation.", "",
        "Without a key, the admin POSTs are safe to repeat while nothing else changed: a publish of the same "
        "content as the latest version answers `200` with that version, and apps and queues are create-or-update "
        "(`201`, then `200`). A late repeat, after another change, undoes it: the first document is published "
        "again as a new version, the first quota or capacity is put back. And every `POST /credentials` without a "
        "key creates a new credential, whose token is shown once: after a lost answer, a repeat with the key "
        "says which credential the first try made (disable it and create another), where one without a key "
        "leaves it live and unknown.", "",
        "**Database unavailable.** While the database is unreachable, or at a schema level other than the one "
        "this build ships, every endpoint that needs it answers `503 UNAVAILABLE` with a `Retry-After` header "
        "(seconds), never a 500 with a stack trace. `/healthz` keeps answering 200. So does a request whose row "
        "(its instance, most likely) another transaction holds past the lock wait, or whose answer the database "
        "does not give in time (`WEAVE_API_DB_TIMEOUT_S`); its `detail` says which, and a request whose answer timed "
        "out may still complete: retry with the same `Idempotency-Key`, which never acts twice.", "",
        "## Errors", "",
        "Every error is `application/problem+json` (RFC 9457):", "",
        "```json",
        '{"type": "https://weave.dev/problems/idempotency-conflict", "title": "Conflict", "status": 409,',
        ' "code": "IDEMPOTENCY_CONFLICT", "detail": "this key started a different request", "errors": []}',
        "```", "",
        "`code` is the stable machine code: match on it (and on `errors[].code`), never on `detail` or `title`. "
        "`errors` lists `{field, code, message}` for validation failures.", "",
        "| code | HTTP | when |", "| --- | --- | --- |",
        *[f"| `{code}` | {status} | {_cell(text)} |" for code, status, text in STABLE_CODES],
        "",
        "`errors[].code` values of `VALIDATION_FAILED` raised by the engine (the SQL reference lists the errno "
        "of each): " + ", ".join(f"`{c}`" for c in HTTP_VALIDATION_CODES) + ".", "",
        "`errors[].code` values found by the API itself, before any routine runs:", "",
        "| code | when |", "| --- | --- |",
        *[f"| `{code}` | {_cell(text)} |" for code, text in EDGE_FIELD_CODES.items()],
        "",
        f"A body holding many `DUPLICATE_JSON_KEY` or `INVALID_TEXT` problems lists the first "
        f"{MAX_LISTED_PROBLEMS} in document order, fewer when their `field` paths come to more than "
        f"{MAX_LISTED_PATH_CHARS:,} characters (the first is always listed); the `detail` then says how many "
        "there are in all.", "",
        "A definition document that does not "
        "validate lists its problems at once (within the same limits), each with a dotted `field` path and one of "
        "these codes: "
        "`INVALID_TYPE`, `INVALID_VALUE`, `MISSING_FIELD`, `UNKNOWN_FIELD`, `UNKNOWN_TYPE` (a step type), "
        "`OUT_OF_RANGE` (a number past its bounds), `DUPLICATE_STEP_KEY`, `UNKNOWN_AFTER`, `CYCLIC_AFTER`, "
        "`BAD_EXPRESSION`, `UNKNOWN_STEP_REFERENCE` (`$.steps.<key>` names a step that is not before this one "
        "through `after`) and `RESULT_CLASS_OVERLAP` (a status in two result classes). The queues the steps name "
        "are checked once the document validates: each missing one is then `QUEUE_NOT_FOUND` at its step's "
        "`queue`. Step shapes and their defaults: `docs/concepts.md`.", "",
    ]


def render(doc: dict | None = None) -> str:
    doc = document() if doc is None else doc
    ops = _operations(doc)
    out = ["# HTTP API reference", "",
           "Generated from the OpenAPI document (`api/openapi.py`, served at `GET /openapi.json`) by "
           "`python -m api.docs`; do not edit.", "",
           f"{doc['info']['title']} API version {doc['info']['version']}, OpenAPI {doc['openapi']}. "
           "The Python SDK (`docs/sdk.md`) wraps every endpoint; the same operations exist as SQL routines "
           "(`docs/sql-api.md`).", "",
           "## Endpoints", "",
           "| method | path | scope | summary |", "| --- | --- | --- | --- |"]
    for method, path, op in ops:
        scope = _scope(op)
        out.append(f"| {method.upper()} | `{path}` | {scope if scope == 'none' else f'`{scope}`'} | "
                   f"{_cell(op.get('summary', ''))} |")
    out.append("")
    out += _conventions()
    out += ["## Operations", ""]
    for method, path, op in ops:
        out += _operation(doc, method, path, op)
    out += ["## Schemas", ""]
    for name, schema in doc["components"]["schemas"].items():
        out += [f"### {name}", ""]
        kinds = schema.get("type")
        nullable = isinstance(kinds, list) and "null" in kinds
        if schema.get("properties"):
            if nullable:
                out += ["May be `null`.", ""]
            out += _fields(schema, notes=False) + [""]
        else:
            out += [f"{_type(schema)}.", ""]
    return "\n".join(out).rstrip("\n") + "\n"


def main(argv: list[str]) -> int:
    from procedures.docs import write_or_check

    return write_or_check(TARGET, render(), "python -m api.docs", argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
