"""Console sessions: the browser holds only an opaque random id; the database holds the token sealed.

The cookie carries a 256-bit random session id. The session row is found by the id's SHA-256 and holds
the bearer token sealed with AES-GCM under a key derived from the same id, so neither a copy of the table
nor a log of cookie hashes yields a token. The CSRF token of a session is derived from its id too: a page
of the console can show it, a page elsewhere cannot compute it.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import secrets
from dataclasses import dataclass

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from procedures import settings

COOKIE = "weave_console"
SIGNIN_COOKIE = "weave_console_signin"


def ttl_seconds() -> int:
    """Session lifetime: ``WEAVE_CONSOLE_SESSION_TTL_S`` (see procedures/settings.py)."""
    return settings.console_session_ttl()


def lifetime_s(opened: dict) -> int:
    """The seconds a session just opened lives, as its cookie's Max-Age: the configured lifetime, or less when its
    credential expires first (the session ends with it)."""
    return max(1, math.ceil((opened["expires_at"] - opened["now_at"]).total_seconds()))


def new_session_id() -> str:
    return secrets.token_urlsafe(32)


def session_hash(session_id: str) -> str:
    return hashlib.sha256(session_id.encode("ascii")).hexdigest()


def _derive(session_id: str, purpose: bytes) -> bytes:
    return hmac.new(session_id.encode("ascii"), b"weave console " + purpose, hashlib.sha256).digest()


def seal(session_id: str, token: str) -> bytes:
    nonce = secrets.token_bytes(12)
    aad = session_hash(session_id).encode("ascii")
    return nonce + AESGCM(_derive(session_id, b"token seal")).encrypt(nonce, token.encode("utf-8"), aad)


def unseal(session_id: str, sealed: bytes) -> str:
    aad = session_hash(session_id).encode("ascii")
    return AESGCM(_derive(session_id, b"token seal")).decrypt(sealed[:12], sealed[12:], aad).decode("utf-8")


def csrf_token(session_id: str) -> str:
    return _derive(session_id, b"csrf").hex()


def csrf_ok(expected: str, given: str | None) -> bool:
    return bool(given) and hmac.compare_digest(expected.encode(), given.encode("utf-8", "replace"))


def plausible_id(value: str | None) -> bool:
    """A cookie value that could be one of ours (43 URL-safe characters); anything else is not looked up. ASCII
    only: ``str.isalnum`` also accepts letters such as 'é', which a browser may send and the hash cannot take."""
    return bool(value) and len(value) == 43 and value.isascii() and all(c.isalnum() or c in "-_" for c in value)


@dataclass(frozen=True)
class Session:
    session_id: str
    namespace: str
    actor: str
    scopes: tuple[str, ...]
    token: str
    expires_at: object
    now_at: object

    @property
    def csrf(self) -> str:
        return csrf_token(self.session_id)

    def can(self, scope: str) -> bool:
        return scope in self.scopes
