"""The one error vocabulary: SQL errno -> stable code -> Python exception -> HTTP status.

Routines raise ``SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = <errno>, MESSAGE_TEXT = '<CODE>: detail'``.
``translate`` is the only place that turns a driver error into a domain exception; a test checks that
every errno used in ``procedures/*.sql`` is listed here with the code its message starts with.
"""

from __future__ import annotations

import pymysql

# code -> (errno, HTTP status). VALIDATION_FAILED's sub-codes travel as their own errno so that SQL
# clients can match on them; HTTP reports them as 422 VALIDATION_FAILED with errors[].code.
ERRORS: dict[str, tuple[int, int]] = {
    "UNAUTHENTICATED": (50001, 401),
    "FORBIDDEN": (50002, 403),
    "NOT_FOUND": (50003, 404),
    "IDEMPOTENCY_CONFLICT": (50005, 409),
    "SIGNAL_LIMIT_REACHED": (50006, 409),
    "INVALID_STATE": (50007, 409),
    "TASK_IN_FLIGHT": (50008, 409),
    "TEST_CLOCK_DISABLED": (50010, 409),
    "NOT_IN_TRANSACTION": (50011, 409),
    "ATTEMPT_NOT_CURRENT": (50012, 409),
    "IN_TRANSACTION": (50013, 409),
    "HISTORY_CHANGED": (50015, 409),
    "CLOCK_FIXED": (50017, 409),
}

# Validation sub-codes (HTTP 422 VALIDATION_FAILED, errors[].code = the sub-code).
VALIDATION_CODES: dict[str, int] = {
    "INVALID_ARGUMENT": 50100,
    "NAME_TOO_LONG": 50101,
    "PAYLOAD_VERSION_INVALID": 50102,
    "TARGET_STEP_INVALID": 50103,
    "ACTIVATION_SEQUENCE_INVALID": 50104,
    "CORRELATION_KEY_TOO_LONG": 50105,
    "CORRELATION_KEY_MISSING": 50106,
    "PAYLOAD_TOO_LARGE": 50107,
    "PAYLOAD_MISSING": 50108,
    "PAYLOAD_INVALID": 50109,
    "PAYLOAD_TYPE_MISMATCH": 50110,
    "REASON_INVALID": 50111,
    "EVIDENCE_REF_INVALID": 50112,
    "IDEMPOTENCY_KEY_INVALID": 50113,
    "CONTRACT_MISMATCH": 50114,
    "FUTURE_ACTIVATION": 50115,
    "NAME_INVALID": 50116,
    "INPUT_INVALID": 50117,
    "DEADLINE_INVALID": 50118,
    "DEFINITION_INVALID": 50119,
    "SCOPES_INVALID": 50120,
    "LIMIT_INVALID": 50121,
    "APP_NOT_FOUND": 50122,
    "DEFINITION_NOT_FOUND": 50123,
    "QUEUE_NOT_FOUND": 50124,
    "UNKNOWN_FIELD": 50125,
    "CORRELATION_KEY_INVALID": 50130,
    # Pulse (workers and tasks).
    "LEASE_INVALID": 50200,
    "WORKER_ID_INVALID": 50201,
    "QUEUES_INVALID": 50202,
    "RESULT_INVALID": 50203,
}


class WeaveError(Exception):
    """Base of every error the engine reports with a stable code."""

    code = "INTERNAL"
    errno = 0
    http_status = 500

    def __init__(self, message: str = "", *, detail: str | None = None):
        super().__init__(message or self.code)
        self.detail = detail if detail is not None else _detail_of(message)


class ValidationFailed(WeaveError):
    """422: one field broke a rule; ``field_code`` says which (e.g. ``NAME_TOO_LONG``)."""

    code = "VALIDATION_FAILED"
    http_status = 422

    def __init__(self, message: str = "", *, field_code: str = "INVALID_ARGUMENT", field: str | None = None,
                 errors: list[dict] | None = None):
        super().__init__(message)
        self.field_code = field_code
        self.field = field
        self.errors = errors if errors is not None else [
            {"field": field, "code": field_code, "message": self.detail}]


