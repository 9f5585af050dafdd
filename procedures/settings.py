"""Configuration from the environment, read in this one place. Flags given on the command line win;
each value is read when it is asked for, so a process (or a test) that changes its environment sees it.

| variable | meaning | default |
| --- | --- | --- |
| `WEAVE_DSN` | the database URL, `mysql://user:password@host:port/db` | `mysql://root@127.0.0.1:3306/weave` |
| `WEAVE_TOKEN` | the bearer token the CLI acts with | none |
| `WEAVE_NAMESPACE` | the namespace the CLI acts in | `default` |
| `WEAVE_LOG_LEVEL` | the level of the JSON logs on stderr | `INFO` (`WARNING` under `weave dev`) |
| `WEAVE_HTTP_ALLOWLIST` | hosts the built-in http handler may call: comma list of host or host:port | none |
| `WEAVE_API_DB_TIMEOUT_S` | the API's connect/read/write timeout: a hung database answers 503 | 0.8 |
| `WEAVE_CONSOLE_SESSION_TTL_S` | how long a console session lasts, in whole seconds (60 to 604800) | 28800 |
| `WEAVE_API_CLIENT_TIMEOUT_S` | how long the API waits on a client for each read and write of a request | 10 |
| `WEAVE_API_REQUEST_READ_TIMEOUT_S` | how long a client has to send a whole request, from its first byte | 30 |
"""

from __future__ import annotations

import ipaddress
import math
import os
import re

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
DEFAULT_DSN = "mysql://root@127.0.0.1:3306/weave"
DEFAULT_NAMESPACE = "default"
ALLOWLIST_ENV = "WEAVE_HTTP_ALLOWLIST"


class SettingInvalid(ValueError):
    """A variable of the environment holds a value the engine cannot run with; the message names it."""


def _get(name: str) -> str | None:
    value = os.environ.get(name)
    return value if value else None


# The longest timeout the database driver takes (a year): a longer one fails every connect.
TIMEOUT_MAX_S = 31_536_000


def timeout_valid(seconds: float) -> bool:
    """A timeout a connection can take: above 0 (0 would make every call fail at once), at most TIMEOUT_MAX_S."""
    return math.isfinite(seconds) and 0 < seconds <= TIMEOUT_MAX_S


def _seconds(name: str, default: float) -> float:
    """A timeout: a number of seconds above 0 and at most TIMEOUT_MAX_S."""
    value = _get(name)
    if value is None:
        return default
    try:
        seconds = float(value)
    except ValueError:
        seconds = math.nan
    if not timeout_valid(seconds):
        raise SettingInvalid(f"{name} must be a number of seconds above 0 and at most {TIMEOUT_MAX_S}, got {value!r}")
    return seconds


def dsn(explicit: str | None = None) -> str:
    return explicit or _get("WEAVE_DSN") or DEFAULT_DSN


def dsn_given() -> str | None:
    """WEAVE_DSN when it is set (``weave dev`` starts a private server otherwise)."""
    return _get("WEAVE_DSN")


def token() -> str | None:
    return _get("WEAVE_TOKEN")


def namespace() -> str:
    return _get("WEAVE_NAMESPACE") or DEFAULT_NAMESPACE


def log_level(default: str = "INFO") -> str:
    level = (_get("WEAVE_LOG_LEVEL") or default).upper()
    if level not in LOG_LEVELS:
        raise SettingInvalid(f"WEAVE_LOG_LEVEL must be one of {', '.join(LOG_LEVELS)}, got {level.lower()!r}")
    return level


_HOST = re.compile(r"[a-z0-9_]([a-z0-9_.-]*[a-z0-9_])?\.?")  # a name or an IPv4 address, in lower case
_PORT = re.compile(r"[0-9]{1,5}")


def http_allowlist() -> set[str]:
    """The hosts the built-in http handler may call, as it compares them (``allowlist_host``): ``host`` or
    ``host:port``, lower case, an IPv6 address in brackets. An entry that names no host (a URL, a path, a bad port)
    would never match and is refused, naming the variable."""
    raw = _get(ALLOWLIST_ENV) or ""
    return {_allowlist_entry(entry.strip()) for entry in raw.split(",") if entry.strip()}


def _allowlist_entry(entry: str) -> str:
    text = entry.lower()
    if text.startswith("["):
        host, close, rest = text[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else None
        valid = bool(close) and _ipv6(host) and (rest == "" or port is not None)
    elif text.count(":") > 1:  # an IPv6 address without a port
        host, port, valid = text, None, _ipv6(text)
    else:
        host, colon, port_text = text.partition(":")
        port = port_text if colon else None
        valid = _HOST.fullmatch(host) is not None
    if valid and port is not None:
        valid = _PORT.fullmatch(port) is not None and 1 <= int(port) <= 65535
    if not valid:
        raise SettingInvalid(f"{ALLOWLIST_ENV} must be a comma list of host or host:port ([v6:address]:port), got "
                             f"{entry!r}")
    host = allowlist_host(host)
    return host if port is None else f"{host}:{port}"


def allowlist_host(host: str) -> str:
    """A host as the allowlist holds it: a name in lower case, an IPv6 address in brackets and in its one short
    form. Without the brackets ``[fd00::5]:8443`` would read as the address fd00::5:8443, another host, on any
    port; without the one form, ``0:0::1`` would not be ``::1``."""
    try:
        return f"[{ipaddress.IPv6Address(host).compressed}]"
    except ValueError:
        return host.lower()


def _ipv6(text: str) -> bool:
    try:
        ipaddress.IPv6Address(text)
    except ValueError:
        return False
    return True


def search_path() -> str:
    """Where server binaries are looked for: PATH, then the usual system folders."""
    return (os.environ.get("PATH", "") + os.pathsep + os.pathsep.join(
        ["/usr/sbin", "/usr/local/sbin", "/usr/local/mysql/bin", "/opt/homebrew/bin", "/usr/local/bin"]))


def api_db_timeout() -> float:
    """The API's connect/read/write timeout: short, so a hung database answers 503 instead of hanging. A DSN's
    own ``connect_timeout``/``read_timeout``/``write_timeout`` options win over it."""
    return _seconds("WEAVE_API_DB_TIMEOUT_S", 0.8)


def api_client_timeout() -> float:
    """How long the API waits on a client for each read of its request (line, headers, body) and each write of its
    answer: a client that sends nothing more, or reads nothing, for that long is dropped, so that a few connections
    left half-sent cannot hold every serving thread of the API."""
    return _seconds("WEAVE_API_CLIENT_TIMEOUT_S", 10.0)


def api_request_read_timeout() -> float:
    """How long the API gives a client to send the whole of a request (its line, headers and body), counted from
    when the request's first byte has arrived: a client that keeps sending a byte now and then, each within the
    client timeout, is dropped once this has passed, so that it cannot hold a serving thread for as long as it
    likes."""
    return _seconds("WEAVE_API_REQUEST_READ_TIMEOUT_S", 30.0)


CONSOLE_SESSION_TTL_S = (60, 604800, 8 * 3600)  # least, most, default


def console_session_ttl() -> int:
    """How long a console session lasts on the engine clock, in whole seconds: eight hours unless set."""
    least, most, default = CONSOLE_SESSION_TTL_S
    value = _get("WEAVE_CONSOLE_SESSION_TTL_S")
    if value is None:
        return default
    if not (value.isascii() and value.isdigit() and least <= int(value) <= most):
        raise SettingInvalid(f"WEAVE_CONSOLE_SESSION_TTL_S must be a whole number of seconds from {least} to "
                             f"{most}, got {value!r}")
    return int(value)
