"""What a request may carry: one JSON Schema per request body and per query string, served in the OpenAPI
document and enforced here, so that a request valid by the document passes the edge.

The edge checks the shape: JSON types (an integral number such as ``452.0`` is an integer, as JSON Schema
says), required fields, unknown fields (``additionalProperties: false``), enums, numeric ranges, array sizes
and times. Every problem is reported at once, each with its field and the code the routine uses for that
field, so SQL and HTTP clients see one vocabulary. String lengths and patterns are in the schemas too, but
the routines enforce them (with their finer codes, e.g. ``NAME_TOO_LONG``): nothing is checked twice.
"""

from __future__ import annotations

import re
from typing import Any

import falcon

from procedures import routines

from .http import invalid

Schema = dict[str, Any]
Problem = tuple[str, str, str]

TIME: Schema = {"type": "string", "format": "date-time"}
_NAME = "^[A-Za-z0-9_.:-]{1,64}$"
_DEFINITION_NAME = "^[A-Za-z0-9_.:-]{1,128}$"
_REASON: Schema = {"type": "string", "minLength": 1, "maxLength": 1024}
_EVIDENCE: Schema = {"type": "string", "minLength": 1, "maxLength": 512, "pattern": "^[^\\s]+$"}
SCOPES = ["admin", "definitions:publish", "workflows:read", "workflows:start", "workflows:signal",
          "workflows:control", "workflows:review"]
_YEAR_MS = 31_536_000_000


def _obj(properties: dict[str, Schema], required: list[str], **extra: Any) -> Schema:
    return {"type": "object", "required": required, "properties": properties, "additionalProperties": False,
            **extra}


def _control(extra: dict[str, Schema] | None = None, required: list[str] | None = None, **more: Any) -> Schema:
    return _obj({"reason": _REASON, **(extra or {})}, ["reason", *(required or [])], **more)


# The activation a step action is meant for (the step's activation_sequence as the operator saw it).
_ACTIVATION: Schema = {"type": "integer", "minimum": 1, "maximum": 2**31}

# Request bodies by component name. The code beside each field is the one its routine raises for it.
BODIES: dict[str, Schema] = {
    "StartRequest": _obj({
        "definition": {"type": "string", "pattern": _DEFINITION_NAME},
        "version": {"type": "integer", "minimum": 1, "maximum": 2**31 - 1},
        "app": {"type": "string", "pattern": _NAME},
        "input": {},
        "deadline_ms": {"type": "integer", "minimum": 1, "maximum": 315_360_000_000},
        "deadline_at": TIME,
        # null as absent: the instance shows an absent key as null, and a client may send back what it read.
        "business_key": {"type": ["string", "null"], "minLength": 1, "maxLength": 256}},
        ["definition", "app"], oneOf=[{"required": ["deadline_ms"]}, {"required": ["deadline_at"]}]),
    "SignalRequest": _obj({
        "name": {"type": "string", "minLength": 1, "maxLength": 128, "pattern": "^[ -~]+$"},
        "payload_version": {"type": "string", "minLength": 1, "maxLength": 32, "pattern": "^[ -~]+$"},
        "target_step_key": {"type": "string", "minLength": 1, "maxLength": 64},
        "target_activation_sequence": {"type": "integer", "minimum": 1, "maximum": 2**31},
        "correlation_key": {"type": "string", "minLength": 1, "maxLength": 512,
                            "description": "at most 512 characters here, and at most 512 bytes of UTF-8 in the engine, "
                                           "which compares it byte for byte"},
        "payload": {},
        "reason": _REASON,
        "evidence_ref": _EVIDENCE},
        ["name", "payload_version", "target_step_key", "target_activation_sequence", "correlation_key", "payload",
         "reason"]),
    "ReasonRequest": _control(),
    "ReactivateRequest": _control({"timeout_ms": {"type": "integer", "minimum": 1, "maximum": _YEAR_MS},
                                   "activation_sequence": _ACTIVATION}),
    "ContinueRequest": _control({"extra_rounds": {"type": "integer", "minimum": 1, "maximum": 10_000},
                                 "poll_deadline_ms": {"type": "integer", "minimum": 1, "maximum": 315_360_000_000},
                                 "activation_sequence": _ACTIVATION},
                                anyOf=[{"required": ["extra_rounds"]}, {"required": ["poll_deadline_ms"]}]),
    "ResolveRequest": _control({"output": {}, "evidence_ref": _EVIDENCE, "activation_sequence": _ACTIVATION},
                               ["output"]),
    "DeadlineRequest": _control({"deadline_at": TIME,
                                 "extend_ms": {"type": "integer", "minimum": 1, "maximum": 315_360_000_000}},
                                oneOf=[{"required": ["deadline_at"]}, {"required": ["extend_ms"]}]),
    "AppRequest": _obj({"name": {"type": "string", "pattern": _NAME},
                        "max_in_flight": {"type": "integer", "minimum": 0, "maximum": 1_000_000},
                        "status": {"type": "string", "enum": ["ACTIVE", "DISABLED"]}}, ["name", "max_in_flight"]),
    "QueueRequest": _obj({"name": {"type": "string", "pattern": _NAME},
                          "capacity": {"type": "integer", "minimum": 0, "maximum": 1_000_000}}, ["name", "capacity"]),
    "CredentialRequest": _obj({
        "actor": {"type": "string", "minLength": 1, "maxLength": 128, "pattern": "^[^\\x00-\\x1f\\x7f]+$"},
        "scopes": {"type": "array", "minItems": 1, "uniqueItems": True, "items": {"type": "string", "enum": SCOPES}},
        "queues": {"oneOf": [{"type": "array", "minItems": 1, "items": {"type": "string", "pattern": _NAME}},
                             {"const": "*"}]},
        "expires_at": TIME},
        ["actor", "scopes"]),
}