class TransientDatabaseError(WeaveError):
    """Deadlock, lock wait timeout or lost connection: safe to retry with backoff (R-12)."""

    code = "UNAVAILABLE"
    http_status = 503


class ConnectionOutOfStep(TransientDatabaseError):
    """A connection whose replies no longer lined up with its statements, closed: a fresh connection serves, and a
    call safe to repeat may be repeated on one (its first run's outcome is unknown, as a lost connection's is)."""


class SchemaMismatch(WeaveError):
    """The database is not at the level and routine digests this code ships (R-16)."""

    code = "SCHEMA_MISMATCH"
    http_status = 503


def _detail_of(message: str) -> str:
    head, sep, tail = message.partition(": ")
    return tail if sep and head.isupper() else message


def _class_name(code: str) -> str:
    return "".join(part.capitalize() for part in code.split("_"))


# One exception class per stable code, e.g. errors.IdempotencyConflict, errors.NotFound.
BY_CODE: dict[str, type[WeaveError]] = {"VALIDATION_FAILED": ValidationFailed}
BY_ERRNO: dict[int, type[WeaveError]] = {}
for _code, (_errno, _status) in ERRORS.items():
    _cls = type(_class_name(_code), (WeaveError,), {"code": _code, "errno": _errno, "http_status": _status})
    globals()[_cls.__name__] = _cls
    BY_CODE[_code] = _cls
    BY_ERRNO[_errno] = _cls
VALIDATION_BY_ERRNO = {errno: code for code, errno in VALIDATION_CODES.items()}
# The one request field each of these engine refusals is about, whichever call raised it (the name of the field over
# HTTP, of the parameter over SQL): an answer names it, as it names the fields the API checks itself. Codes that may
# be about one of several fields (INPUT_INVALID, DEADLINE_INVALID, CONTRACT_MISMATCH, …) name none.
FIELD_OF_CODE: dict[str, str] = {
    "NAME_TOO_LONG": "name", "PAYLOAD_VERSION_INVALID": "payload_version", "TARGET_STEP_INVALID": "target_step_key",
    "ACTIVATION_SEQUENCE_INVALID": "target_activation_sequence", "FUTURE_ACTIVATION": "target_activation_sequence",
    "CORRELATION_KEY_TOO_LONG": "correlation_key", "CORRELATION_KEY_MISSING": "correlation_key",
    "CORRELATION_KEY_INVALID": "correlation_key", "PAYLOAD_TOO_LARGE": "payload", "PAYLOAD_MISSING": "payload",
    "PAYLOAD_INVALID": "payload", "PAYLOAD_TYPE_MISMATCH": "payload", "REASON_INVALID": "reason",
    "EVIDENCE_REF_INVALID": "evidence_ref", "SCOPES_INVALID": "scopes", "APP_NOT_FOUND": "app",
    "DEFINITION_NOT_FOUND": "definition", "IDEMPOTENCY_KEY_INVALID": "Idempotency-Key",
}
# A refusal whose code may be about one of several fields names the one it is about first ("INPUT_INVALID:
# business_key must be ..."): these are the request fields such a message may begin with.
FIELDS_NAMED_FIRST = frozenset({"input", "output", "business_key", "deadline_ms", "deadline_at", "expires_at",
                                "extend_ms", "poll_deadline_ms", "extra_rounds", "timeout_ms", "actor", "name",
                                "namespace", "queues", "limit"})

Unauthenticated = BY_CODE["UNAUTHENTICATED"]
Forbidden = BY_CODE["FORBIDDEN"]
NotFound = BY_CODE["NOT_FOUND"]
IdempotencyConflict = BY_CODE["IDEMPOTENCY_CONFLICT"]
SignalLimitReached = BY_CODE["SIGNAL_LIMIT_REACHED"]
InvalidState = BY_CODE["INVALID_STATE"]
TaskInFlight = BY_CODE["TASK_IN_FLIGHT"]
TestClockDisabled = BY_CODE["TEST_CLOCK_DISABLED"]
NotInTransaction = BY_CODE["NOT_IN_TRANSACTION"]
InTransaction = BY_CODE["IN_TRANSACTION"]
AttemptNotCurrent = BY_CODE["ATTEMPT_NOT_CURRENT"]
HistoryChanged = BY_CODE["HISTORY_CHANGED"]

