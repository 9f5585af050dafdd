"""Signal resources (05-signals over HTTP). A payload is passed to the routine as the exact bytes of
the request body that encode it (S-4 "bytes as received"): the API never re-serialises a payload, so
big numbers and key order survive and the request digest is the same one a SQL client would get."""

from __future__ import annotations

import json

import falcon

from procedures import signals

from .http import ApiError, bearer, idempotency_key, parse_strict, raw_body, respond
from .resources import Resource, _int_param

SEND_FIELDS = {"name": str, "payload_version": str, "target_step_key": str, "target_activation_sequence": int,
               "correlation_key": str, "reason": str, "evidence_ref": str}
FIELD_CODES = {"name": "NAME_INVALID", "payload_version": "PAYLOAD_VERSION_INVALID",
               "target_step_key": "TARGET_STEP_INVALID", "target_activation_sequence": "ACTIVATION_SEQUENCE_INVALID",
               "correlation_key": "CORRELATION_KEY_MISSING", "reason": "REASON_INVALID",
               "evidence_ref": "EVIDENCE_REF_INVALID"}


def top_level_members(text: str) -> dict[str, tuple[object, str]]:
    """Each top-level member of a JSON object as (decoded value, exact source text of the value).
    Duplicate keys (at any depth) were already refused by the strict parser."""
    decoder = json.JSONDecoder()
    members: dict[str, tuple[object, str]] = {}
    i = _skip(text, 0)
    if i >= len(text) or text[i] != "{":
        raise ValueError("not an object")
    i = _skip(text, i + 1)
    if text[i] == "}":
        return members
    while True:
        key, i = json.decoder.scanstring(text, i + 1) if text[i] == '"' else (None, i)
        if key is None:
            raise ValueError("expected a key")
        i = _skip(text, i)
        if text[i] != ":":
            raise ValueError("expected ':'")
        start = _skip(text, i + 1)
        value, end = decoder.raw_decode(text, start)
        members[key] = (value, text[start:end])
        i = _skip(text, end)
        if text[i] == "}":
            return members
        if text[i] != ",":
            raise ValueError("expected ','")
        i = _skip(text, i + 1)


def _skip(text: str, i: int) -> int:
    while i < len(text) and text[i] in " \t\r\n":
        i += 1
    return i


def _invalid(field: str, code: str, message: str) -> ApiError:
    return ApiError(422, "VALIDATION_FAILED", message, [{"field": field, "code": code, "message": message}])


class Signals(Resource):
    def on_post(self, req, resp, ns, workflow_id):
        token = bearer(req)
        key = idempotency_key(req, required=True)
        if req.content_type is None or req.content_type.split(";")[0].strip().lower() != "application/json":
            raise ApiError(415, "UNSUPPORTED_MEDIA_TYPE", "send the signal as application/json")
        body = raw_body(req)
        parse_strict(body)  # refuses invalid JSON and duplicate keys at any depth (422)
        try:
            members = top_level_members(body.decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            raise _invalid("body", "INVALID_TYPE", "the body must be a JSON object") from None
        args = {}
        for field, kind in SEND_FIELDS.items():
            value = members.get(field, (None, ""))[0]
            if value is not None and (not isinstance(value, kind) or isinstance(value, bool)):
                raise _invalid(field, FIELD_CODES[field], f"{field} must be a {kind.__name__}")
            args[field] = value
        for field in ("name", "payload_version", "target_step_key", "target_activation_sequence", "reason"):
            if args[field] is None:
                raise _invalid(field, FIELD_CODES[field], f"{field} is required")
        if args["correlation_key"] is None:
            raise _invalid("correlation_key", "CORRELATION_KEY_MISSING", "correlation_key is required")
        if args["target_activation_sequence"] < 1 or args["target_activation_sequence"] > 2**31:
            raise _invalid("target_activation_sequence", "ACTIVATION_SEQUENCE_INVALID", "a positive integer")
        payload_text = members["payload"][1].encode("utf-8") if "payload" in members else None
        receipt = signals.send(self.conn, token, ns, workflow_id, idempotency_key=key, payload=payload_text,
                               correlation_key=args.pop("correlation_key").encode("utf-8"), **args)
        resp.status = falcon.HTTP_200 if receipt["replayed"] else falcon.HTTP_201
        resp.content_type = falcon.MEDIA_JSON
        resp.text = receipt["receipt_json"]  # the frozen receipt, byte-identical on every replay (S-4, S-5)
        if receipt["replayed"]:
            resp.set_header("Idempotent-Replayed", "true")

    def on_get(self, req, resp, ns, workflow_id):
        status = req.get_param("status") or None
        limit = _int_param(req, "limit", 100, 1, 1000)
        page = signals.list_signals(self.conn, bearer(req), ns, workflow_id, status=status, limit=limit,
                                    after=req.get_param("cursor"))
        respond(resp, {"items": [_public(s) for s in page["items"]], "next_cursor": page["next_cursor"]})


class Signal(Resource):
    def on_get(self, req, resp, ns, workflow_id, signal_id):
        respond(resp, _public(signals.get(self.conn, bearer(req), ns, workflow_id, signal_id)))


class Explain(Resource):
    def on_get(self, req, resp, ns, workflow_id, step_key):
        respond(resp, signals.explain(self.conn, bearer(req), ns, workflow_id, step_key))


def _public(signal: dict) -> dict:
    return {k: v for k, v in signal.items() if k != "payload_text"}