# field -> the code its routine raises for it (the rest: INVALID_TYPE, MISSING_FIELD, UNKNOWN_FIELD).
FIELD_CODES: dict[str, str] = {
    "definition": "DEFINITION_NOT_FOUND", "version": "INVALID_ARGUMENT", "app": "APP_NOT_FOUND",
    "input": "INPUT_INVALID", "business_key": "INPUT_INVALID", "output": "INPUT_INVALID",
    "deadline_ms": "DEADLINE_INVALID", "deadline_at": "DEADLINE_INVALID", "extend_ms": "DEADLINE_INVALID",
    "poll_deadline_ms": "DEADLINE_INVALID", "timeout_ms": "INVALID_ARGUMENT", "extra_rounds": "INVALID_ARGUMENT",
    "name": "NAME_INVALID", "actor": "NAME_INVALID", "queues": "NAME_INVALID",
    "payload_version": "PAYLOAD_VERSION_INVALID", "target_step_key": "TARGET_STEP_INVALID",
    "target_activation_sequence": "ACTIVATION_SEQUENCE_INVALID", "correlation_key": "CORRELATION_KEY_MISSING",
    "payload": "PAYLOAD_MISSING", "reason": "REASON_INVALID", "evidence_ref": "EVIDENCE_REF_INVALID",
    "max_in_flight": "LIMIT_INVALID", "capacity": "LIMIT_INVALID", "scopes": "SCOPES_INVALID",
    "status": "INVALID_ARGUMENT", "limit": "LIMIT_INVALID", "after": "LIMIT_INVALID", "cursor": "CURSOR_INVALID",
    "activation": "LIMIT_INVALID",
}