# MySQL/MariaDB client and server errors that mean "try again": deadlock, lock wait timeout,
# server gone away, lost connection, server shutdown, a query interrupted (KILL QUERY, or a statement time limit of
# the session: an interrupted routine's own transaction that no handler of it ended is rolled back by
# procedures.db.call, for a call made in autocommit mode with nothing open). On a Galera cluster a
# certification conflict or a brute-force abort also arrives as 1213; a node that is not ready (joining,
# donor, out of the primary component) refuses statements with 1047 "WSREP has not yet prepared node for
# application use"; a commit cut off by a view change reports 1180. A server that takes no more connections
# (1040, or 1203 and 1226 for a user's limits) has one free again as others close, and a node fenced read-only for a
# failover (1290) is left for the new primary: a daemon or a request waits, backing off, instead of stopping.
# A server that offers no TLS to a connection that requires it (2026) may be restarted with it, or be an impostor
# between: the connection is refused, and tried again later, as one to a server that does not answer.
# A server whose disk is full answers 1114 (an InnoDB file that cannot grow: "the table is full") or 1021 (a file of
# its own, such as a temporary one): the same decision goes through once someone makes room, so it waits, backing
# off, and never counts as the failure that sends a candidate to review.
# None of them committed anything, but for a lost connection or an interrupt that came after the routine's own
# commit, while it answered: a call with an idempotency key made again answers its first outcome.
# Engine refusals that mean "try the whole decision again": another decision took the last task slot of an
# app or queue between this one's check and its guarded update. Retried like a deadlock, and never counted as
# the repeated failure that sends a candidate to review.
# INTERRUPTED: a read the decision cannot do without came back empty, as a KILL QUERY that the server gave no error
# for leaves it (MariaDB gives a subquery of a select list no value when a kill lands in it, and forgets the kill):
# the decision is undone, as for the server's own interrupt (1317).
TRANSIENT_CODES: dict[str, int] = {"ROOM_TAKEN": 50014, "INTERRUPTED": 50016}
# 1665 and 1792 are a server set to refuse the engine's writes for now, as read_only (1290) is: one that logs
# statements (binlog_format = STATEMENT refuses a READ COMMITTED transaction's writes), or whose init_connect makes
# every transaction read-only. Each is a setting a person changes; until then a decision is tried again later, and
# never booked as the candidate's own failure (every due timer went to review within a second).
TRANSIENT_ERRNOS = frozenset({1213, 1205, 2006, 2013, 2003, 2055, 1053, 1317, 1969, 1927, 4031, 1047, 1180,
                              1040, 1203, 1226, 1290, 1665, 1792, 2026, 1021, 1114, *TRANSIENT_CODES.values()})


# Server refusals of a value itself (out of range, too long, not a valid date or number) under the strict
# sql_mode every connection pins: bad input, answered 422 rather than 500.
BAD_VALUE_ERRNOS = frozenset({1264, 1292, 1366, 1406, 1690, 3140, 4038})


def errno_of(exc: BaseException) -> int:
    """The error number of a driver error; PyMySQL reads it as signed 16-bit (50001 -> -15535)."""
    args = getattr(exc, "args", ())
    if args and isinstance(args[0], int):
        return args[0] & 0xFFFF
    return 0


