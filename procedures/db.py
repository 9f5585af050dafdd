"""Connections and routine calls. Python never builds SQL here beyond ``CALL name(%s, ...)``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypeAlias
from urllib.parse import parse_qs, unquote, urlparse

import pymysql
import pymysql.cursors

from . import errors, settings

# One sql_mode for installing routines and for calling them: routine parameters follow the caller's
# mode, and a lax mode would silently truncate a too-long argument. Both MariaDB and MySQL 8 accept it.
SQL_MODE = "STRICT_ALL_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION"
DEFAULT_DSN = settings.DEFAULT_DSN
# Every connection reads rows as dicts.
Connection: TypeAlias = "pymysql.connections.Connection[pymysql.cursors.DictCursor]"


@dataclass(frozen=True)
class Dsn:
    """A parsed ``mysql://user:password@host:port/database[?unix_socket=/path]`` URL."""

    host: str = "127.0.0.1"
    port: int = 3306
    user: str = "root"
    password: str = ""
    database: str = "weave"
    unix_socket: str | None = None
    options: dict[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, url: str) -> Dsn:
        parsed = urlparse(url)
        if parsed.scheme not in ("mysql", "mariadb", "mysql+pymysql"):
            raise ValueError(f"WEAVE_DSN must be a mysql:// URL, got {url!r}")
        query = {k: v[-1] for k, v in parse_qs(parsed.query).items()}
        socket = query.pop("unix_socket", None)
        return cls(host=parsed.hostname or "127.0.0.1", port=parsed.port or 3306,
                   user=unquote(parsed.username or "root"), password=unquote(parsed.password or ""),
                   database=(parsed.path or "/weave").lstrip("/") or "weave", unix_socket=socket,
                   options=query)

    def with_database(self, database: str) -> Dsn:
        return Dsn(self.host, self.port, self.user, self.password, database, self.unix_socket, self.options)

    def url(self) -> str:
        auth = self.user + (f":{self.password}" if self.password else "")
        url = f"mysql://{auth}@{self.host}:{self.port}/{self.database}"
        return url + (f"?unix_socket={self.unix_socket}" if self.unix_socket else "")

    def redacted(self) -> str:
        return self.url().replace(f":{self.password}@", ":***@") if self.password else self.url()


def dsn_from_env(explicit: str | None = None) -> Dsn:
    return Dsn.parse(settings.dsn(explicit))


def connect(dsn: Dsn | str, *, database: bool = True, autocommit: bool = True,
            timeouts: tuple[float, float, float] | None = None) -> Connection:
    """A connection for routine calls: autocommit on, so each routine owns its own transaction.
    ``timeouts`` (connect, read, write) in seconds default to the settings' (``WEAVE_DB_*_TIMEOUT_S``)."""
    if isinstance(dsn, str):
        dsn = Dsn.parse(dsn)
    connect_timeout, read_timeout, write_timeout = timeouts or settings.db_timeouts()
    try:
        return pymysql.connect(
            host=dsn.host, port=dsn.port, user=dsn.user, password=dsn.password,
            database=dsn.database if database else None, unix_socket=dsn.unix_socket,
            charset="utf8mb4", autocommit=autocommit, cursorclass=pymysql.cursors.DictCursor,
            connect_timeout=connect_timeout, read_timeout=read_timeout, write_timeout=write_timeout,
            init_command=f"SET SESSION sql_mode='{SQL_MODE}', time_zone='+00:00'",
        )
    except pymysql.err.MySQLError as exc:
        raise errors.translate(exc) from exc


def call(conn: Connection, routine: str, *args: Any) -> list[list[dict]]:
    """CALL a routine and return every result set it produced.

    All sets are drained: a routine that fails after its first result set raises only while the
    remaining sets are read, and an undrained cursor would raise on the next statement instead.
    """
    placeholders = ", ".join(["%s"] * len(args))
    try:
        with conn.cursor() as cur:
            cur.execute(f"CALL {routine}({placeholders})", args)
            sets: list[list[dict]] = []
            while True:
                if cur.description is not None:
                    sets.append(list(cur.fetchall()))
                if not cur.nextset():
                    break
            return sets
    except pymysql.err.MySQLError as exc:
        raise errors.translate(exc) from exc


def call_one(conn: Connection, routine: str, *args: Any) -> dict | None:
    """CALL a routine that answers with (at most) one row in its first result set."""
    sets = call(conn, routine, *args)
    return sets[0][0] if sets and sets[0] else None


def call_row(conn: Connection, routine: str, *args: Any) -> dict:
    """CALL a routine that always answers one row (it raises otherwise): that row."""
    row = call_one(conn, routine, *args)
    if row is None:
        raise errors.WeaveError(f"INTERNAL: {routine} answered no row")
    return row