# Query strings by operation: parameter -> schema. An empty value (`status=`) is never "absent".
LIMIT_500: Schema = {"type": "integer", "minimum": 1, "maximum": 500, "default": 50}
LIMIT_1000: Schema = {"type": "integer", "minimum": 1, "maximum": 1000, "default": 100}
QUERIES: dict[str, dict[str, Schema]] = {
    "list_workflows": {
        "status": {"type": "string", "enum": ["RUNNING", "SUCCEEDED", "NEEDS_REVIEW", "CANCELLING", "CANCELLED"]},
        "definition": {"type": "string", "pattern": _DEFINITION_NAME},
        "control": {"type": "string", "enum": ["ACTIVE", "PAUSED"]},
        "business_key": {"type": "string", "minLength": 1, "maxLength": 256},
        "review_code": {"type": "string", "pattern": "^[A-Z_]{1,64}$",
                        "description": "only instances with an open review reason of this code"},
        "deferred": {"type": "boolean", "description": "true: only instances whose next check is deferred"},
        "limit": LIMIT_500,
        "cursor": {"type": "string", "pattern": "^[0-9]{1,19}$"}},
    "list_events": {"after": {"type": "integer", "minimum": 0, "maximum": 2**62}, "limit": LIMIT_1000},
    "list_rounds": {
        "activation": {"type": "integer", "minimum": 1, "maximum": 2**31 - 1,
                       "description": "the activation sequence whose rounds to read (default: the step's latest)"},
        "after": {"type": "integer", "minimum": 0, "maximum": 2**31 - 1,
                  "description": "the rounds after this number (default 0: from round 1)"},
        "limit": {**LIMIT_1000, "description": "rounds at most; a page also ends, with its next_after and more, once "
                                                "its results pass 8 MiB (it always holds one round)"}},
    "list_signals": {
        "status": {"type": "string", "enum": ["PENDING", "CONSUMED", "REJECTED", "EXPIRED"]},
        "limit": {**LIMIT_1000, "description": "signals at most; a page also ends, with a next_cursor, once its "
                                                "payloads pass 8 MiB (it always holds one signal)"},
        "cursor": {"type": "string", "pattern": "^sig_[0-9]{1,19}$"}},
    "list_definitions": {"limit": LIMIT_1000, "cursor": {"type": "string", "pattern": _DEFINITION_NAME}},
    "list_apps": {"limit": LIMIT_1000, "cursor": {"type": "string", "pattern": _NAME}},
    "list_queues": {"limit": LIMIT_1000, "cursor": {"type": "string", "pattern": _NAME}},
    "list_credentials": {"limit": LIMIT_1000, "cursor": {"type": "string", "pattern": "^cred_[0-9]{1,19}$"}},
    "list_audit": {
        "workflow_id": {"type": "string", "pattern": "^wf_[0-9]{1,19}$",
                        "description": "this instance's audit rows (workflows:read); without it, the namespace's own "
                                       "actions (admin)"},
        "action": {"type": "string", "pattern": "^[a-z_.]{1,48}$", "description": "only this action, e.g. "
                                                                                  "credential.disable"},
        "limit": LIMIT_500,
        "cursor": {"type": "string", "pattern": "^[0-9]{20}-[0-9]{1,19}$"}},
}


def _code(field: str, fallback: str) -> str:
    return FIELD_CODES.get(field.split(".")[0].split("[")[0], fallback)


def _is_type(value: Any, kind: str) -> bool:
    if kind == "integer":  # 452.0 is an integer (JSON Schema); 1.0000000000000000001, which parses to 1.0, is not
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer() and getattr(value, "integral", True))
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return {"string": str, "boolean": bool, "object": dict, "array": list, "null": type(None)}[kind] is type(value)


def _valid_time(value: str) -> bool:
    """An RFC 3339 time with a zone that is a time in UTC too: a zone may move it past 9999-12-31 or before year 1."""
    try:
        routines.from_rfc3339(value)
    except (ValueError, OverflowError):
        return False
    return True


def check(schema: Schema, value: Any, field: str = "") -> list[Problem]:
    """Every way ``value`` breaks the shape rules of ``schema``, as (field, code, message)."""
    problems: list[Problem] = []
    kinds = schema.get("type")
    if kinds is not None:
        kinds = [kinds] if isinstance(kinds, str) else kinds
        if not any(_is_type(value, kind) for kind in kinds):
            return [(field, _code(field, "INVALID_TYPE"), f"{field or 'the body'} must be {' or '.join(kinds)}")]
    if "const" in schema and value != schema["const"]:
        return [(field, _code(field, "INVALID_VALUE"), f"{field} must be {schema['const']!r}")]
    if "enum" in schema and value not in schema["enum"]:
        return [(field, _code(field, "INVALID_VALUE"), f"{field} must be one of {', '.join(map(str, schema['enum']))}")]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        low, high = schema.get("minimum"), schema.get("maximum")
        if (low is not None and value < low) or (high is not None and value > high):
            problems.append((field, _code(field, "INVALID_VALUE"), f"{field} must be from {low} to {high}"))
    if isinstance(value, str) and schema.get("format") == "date-time" and not _valid_time(value):
        problems.append((field, _code(field, "INVALID_VALUE"), f"{field} must be an RFC 3339 time with a zone"))
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            problems.append((field, _code(field, "INVALID_VALUE"), f"{field} needs at least {schema['minItems']}"))
        if schema.get("uniqueItems") and len({repr(v) for v in value}) != len(value):
            problems.append((field, _code(field, "INVALID_VALUE"), f"{field} lists a value twice"))
        for index, item in enumerate(value):
            problems += check(schema.get("items", {}), item, f"{field}[{index}]")
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        for name in schema.get("required", []):
            if name not in value:
                problems.append((name, _code(name, "MISSING_FIELD"), f"{name} is required"))
        for name, member in value.items():
            path = f"{field}.{name}" if field else name
            if name in properties:
                problems += check(properties[name], member, path)
            elif schema.get("additionalProperties") is False:
                allowed = ", ".join(properties)
                problems.append((path, "UNKNOWN_FIELD", f"unknown field {name!r}; allowed: {allowed}"))
    for keyword, wanted in (("oneOf", 1), ("anyOf", None)):
        if keyword in schema:
            found = [check(option, value, field) for option in schema[keyword]]  # each alternative's problems
            passing = found.count([])
            fitting = [i for i, option in enumerate(schema[keyword]) if _fits(option, value)]
            if passing == 0 and len(fitting) == 1 and not schema[keyword][fitting[0]].get("required"):
                # One alternative of the value's own type: what is wrong is what that one says (a list too short).
                problems += found[fitting[0]]
            elif passing == 0 or (wanted is not None and passing != wanted):
                names = [name for option in schema[keyword] for name in option.get("required", [])]
                which = names[0] if names else field
                text = " and ".join(names) if names else "the alternatives"
                rule = "exactly one" if wanted else "at least one"
                problems.append((which, _code(which, "INVALID_VALUE"), f"give {rule} of {text}"))
    return problems


