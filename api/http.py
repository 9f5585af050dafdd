"""HTTP plumbing shared by every resource: bodies read with a hard cap, bearer tokens, idempotency
headers, and one error handler that turns the engine's error vocabulary into problem+json."""

from __future__ import annotations

import json
import logging
import threading
from typing import Any

import falcon
import pymysql

from orchestrator.definitions import DefinitionError, parse_json_strict
from procedures import db, errors

log = logging.getLogger("weave.api")

MAX_BODY = 300 * 1024
PROBLEM = "application/problem+json"
REPLAYED = "Idempotent-Replayed"


class ApiError(errors.WeaveError):
    """An HTTP-level refusal that never reached the database (413, 415, 401 without a token, ...)."""

    def __init__(self, status: int, code: str, detail: str, errors_: list[dict] | None = None):
        super().__init__(f"{code}: {detail}", detail=detail)
        self.http_status, self.code, self.errors = status, code, errors_ or []


class Connections:
    """One connection per serving thread, reopened after a failure (gunicorn sync workers: one each)."""

    def __init__(self, dsn: db.Dsn):
        self.dsn = dsn
        self._local = threading.local()

    def get(self) -> pymysql.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None or not conn.open:
            conn = self._local.conn = db.connect(self.dsn)
        return conn

    def discard(self) -> None:
        conn = getattr(self._local, "conn", None)
        self._local.conn = None
        if conn is not None:
            try:
                conn.close()
            except Exception:  # the connection is already broken; nothing to release
                pass


def bearer(req: falcon.Request) -> str:
    header = req.get_header("Authorization") or ""
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise ApiError(401, "UNAUTHENTICATED", "an Authorization: Bearer <token> header is required")
    return token.strip()


def idempotency_key(req: falcon.Request, required: bool) -> str | None:
    key = req.get_header("Idempotency-Key")
    if key is None and required:
        raise ApiError(422, "VALIDATION_FAILED", "this request needs an Idempotency-Key header",
                       [{"field": "Idempotency-Key", "code": "IDEMPOTENCY_KEY_INVALID",
                         "message": "missing Idempotency-Key header"}])
    return key


def raw_body(req: falcon.Request) -> bytes:
    """The request body, refused with 413 past the cap before any parsing (also for chunked bodies)."""
    if req.content_length is not None and req.content_length > MAX_BODY:
        raise ApiError(413, "PAYLOAD_TOO_LARGE", f"request bodies are limited to {MAX_BODY} bytes")
    body = req.stream.read(MAX_BODY + 1) if req.content_length is None else req.stream.read(req.content_length)
    if len(body) > MAX_BODY:
        raise ApiError(413, "PAYLOAD_TOO_LARGE", f"request bodies are limited to {MAX_BODY} bytes")
    return body


def parse_strict(body: bytes) -> Any:
    """json.loads that refuses duplicate keys and NaN (422), because MariaDB's JSON_EXTRACT would read the
    first of two keys where Python reads the last."""
    try:
        return parse_json_strict(body)
    except DefinitionError as exc:
        raise ApiError(422, "VALIDATION_FAILED", "the body is not valid JSON",
                       [{"field": e.field or "body", "code": e.code, "message": e.message} for e in exc.errors]) \
            from exc


def json_body(req: falcon.Request) -> Any:
    if req.content_type is None or req.content_type.split(";")[0].strip().lower() != "application/json":
        raise ApiError(415, "UNSUPPORTED_MEDIA_TYPE", "send the body as application/json")
    return parse_strict(raw_body(req))


def json_object(req: falcon.Request) -> dict:
    body = json_body(req)
    if not isinstance(body, dict):
        raise ApiError(422, "VALIDATION_FAILED", "the body must be a JSON object",
                       [{"field": "body", "code": "INVALID_TYPE", "message": "expected an object"}])
    return body


def respond(resp: falcon.Response, payload: Any, status: int = 200, replayed: bool = False) -> None:
    resp.status = status
    resp.content_type = falcon.MEDIA_JSON
    resp.text = json.dumps(payload, default=str)
    if replayed:
        resp.set_header(REPLAYED, "true")


_TITLES = {400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed",
           409: "Conflict", 413: "Content Too Large", 415: "Unsupported Media Type", 422: "Unprocessable Content",
           500: "Internal Server Error", 503: "Service Unavailable"}


def problem(resp: falcon.Response, status: int, code: str, detail: str, errors_: list[dict] | None = None) -> None:
    resp.status = status
    resp.content_type = PROBLEM
    resp.text = json.dumps({"type": f"https://weave.dev/problems/{code.lower().replace('_', '-')}",
                            "title": _TITLES.get(status, "Error"), "status": status, "code": code,
                            "detail": detail, "errors": errors_ or []})


def make_error_handler(connections: Connections):
    def handle(req: falcon.Request, resp: falcon.Response, exc: BaseException, params: dict) -> None:
        if isinstance(exc, falcon.HTTPError):
            status = int(str(exc.status).split()[0]) if not isinstance(exc.status, int) else exc.status
            codes = {404: "NOT_FOUND", 405: "METHOD_NOT_ALLOWED", 413: "PAYLOAD_TOO_LARGE",
                     415: "UNSUPPORTED_MEDIA_TYPE", 400: "VALIDATION_FAILED"}
            code = codes.get(status, "VALIDATION_FAILED" if status == 422 else "ERROR")
            problem(resp, status, code, exc.description or exc.title or code)
            return
        if isinstance(exc, pymysql.err.MySQLError):
            exc = errors.translate(exc)
        if isinstance(exc, errors.TransientDatabaseError) or isinstance(exc, pymysql.err.MySQLError) and \
                errors.errno_of(exc) in errors.TRANSIENT_ERRNOS:
            connections.discard()
            resp.set_header("Retry-After", "1")
            problem(resp, 503, "UNAVAILABLE", "the database is unavailable; retry shortly")
            return
        if isinstance(exc, errors.SchemaMismatch):
            resp.set_header("Retry-After", "5")
            problem(resp, 503, "UNAVAILABLE", str(exc.detail))
            return
        if isinstance(exc, errors.ValidationFailed):
            problem(resp, 422, "VALIDATION_FAILED", exc.detail, exc.errors)
            return
        if isinstance(exc, errors.WeaveError) and exc.http_status < 500:
            problem(resp, exc.http_status, exc.code, exc.detail, getattr(exc, "errors", None))
            return
        log.exception("unhandled error", extra={"fields": {"path": req.path}})
        connections.discard()
        problem(resp, 500, "INTERNAL", "an internal error occurred; it has been logged")

    return handle