def translate(exc: BaseException) -> BaseException:
    """Turn a driver error into the domain exception it stands for (or return it unchanged)."""
    if isinstance(exc, WeaveError):
        return exc
    if not isinstance(exc, pymysql.err.MySQLError):
        return exc
    errno = errno_of(exc)
    message = exc.args[1] if len(exc.args) > 1 else str(exc)
    if errno in BY_ERRNO:
        return BY_ERRNO[errno](message)
    if errno in VALIDATION_BY_ERRNO:
        code = VALIDATION_BY_ERRNO[errno]
        first = _detail_of(message).split(" ", 1)[0]
        return ValidationFailed(message, field_code=code,
                                field=FIELD_OF_CODE.get(code, first if first in FIELDS_NAMED_FIRST else None))
    if errno in BAD_VALUE_ERRNOS:
        return ValidationFailed(f"INVALID_ARGUMENT: {message}", field_code="INVALID_ARGUMENT")
    if errno in SCHEMA_GONE_ERRNOS:
        mismatch = SchemaMismatch(
            f"SCHEMA_MISMATCH: {message}: `weave migrate` creates it, or set WEAVE_DSN (or --dsn) to the database you "
            "meant" if errno == 1049 else
            f"SCHEMA_MISMATCH: a table, column or routine of the engine's is missing or not this build's ({errno}: "
            f"{message}): a `weave migrate` may be running (retry shortly), the database may be at another level "
            "(`weave status` says which), or this node may point at a database that is not the engine's")
        mismatch.__cause__ = exc  # the server's refusal, also where the caller raises this without `from`
        return mismatch
    if errno in TRANSIENT_ERRNOS or isinstance(exc, pymysql.err.InterfaceError):
        transient = TransientDatabaseError(f"{errno}: {message}")
        transient.errno = errno  # the server's or the driver's number, for whoever must tell a lock wait from a loss
        return transient
    return exc


# The database a node was started against is gone from under it, or holds none of the engine's tables or routines
# (dropped, restored empty, a failover to a node never migrated): its level is not this build's, which every
# edge answers as unavailable (503), never as an error of its own.
# So is a column or a routine's parameters that differ from this build's (1054, 1318): a migrate part-way, a routine
# being installed again, or a node of another build.
SCHEMA_GONE_ERRNOS = frozenset({1049, 1054, 1146, 1305, 1318})


# Client errors that mean the server did not answer at all: it cannot be reached, or it went silent.
CONNECTION_ERRNOS = frozenset({2003, 2006, 2013, 2055})


# The server refused the process's own login: its user or password changed (a credential rotated in place, a user
# dropped or its grant taken back) while the process kept the old ones. Nothing ran, and it lasts until the login is
# given back or the process restarted with the new one: the API answers it "unavailable" (503, and not ready), as it
# answers a server it cannot reach, never as an error of its own (500). So is a privilege the user needs taken back
# (EXECUTE on the routines: 1370; SELECT on a table: 1142): every request met it alike, answered 500.
PRIVILEGE_REFUSED_ERRNOS = frozenset({1142, 1370})
LOGIN_REFUSED_ERRNOS = frozenset({1044, 1045, 1698, *PRIVILEGE_REFUSED_ERRNOS})


# The server's interrupts of a statement (KILL QUERY, max_statement_time).
INTERRUPTED_ERRNOS = frozenset({1317, 1969})


def server_errno(exc: BaseException) -> int:
    """The server's (or the driver's) error number behind ``exc``: a transient error's cause, or ``exc`` itself."""
    return errno_of(exc.__cause__ if isinstance(exc, TransientDatabaseError) and exc.__cause__ else exc)


def answer_may_be_lost(exc: BaseException) -> bool:
    """The call may have committed without its answer reaching the caller: its connection was lost, or the server
    interrupted it (KILL QUERY, max_statement_time), which can come after the routine's commit, while it answers."""
    return is_connection_lost(exc) or server_errno(exc) in INTERRUPTED_ERRNOS


def is_connection_lost(exc: BaseException) -> bool:
    """The server is unreachable or did not answer in time (not a deadlock or a lock wait: those answer)."""
    cause = exc.__cause__ if isinstance(exc, TransientDatabaseError) else exc
    return isinstance(cause, pymysql.err.InterfaceError) or (
        isinstance(cause, pymysql.err.MySQLError) and errno_of(cause) in CONNECTION_ERRNOS)


# A server that refuses every write alike, whatever the decision: fenced read-only for a failover (1290), or a Galera
# node that is not ready (1047). Another decision sent to it now would be refused the same way.
REFUSING_ERRNOS = frozenset({1047, 1290})


