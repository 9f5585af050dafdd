"""The built-in ``http`` handler, version ``1`` (K-8): the common "ask a REST endpoint" case.

Frozen input::

    {"method": "GET", "url": "https://psp.example/v1/payments/42",
     "headers": {"Authorization": "..."}, "body": <any JSON, optional>, "timeout_ms": 10000}

Only hosts on the allowlist in ``WEAVE_HTTP_ALLOWLIST`` (comma list of ``host`` or ``host:port``;
required) are called, redirects included: anything else is a non-retryable failure, so a definition
cannot turn workers into a proxy to arbitrary hosts. The JSON response body is the result. 5xx, 429,
timeouts and connection errors are retryable; other 4xx, a non-JSON body and refused hosts are not.
Connections go direct (proxy variables are ignored), so the allowlist names the hosts actually reached.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import urlsplit

from procedures import settings

from .handlers import Retryable, handler

ALLOWLIST_ENV = settings.ALLOWLIST_ENV
MAX_RESPONSE_BYTES = 1024 * 1024
DEFAULT_TIMEOUT_MS = 10_000


class HttpRefused(Exception):
    """A request the handler will not make (bad input, host not allowed): non-retryable."""


def allowlist() -> set[str]:
    return settings.http_allowlist()


def _check_allowed(url: str, allowed: set[str]) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise HttpRefused(f"HTTP_URL_INVALID: only absolute http(s) URLs are allowed, got {url!r}")
    if not allowed:
        raise HttpRefused(f"HTTP_HOST_NOT_ALLOWED: {ALLOWLIST_ENV} is empty; no host may be called")
    host = parts.hostname.lower()
    port = parts.port or (443 if parts.scheme == "https" else 80)
    if host not in allowed and f"{host}:{port}" not in allowed:
        raise HttpRefused(f"HTTP_HOST_NOT_ALLOWED: {host} is not on {ALLOWLIST_ENV}")


class _AllowlistRedirects(urllib.request.HTTPRedirectHandler):
    def __init__(self, allowed: set[str]):
        self.allowed = allowed

    def redirect_request(self, req: urllib.request.Request, fp: Any, code: int, msg: str, headers: Any,
                         newurl: str) -> urllib.request.Request | None:
        _check_allowed(newurl, self.allowed)
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def request(spec: Any) -> Any:
    if not isinstance(spec, dict):
        raise HttpRefused("HTTP_INPUT_INVALID: the input must be an object with method and url")
    method = str(spec.get("method", "GET")).upper()
    url = spec.get("url")
    headers = spec.get("headers") or {}
    if not isinstance(url, str) or not isinstance(headers, dict):
        raise HttpRefused("HTTP_INPUT_INVALID: url must be a string and headers an object")
    allowed = allowlist()
    _check_allowed(url, allowed)
    data = None
    if "body" in spec and spec["body"] is not None:
        data = json.dumps(spec["body"], separators=(",", ":")).encode()
        headers = {"Content-Type": "application/json", **headers}
    headers = {"Accept": "application/json", **{str(k): str(v) for k, v in headers.items()}}
    timeout = float(spec.get("timeout_ms", DEFAULT_TIMEOUT_MS)) / 1000.0
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), _AllowlistRedirects(allowed))
    req = urllib.request.Request(url, data=data, headers=headers, method=method)
    try:
        with opener.open(req, timeout=timeout) as resp:
            body = resp.read(MAX_RESPONSE_BYTES + 1)
    except urllib.error.HTTPError as exc:
        if exc.code >= 500 or exc.code == 429:
            raise Retryable(f"HTTP_{exc.code}: {method} {url}") from exc
        raise HttpRefused(f"HTTP_{exc.code}: {method} {url}") from exc
    except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
        raise Retryable(f"HTTP_UNREACHABLE: {method} {url}: {getattr(exc, 'reason', exc)}") from exc
    if len(body) > MAX_RESPONSE_BYTES:
        raise HttpRefused(f"HTTP_RESPONSE_TOO_LARGE: more than {MAX_RESPONSE_BYTES} bytes")
    try:
        return json.loads(body.decode("utf-8")) if body else None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise HttpRefused("HTTP_RESPONSE_NOT_JSON: the response body is not JSON") from exc


@handler("http", version="1")
def http(input: Any) -> Any:
    return request(input)