def _fits(schema: Schema, value: Any) -> bool:
    """Whether ``value`` is of the JSON type ``schema`` takes (of its constant's, for a constant)."""
    kinds = schema.get("type")
    if kinds is None:
        return "const" not in schema or type(schema["const"]) is type(value)
    return any(_is_type(value, kind) for kind in ([kinds] if isinstance(kinds, str) else kinds))


def _integral(schema: Schema, value: Any) -> Any:
    """Integral numbers of integer fields as ints (``452.0`` -> ``452``)."""
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        return {name: _integral(properties.get(name, {}), member) for name, member in value.items()}
    if isinstance(value, float) and schema.get("type") == "integer":
        return int(value)
    return value


def body(name: str, value: Any) -> dict[str, Any]:
    """The body, checked against request schema ``name``: every problem is one 422."""
    schema = BODIES[name]
    problems = check(schema, value)
    if problems:
        raise invalid(problems)
    result: dict[str, Any] = _integral(schema, value)
    return result


def query(req: falcon.Request, operation: str) -> dict[str, Any]:
    """The query parameters of ``operation``, checked and converted (absent ones are their schema's default, or
    None)."""
    spec = QUERIES[operation]
    values: dict[str, Any] = {}
    # A name the operation does not take is refused, as an unknown body field is: a mistyped filter (?stauts=) would
    # otherwise list everything, and a bulk action taken on that list would reach what was meant to be left out.
    problems: list[Problem] = [(name, "UNKNOWN_FIELD", f"{name} is not a query parameter of this request; it takes "
                                + (", ".join(spec) or "none"))
                               for name in sorted(req.params) if name not in spec]
    for name, schema in spec.items():
        raw = req.params.get(name)
        if isinstance(raw, list):
            problems.append((name, _code(name, "INVALID_ARGUMENT"), f"{name} may be given once"))
            continue
        if raw is None:
            values[name] = schema.get("default")
            continue
        if raw == "":
            problems.append((name, _code(name, "INVALID_ARGUMENT"), f"{name} is empty; leave it out instead"))
            continue
        value: Any = raw
        if schema.get("type") == "integer":
            value = int(raw) if re.fullmatch(r"-?[0-9]{1,20}", raw) else raw
        elif schema.get("type") == "boolean":
            value = {"true": True, "false": False}.get(raw, raw)
        found = check(schema, value, name)
        if not found and "pattern" in schema and not re.search(schema["pattern"], value):
            found = [(name, _code(name, "INVALID_ARGUMENT"), f"{name} is not valid")]
        problems += found
        values[name] = value
    if problems:
        raise invalid(problems)
    return values


def query_parameters(operation: str) -> list[dict[str, Any]]:
    """The OpenAPI parameter objects of ``operation``'s query string."""
    return [{"name": name, "in": "query", "required": False, "allowEmptyValue": False,
             **({"description": schema["description"]} if "description" in schema else {}),
             "schema": {k: v for k, v in schema.items() if k != "description"}}
            for name, schema in QUERIES[operation].items()]