# A server whose settings refuse the engine's writes (1665: it logs statements; 1792: its sessions' transactions are
# read-only): every decision is refused alike until a person changes the setting, on this node as on any other.
SETTING_REFUSED_ERRNOS = frozenset({1665, 1792})


def refused_by_settings(exc: BaseException) -> bool:
    """The server's settings refuse every write alike (``SETTING_REFUSED_ERRNOS``)."""
    return server_errno(exc) in SETTING_REFUSED_ERRNOS


def refuses_writes(exc: BaseException) -> bool:
    """The server answered that it takes no writes now (``REFUSING_ERRNOS``)."""
    return server_errno(exc) in REFUSING_ERRNOS


def is_schema_mismatch(exc: BaseException) -> bool:
    """The database is not at this build's level now (R-16): a table, column or routine missing or different."""
    return isinstance(exc, SchemaMismatch) or (
        isinstance(exc, pymysql.err.MySQLError) and isinstance(translate(exc), SchemaMismatch))


def is_transient(exc: BaseException) -> bool:
    return isinstance(exc, TransientDatabaseError) or (
        isinstance(exc, pymysql.err.MySQLError) and isinstance(translate(exc), TransientDatabaseError))


def is_unavailable(exc: BaseException) -> bool:
    """The database cannot serve this process now: a transient error, or its own login refused
    (``LOGIN_REFUSED_ERRNOS``). An edge answers either as unavailable (503), never as an error of its own."""
    return is_transient(exc) or (isinstance(exc, pymysql.err.MySQLError) and errno_of(exc) in LOGIN_REFUSED_ERRNOS)


# --- the HTTP edge ------------------------------------------------------------------------------------------
# Codes the HTTP API answers itself, without a routine raising them: code -> HTTP status.
EDGE_ERRORS: dict[str, int] = {
    "BAD_REQUEST": 400,
    "URI_TOO_LONG": 414,
    "HEADERS_TOO_LARGE": 431,
    "VALIDATION_FAILED": 422,
    "PAYLOAD_TOO_LARGE": 413,
    "UNSUPPORTED_MEDIA_TYPE": 415,
    "METHOD_NOT_ALLOWED": 405,
    "UNAVAILABLE": 503,
    "INTERNAL": 500,
}
# errors[].code values of a 422 that the edge finds before any routine runs (besides the engine's own codes,
# e.g. UNKNOWN_FIELD, which the edge reports for a request body as the routines do for a definition).
EDGE_FIELD_CODES: dict[str, str] = {
    "INVALID_JSON": "the body is not one JSON document (syntax, encoding, NaN or Infinity), or holds a fraction or "
                    "exponent past a double's range (1e400) or an integer of more than 4,300 digits",
    "DUPLICATE_JSON_KEY": "an object names one key twice (MariaDB would read the first, Python the last)",
    "INVALID_TEXT": "a string holds a lone surrogate escape such as \\ud800, which no column can store as text",
    "INVALID_TYPE": "a field has the wrong JSON type, or the body is not an object",
    "MISSING_FIELD": "a required field is missing",
    "INVALID_VALUE": "a value outside the field's enum or range; for each of these three, a field the engine checks "
                     "under a code of its own (`status`: `INVALID_ARGUMENT`, `business_key`: `INPUT_INVALID`, ...) "
                     "reports that code instead, as a SQL client would get it",
    "CURSOR_INVALID": "a list's `cursor` is not one that list answered",
}
# Codes only SQL clients and the daemons meet: no HTTP endpoint answers them.
SQL_ONLY = frozenset({"TEST_CLOCK_DISABLED", "NOT_IN_TRANSACTION", "IN_TRANSACTION", "ATTEMPT_NOT_CURRENT",
                      "HISTORY_CHANGED", "CLOCK_FIXED"})


def http_codes() -> dict[str, int]:
    """Every top-level code the HTTP API can answer, with its status."""
    codes = {code: status for code, (_, status) in ERRORS.items() if code not in SQL_ONLY}
    codes.update(EDGE_ERRORS)
    return codes
