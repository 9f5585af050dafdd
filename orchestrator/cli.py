"""The ``weave`` command line. Every command reads WEAVE_DSN (a mysql:// URL) unless given --dsn;
commands that act for someone read WEAVE_TOKEN and WEAVE_NAMESPACE unless given --token/--namespace.

The CLI sits on top: it may import every package, and none imports it. With ``--json`` a command prints
its result as JSON on stdout and an error as ``{"code", "detail"}`` on stderr; either way the exit code
says the class of the error (``EXIT_CODES``)."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

import pymysql

from api import client
from procedures import db, errors, installer, jsontext, routines, settings
from procedures.retrying import read_until
from procedures.reviews import REVIEW_HELP

EXIT_FAILED = 1
EXIT_USAGE = 2
# HTTP status of an error's code -> exit code: scripts can tell "fix the request" from "retry later".
EXIT_CODES = {401: 3, 403: 3, 404: 4, 409: 5, 413: 6, 415: 6, 422: 6, 503: 7}
EXIT_TIMED_OUT = 8
EXIT_HELP = ("exit codes: 0 done, 1 failed (or invariants broken), 2 usage, 3 not authenticated or not allowed, "
             "4 not found, 5 conflict with the current state, 6 invalid request, 7 database unavailable, 8 timed out "
             "(workflows wait)")


class CliError(Exception):
    """A refusal of the CLI itself, before any routine runs."""

    def __init__(self, code: str, detail: str, exit_code: int = EXIT_USAGE):
        super().__init__(detail)
        self.code, self.detail, self.exit_code = code, detail, exit_code


# What a terminal acts on instead of showing (C0 and C1 controls, DEL). The text a human reads holds values that
# whoever may send a signal, start an instance or act on one chose (a reason, a business key, a payload, an error a
# handler raised): printed as they are, an escape sequence among them would clear the screen, move the cursor up and
# write over the audit rows above, or retitle the terminal. They are printed escaped, as \x1b. So are the marks that
# turn the direction of text (U+202E and its kin): an actor named "ops" + U+202E + "live" reads as another name, and
# turns the rest of its row.
_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escaped(text: str, keep: str = "") -> str:
    """``text`` with every control character but those of ``keep`` written as \\xNN (\\uNNNN past U+00FF)."""
    return _CONTROLS.sub(lambda m: m.group() if m.group() in keep else _escape(ord(m.group())), text)


def _escape(code: int) -> str:
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def _print(args: argparse.Namespace, payload: Any, human: Callable[[Any], str] | None = None) -> None:
    if getattr(args, "json", False):  # the kept values (called ``verbatim``) as they were kept, as the API gives them
        print(jsontext.dumps(payload))
    elif human is None:
        print(json.dumps(payload, indent=2, default=str))
    else:
        print(_escaped(human(payload), keep="\n"))  # the lines of the text; a value's own are escaped (_cell)


def _conn(args: argparse.Namespace, *, check: bool = True) -> db.Connection:
    conn = db.connect(_dsn(args))
    if check:
        installer.check_level(conn)
    return conn


def _token(args: argparse.Namespace) -> str:
    token = args.token or settings.token()
    if not token:
        raise CliError("UNAUTHENTICATED", "a token is needed: pass --token or set WEAVE_TOKEN", 3)
    return token


def _dsn(args: argparse.Namespace) -> db.Dsn:
    return _parsed_dsn(settings.dsn(args.dsn))


def _parsed_dsn(text: str) -> db.Dsn:
    """A DSN, or the usage error (DSN_INVALID) every command answers a malformed one with."""
    try:
        return db.Dsn.parse(text)
    except ValueError as exc:
        raise CliError("DSN_INVALID", str(exc)) from None


def _json_argument(flag: str, field: str, text: str, invalid_code: str) -> Any:
    """The value of a JSON argument, held to the rules of a request body: text the HTTP API refuses (an object
    naming one key twice, which the engine would read as the first value and Python as the last; a lone surrogate;
    a number no reader can hold) is refused here too, at the field, before anything is sent. Text that is no JSON
    at all keeps the code the engine gives the field (``invalid_code``)."""
    try:
        return jsontext.parse_strict(text)
    except jsontext.InvalidJson as exc:
        problems = [{"field": field + ("" if not e.field else e.field if e.field.startswith("[") else f".{e.field}"),
                     "code": invalid_code if e.code == "INVALID_JSON" else e.code, "message": e.message}
                    for e in exc.errors]
        raise errors.ValidationFailed(f"{flag} is not valid JSON: {problems[0]['message']}",
                                      field_code=problems[0]["code"], field=problems[0]["field"],
                                      errors=problems) from None


# --- commands -------------------------------------------------------------------------------------------
def cmd_migrate(args: argparse.Namespace) -> int:
    dsn = _dsn(args)
    if args.plan:
        return _migrate_plan(args, dsn)
    try:
        report = installer.migrate(dsn, test_clock=args.test_clock, progress=(
            lambda m: print(m, file=sys.stderr)) if not args.json else (lambda _: None))
    except KeyboardInterrupt:
        print("interrupted: what was applied is recorded; run `weave migrate` again to resume "
              "(`weave migrate --plan` shows where)", file=sys.stderr)
        return 130
    payload = {"database": report.database, "clock_mode": report.clock_mode, "changed": report.changed,
               "migrations_applied": report.migrations_applied, "routines_installed": report.routines_installed,
               "routines_dropped": report.routines_dropped, "level": installer.shipped_level()}
    _print(args, payload, lambda p: (
        f"database {p['database']} is at level {p['level']} ({p['clock_mode'].lower()} clock); "
        + ("nothing to do" if not p["changed"] else
           f"{len(p['migrations_applied'])} migration(s), {len(p['routines_installed'])} routine(s) installed, "
           f"{len(p['routines_dropped'])} dropped")))
    return 0


def _migrate_plan(args: argparse.Namespace, dsn: db.Dsn) -> int:
    found = installer.plan(dsn)
    payload = {"database": found.database, "exists": found.exists, "changes": found.changes,
               "migrations": found.migrations, "routines_to_install": found.routines_to_install,
               "routines_to_drop": found.routines_to_drop, "level": installer.shipped_level()}

    def human(p: dict) -> str:
        if not p["changes"]:
            return f"database {p['database']} is at level {p['level']}: weave migrate has nothing to do"
        lines = [f"weave migrate would bring database {p['database']} to level {p['level']}:"]
        if not p["exists"]:
            lines.append(f"  create the database {p['database']}")
        lines += [f"  apply migration {m['id']} ({m['statements']} statements"
                  + (f"; resume at statement {m['resumes_at']}, where a migrate stopped)" if m["resumes_at"]
                     else ")") for m in p["migrations"]]
        if p["routines_to_install"]:
            lines.append(f"  install {len(p['routines_to_install'])} routine(s): "
                         + ", ".join(p["routines_to_install"][:12])
                         + (", ..." if len(p["routines_to_install"]) > 12 else ""))
        if p["routines_to_drop"]:
            lines.append(f"  drop {len(p['routines_to_drop'])} routine(s): " + ", ".join(p["routines_to_drop"]))
        return "\n".join(lines)

    _print(args, payload, human)
    return 0


def cmd_bootstrap(args: argparse.Namespace) -> int:
    with _conn(args) as conn:
        row = routines.namespace_bootstrap(conn, args.namespace)
    payload = {"namespace": row["namespace"], "credential_id": row["credential_id"], "token": row["token"]}
    _print(args, payload, lambda p: (
        f"namespace {p['namespace']} is ready.\nadmin credential {p['credential_id']} "
        f"(scopes admin, definitions:publish; no signal rights)\ntoken (shown once): {p['token']}"))
    return 0


def _as_caller(args: argparse.Namespace, act: Callable[[db.Connection, str], dict],
               human: Callable[[Any], str]) -> int:
    """One routine call for the credential of --token in --namespace, its row printed."""
    with _conn(args) as conn:
        row = act(conn, _token(args))
    _print(args, row, human)
    return 0


def _admin_command(routine: Callable[..., dict], fields: tuple[str, ...],
                   human: str) -> Callable[[argparse.Namespace], int]:
    """A command that calls one routine with --namespace and the named arguments, its row printed by ``human``."""
    def run(args: argparse.Namespace) -> int:
        return _as_caller(args, lambda conn, token: routine(conn, token, args.namespace,
                                                            *(getattr(args, f) for f in fields)),
                          lambda p: human.format(**p) + (" (answered again: this key's first answer)"
                                                         if p.get("replayed") else ""))
    return run


def cmd_credentials_create(args: argparse.Namespace) -> int:
    """A credential, its token printed once; with --expires-in, the expiry counts from the engine's clock (R-2), not
    the host's."""
    def create(conn: db.Connection, token: str) -> dict:
        expires = None
        if args.expires_at is not None:
            expires = _utc_time("--expires-at", args.expires_at, "DEADLINE_INVALID")
        elif args.expires_in is not None:
            expires = _shifted(db.call_row(conn, "weave_clock_now")["now_at"], args.expires_in, "--expires-in",
                               "DEADLINE_INVALID")
        return routines.credential_create(conn, token, args.namespace, args.actor, args.scopes, args.queues,
                                          expires_at=expires, idempotency_key=args.idempotency_key)

    return _as_caller(args, create, lambda p: f"credential {p['credential_id']} for {p['actor']}"
                      + (f", expires {p['expires_at']}" if p["expires_at"] else "")
                      + (f"\ntoken (shown once): {p['token']}" if not p["replayed"] else
                         "\nthis key's first create made it; its token was shown then and cannot be shown again: "
                         f"if it was lost, disable {p['credential_id']} and create another with a new key"))

cmd_credentials_disable = _admin_command(routines.credential_disable, ("credential_id",),
                                         "credential {credential_id} is {status}")
cmd_credentials_enable = _admin_command(routines.credential_enable, ("credential_id",),
                                        "credential {credential_id} is {status}")
cmd_apps_create = _admin_command(routines.app_put, ("name", "max_in_flight", "status", "idempotency_key"),
                                 "app {name}: max_in_flight {max_in_flight}, {status}")
cmd_queues_create = _admin_command(routines.queue_put, ("name", "capacity", "idempotency_key"),
                                   "queue {name}: capacity {capacity}")


def cmd_definitions_publish(args: argparse.Namespace) -> int:
    from procedures import definitions

    raw = Path(args.file).read_bytes() if args.file != "-" else sys.stdin.buffer.read()
    # A file saved with a byte order mark (as some Windows editors save UTF-8) is its JSON all the same: RFC 8259
    # lets a reader ignore the mark, and the refusal said only that a value was expected at column 1.
    raw = raw.removeprefix(b"\xef\xbb\xbf")
    try:
        definition = definitions.validate(raw)
    except definitions.DefinitionError as exc:
        if args.json:
            print(json.dumps({"code": "VALIDATION_FAILED", "detail": f"{args.file} is not a valid definition",
                              "errors": [e._asdict() for e in exc.errors]}), file=sys.stderr)
        else:
            print(f"weave: {args.file} is not a valid definition:\n{exc}", file=sys.stderr)
        return EXIT_CODES[422]
    with _conn(args) as conn:
        row = routines.definition_publish(conn, _token(args), args.namespace, definition, args.idempotency_key)
    _print(args, row, lambda p: (f"definition {p['name']} version {p['version']} "
                                 + ("published" if p["created"] else "unchanged (same content as the latest)")
                                 + (" (answered again: this key's first publish)" if p["replayed"] else "")))
    return 0


def cmd_workflows_start(args: argparse.Namespace) -> int:
    import uuid

    input_json = args.input if args.input is not None else "{}"
    _json_argument("--input", "input", input_json, "INPUT_INVALID")
    at = None if args.deadline_at is None else _utc_time("--deadline-at", args.deadline_at, "DEADLINE_INVALID")
    with _conn(args) as conn:
        row = routines.instance_start(
            conn, _token(args), args.namespace, definition=args.definition, version=args.version, app=args.app,
            input_json=input_json, idempotency_key=args.idempotency_key or str(uuid.uuid4()),
            deadline_at=at, deadline_ms=args.deadline_ms, business_key=args.business_key)
    row.pop("instance")  # the command answers what it started; `workflows show` shows the instance
    _print(args, row, lambda p: f"{p['workflow_id']} {p['status']}" + ("" if p["created"] else " (replayed)"))
    return 0


def cmd_workflows_show(args: argparse.Namespace) -> int:
    with _conn(args) as conn:
        inst = routines.instance_get(conn, _token(args), args.namespace, args.workflow_id, verbatim=args.json)
    _print(args, inst, _human_instance)
    return 0


WAIT_UNTIL = ",".join(client.WAIT_UNTIL)  # what the SDK's wait_for waits for by default


def _statuses(text: str) -> frozenset[str]:
    """A comma list of instance statuses."""
    named = frozenset(part.strip() for part in text.split(","))
    if not named <= client.STATUSES:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma list of statuses among "
                                         f"{', '.join(sorted(client.STATUSES))}")
    return named


def cmd_workflows_wait(args: argparse.Namespace) -> int:
    """Read the instance until its status is one of --until, for at most --timeout: the first reads 50 ms apart,
    then slower, up to 2 s apart. Prints the instance as `workflows show` does; out of time, exit code 8."""
    with _conn(args) as conn:
        token = _token(args)
        inst, done = read_until(
            lambda: routines.instance_get(conn, token, args.namespace, args.workflow_id, verbatim=args.json),
            lambda i: i["status"] in args.until, args.timeout.total_seconds(), 2.0, time.sleep, time.monotonic)
    if not done:
        raise CliError("TIMED_OUT", f"{args.workflow_id} is still {inst['status']} after "
                                    f"{args.timeout.total_seconds():g} s", EXIT_TIMED_OUT)
    _print(args, inst, _human_instance)
    return 0


def _human_instance(inst: dict) -> str:
    lines = [f"{inst['workflow_id']}  {_definition_label(inst)}  "
             f"{inst['status']} ({inst['control']}, gate {inst['gate']})  deadline {inst['deadline_at']}"]
    width = max([24, *(len(step["key"]) for step in inst["steps"])])  # a key up to 64 characters keeps its column
    for step in inst["steps"]:
        extra = ""
        if step["wait"]:
            w = step["wait"]
            extra = f"  wait {w['status']} due {w.get('due_at') or w.get('deadline_at')}"
        if step["poll"]:
            p = step["poll"]
            extra += f"  rounds {p['rounds_used']}/{p['max_rounds']}"
            state = p["state"].lower().replace("_", " ")
            # The next round's time only while one will come (a stopped POLL keeps its last planned time).
            extra += f" next {p['next_poll_at']}" if p["next_poll_at"] and p["state"] == "WAITING" else f" ({state})"
        lines.append(f"  {step['key']:<{width}} {step['type']:<7} {step['status']:<13} "
                     f"#{step['activation_sequence']}{extra}")
    if inst.get("deferred"):  # new work waits, and says why: a disabled identity, a full quota, a pause
        d = inst["deferred"]
        lines.append(f"  deferred: {d['reason']}{' (step ' + d['step_key'] + ')' if d['step_key'] else ''} since "
                     f"{d['since']}, {d['attempts']} checks, next {d['next_check_at']}"
                     + (f": {d['detail']}" if d["detail"] else ""))
    for reason in inst["review_reasons"]:
        lines.append(f"  review: {reason['code']} {reason['step_key'] or ''} {json.dumps(reason['detail'])}")
        if reason["code"] in REVIEW_HELP:
            lines.append(f"    what usually helps: {REVIEW_HELP[reason['code']]}")
    return "\n".join(lines)


def cmd_workflows_events(args: argparse.Namespace) -> int:
    with _conn(args) as conn:
        events = routines.instance_events(conn, _token(args), args.namespace, args.workflow_id, args.after, args.limit,
                                          verbatim=args.json)
    if args.json:  # as the API answers a page (each event's data as kept): where the next one starts, for --after
        _print(args, {"events": events, "next_after": events[-1]["seq"] if events else args.after})
        return 0
    _print(args, events, lambda evs: ("\n".join(
        f"{e['seq']:>5} {e['occurred_at']} {e['type']:<22} {e['step_key'] or '-':<20} {json.dumps(e['data'])}"
        for e in evs) or "no events") + (  # a full page: there may be more, read on from its last seq
        f"\nnext page (if any): --after {evs[-1]['seq']}" if len(evs) == args.limit else ""))
    return 0


def cmd_workflows_rounds(args: argparse.Namespace) -> int:
    with _conn(args) as conn:
        page = routines.step_rounds(conn, _token(args), args.namespace, args.workflow_id, args.step_key,
                                    activation_sequence=args.activation, after=args.after, limit=args.limit,
                                    verbatim=args.json)
    if args.json:  # as the API answers a page (each result as kept), with where the next one starts, for --after
        _print(args, page)
        return 0

    def human(page: dict) -> str:
        if page["activation_sequence"] is None:
            return f"{page['step_key']}: never activated, no rounds"
        head = (f"{page['step_key']} #{page['activation_sequence']}  poll {page['poll_state']}  "
                f"rounds {page['rounds_used']}/{page['max_rounds']}")
        rows = [f"{r['number']:>6} {r['task_id']:<14} {r['outcome']:<13} {r['result_at'] or '-':<27} "
                f"{json.dumps(r['result']) if r['result'] is not None else '-'}" for r in page["rounds"]]
        return "\n".join([head, *(rows or [f"  no rounds after {args.after}"])]) + (
            f"\nnext page: --activation {page['activation_sequence']} --after {page['next_after']}"
            if page["more"] else "")

    _print(args, page, human)
    return 0


def cmd_workflows_list(args: argparse.Namespace) -> int:
    return _as_caller(args, lambda conn, token: routines.instance_list(
        conn, token, args.namespace, status=args.status, definition=args.definition, control=args.control,
        business_key=args.business_key, review_code=args.review_code, deferred=args.deferred, limit=args.limit,
        cursor=args.cursor), _instance_lines)


def cmd_workflows_review(args: argparse.Namespace) -> int:
    return _as_caller(args, lambda conn, token: routines.review_queue(conn, token, args.namespace, limit=args.limit),
                      _review_lines)


def _review_lines(queue: dict) -> str:
    """The instances waiting for a person, the one waiting longest first, each with its open reasons; how many are in
    review when more are than shown."""
    rows = [{"workflow_id": i["workflow_id"], "definition": _definition_label(i),
             "waiting_since": i["waiting_since"],
             "reasons": ", ".join(r["code"] + (f" on {r['step_key']} #{r['activation_sequence']}" if r["step_key"]
                                                else "") for r in i["review_reasons"])} for i in queue["items"]]
    text = _table(rows, list(rows[0]) if rows else [], "no instance is in review")
    shown = len(queue["items"])
    return text + (f"\n{queue['in_review']} instances are in review: the {shown} waiting longest are shown (--limit, "
                   "up to 500)" if queue["in_review"] > shown else "")


def _definition_label(instance: dict) -> str:
    """An instance's definition as the listings print it: its name and version."""
    return f"{instance['definition']['name']} v{instance['definition']['version']}"


def _page_lines(page: dict, rows: list[dict], empty: str) -> str:
    """A page as the other listings print theirs (its rows' keys are the columns), with the cursor of the next page
    under it."""
    text = _table(rows, list(rows[0]) if rows else [], empty)
    return text + (f"\nnext page: --cursor {page['next_cursor']}" if page["next_cursor"] else "")


def _instance_lines(page: dict) -> str:
    return _page_lines(page, [{"workflow_id": i["workflow_id"],
                               "definition": _definition_label(i),
                               "status": i["status"], "control": i["control"], "deadline_at": i["deadline_at"]}
                              for i in page["items"]], "no instances")


def cmd_audit(args: argparse.Namespace) -> int:
    return _as_caller(args, lambda conn, token: routines.audit_list(
        conn, token, args.namespace, workflow_id=args.workflow_id, action=args.action, limit=args.limit,
        cursor=args.cursor), _audit_lines)


def _audit_lines(page: dict) -> str:
    return _page_lines(page, [{"created_at": r["created_at"], "actor": r["actor"], "action": r["action"],
                               "workflow_id": r["workflow_id"], "reason": r["reason"]}
                              for r in page["items"]], "no audit rows")


def cmd_status(args: argparse.Namespace) -> int:
    import datetime as dt

    from procedures import invariants

    # A database at another level (a migrate from another build while nodes run) still shows its figures, under a
    # warning: in that incident above all, the operator needs the backlog. Only what this build cannot read at all
    # is refused, as every other command refuses it.
    with _conn(args, check=False) as conn:
        mismatch = None
        try:
            installer.check_level(conn)
        except errors.SchemaMismatch as exc:
            mismatch = str(exc.detail)
        try:
            figures = routines.status(conn)
            broken = invariants.violations(conn) if args.check else {}
            by_hand = installer.routines_changed_by_hand(conn) if args.check and mismatch is None else []
        except (errors.WeaveError, pymysql.err.MySQLError, ValueError, KeyError, TypeError, IndexError):
            if mismatch is None:
                raise
            raise errors.SchemaMismatch(mismatch) from None  # its routines answer in another shape
        why_not = db.why_writes_refused(db.write_settings(conn))
    week = routines.rfc3339(figures["now_at"] + dt.timedelta(days=7))  # RFC 3339 UTC texts compare as times
    payload = {
        "now": routines.rfc3339(figures["now_at"]),
        "database": {"takes_writes": why_not is None, **({"why_not": why_not} if why_not else {}),
                     **({"schema_mismatch": mismatch} if mismatch else {})},
        "backlog": {r["class"]: {"due": r["due"], "oldest_due_lag_ms": float(r["lag_ms"] or 0)}
                    for r in figures["backlog"]},
        "tasks_in_flight": {status: figures["tasks"].get(status, 0) for status in ("QUEUED", "RUNNING")},
        "tasks_overdue": figures["tasks_overdue"],
        "queues_waiting": figures["queues_waiting"],
        "open_review_reasons": figures["open_review_reasons"],
        "instances_in_review": figures["instances_in_review"],
        "review_by_code": figures["review_by_code"],
        "polls": {"in_flight": figures["polls_in_flight"], "waiting": figures["polls_waiting"]},
        "signals_pending": figures["signals_pending"],
        "instances": figures["instances"],
        "deferred": figures["deferred"],
        "deferred_oldest_ms": figures["deferred_oldest_ms"],
        "failing": figures["failing"],
        "expiring_credentials": figures["expiring_credentials"],
        **({"invariants_broken": broken, "routines_changed_by_hand": by_hand} if args.check else {}),
    }

    def human(p: dict) -> str:
        lines = [f"engine time {p['now']}",
                 "database: " + ("takes writes" if p["database"]["takes_writes"]
                                 else f"takes NO writes: it is {p['database']['why_not']}"),
                 *([f"WARNING: {p['database']['schema_mismatch']} (the figures below are read all the same)"]
                   if mismatch else []),
                 "due now (per candidate class):"]
        lines += [f"  {k:<12} {v['due']:>8}   oldest lag {v['oldest_due_lag_ms']:.0f} ms"
                  for k, v in p["backlog"].items()]
        lines.append(f"tasks in flight: QUEUED {p['tasks_in_flight']['QUEUED']}, "
                     f"RUNNING {p['tasks_in_flight']['RUNNING']} ({p['tasks_overdue']} past their deadline)")
        lines.append("queues whose next task waits (ready, not yet claimed): " + (", ".join(
            f"{q['queue']} ({q['namespace']}) {q['wait_ms'] / 1000:.0f} s" for q in p["queues_waiting"][:10])
            + (f", and {len(p['queues_waiting']) - 10} more" if len(p["queues_waiting"]) > 10 else "") or "none"))
        lines.append("live instances: " + ", ".join(f"{k} {v['instances']} ({v['paused']} paused)"
                                                    for k, v in p["instances"].items()))
        lines.append(f"in review: {p['instances_in_review']} instance(s), {p['open_review_reasons']} open reason(s)"
                     + "".join(f"{', ' if i else ': '}{code} {row['open_review_reasons']}"
                               for i, (code, row) in enumerate(sorted(p["review_by_code"].items()))))
        lines.append("deferred: " + (", ".join(f"{k} {v} (oldest {p['deferred_oldest_ms'][k] / 1000:.0f} s)"
                                               for k, v in p["deferred"].items()) or "none"))
        lines.append("failing candidates: " + (", ".join(f"{k} {v['failing']} ({v['repeated']} repeatedly)"
                                                         for k, v in p["failing"].items() if v["failing"]) or "none"))
        # The ones about to expire by name; those past their time (still active until disabled) by count, and the
        # latest few: a platform's short-lived tokens that nobody disabled would otherwise fill the line.
        soon = [c for c in p["expiring_credentials"] if p["now"] < c["expires_at"] <= week]
        past = [c for c in p["expiring_credentials"] if c["expires_at"] <= p["now"]]
        lines.append("credentials expiring within 7 days: " + (", ".join(
            f"{c['credential_id']} {c['actor']} ({c['namespace']}) at {c['expires_at']}" for c in soon[:10])
            + (f", and {len(soon) - 10} more" if len(soon) > 10 else "") or "none"))
        if past:
            lines.append(f"credentials past their time, still active (disable them): {len(past)}"
                         + ("+" if len(past) >= 100 else "") + ": " + ", ".join(
                             f"{c['credential_id']} {c['actor']} ({c['namespace']}) EXPIRED" for c in past[:10])
                         + (", ..." if len(past) > 10 else ""))
        if args.check:
            broken = p["invariants_broken"]
            lines.append("invariants: " + (f"{len(broken)} broken" if broken else "all hold"))
            lines += [f"  {k} ({invariants.BY_ID[k].promise}): rows {', '.join(map(str, rows))}"
                      for k, rows in broken.items()]
            lines.append("routines: " + (f"{len(by_hand)} not this build's (replaced by hand; `weave migrate` "
                                         f"installs the build's own): {', '.join(by_hand)}" if by_hand
                                         else "as this build installed them"))
        return "\n".join(lines)

    _print(args, payload, human)
    return 1 if broken or mismatch or by_hand else 0


def cmd_signals_send(args: argparse.Namespace) -> int:
    import uuid

    from procedures import signals

    _json_argument("--payload", "payload", args.payload, "PAYLOAD_INVALID")  # then sent as given
    with _conn(args) as conn:
        receipt = signals.send(
            conn, _token(args), args.namespace, args.workflow_id,
            idempotency_key=args.idempotency_key or str(uuid.uuid4()), name=args.name,
            payload_version=args.payload_version, target_step_key=args.step,
            target_activation_sequence=args.activation, correlation_key=args.correlation_key,
            payload=args.payload, reason=args.reason, evidence_ref=args.evidence_ref)
    payload = {k: v for k, v in receipt.items() if k != "receipt_json"}
    _print(args, payload, lambda p: (
        f"{p['signal_id']} {p['status']}" + (f" ({p['disposition']})" if p["disposition"] else "")
        + (" (replayed)" if p["replayed"] else "")))
    return 0


def cmd_signals_get(args: argparse.Namespace) -> int:
    from procedures import signals

    with _conn(args) as conn:
        signal = signals.get(conn, _token(args), args.namespace, args.workflow_id, args.signal_id, verbatim=True)
    payload_text = signal.pop("payload_text")  # the payload as accepted, printed as it is (S-4)
    _print(args, signal, lambda s: (
        f"{s['signal_id']} {s['status']}" + (f" ({s['disposition']})" if s["disposition"] else "")
        + f"  {s['name']} v{s['payload_version']} -> {s['target_step_key']}#{s['target_activation_sequence']}"
        f"  correlation {json.dumps(s['correlation_key'], ensure_ascii=False)}\n"
        f"  accepted {s['accepted_at']}  expires {s['expires_at']}  settled {s['consumed_at'] or '-'}"
        f"  actor {s['actor']}\n  payload {payload_text}"))
    return 0


def cmd_signals_list(args: argparse.Namespace) -> int:
    from procedures import signals

    with _conn(args) as conn:
        page = signals.list_signals(conn, _token(args), args.namespace, args.workflow_id, status=args.status,
                                    limit=args.limit, after=args.cursor, verbatim=True)
    if args.json:  # as the API answers a page: each payload as accepted (S-4)
        for item in page["items"]:
            item.pop("payload_text", None)
        _print(args, page)
        return 0
    _print(args, page, lambda p: "\n".join(
        [f"{s['signal_id']:<12} {s['status']:<9} {s['disposition'] or '-':<22} {s['target_step_key']}"
         f"#{s['target_activation_sequence']}  {s['accepted_at']}  key {s['idempotency_key']}" for s in p["items"]]
        or ["no signals"]) + (f"\nnext page: --cursor {p['next_cursor']}" if p["next_cursor"] else ""))
    return 0


def cmd_signals_explain(args: argparse.Namespace) -> int:
    from procedures import signals

    with _conn(args) as conn:
        report = signals.explain(conn, _token(args), args.namespace, args.workflow_id, args.step_key,
                                 verbatim=args.json)
    _print(args, report, _human_explain)
    return 0


def _human_explain(r: dict) -> str:
    """Why a step is where it is: its state, what it waits on (timer, poll rounds, task, signal wait), what holds new
    work back (the blockers), and each signal sent to it with why it did or did not win."""
    lines = [f"{r['step_key']} {r['type']} {r['status']}  (instance {r['instance_status']}, {r['control']}, "
             f"deadline {r['instance_deadline_at']})"]
    if r["timer"]:
        t = r["timer"]
        lines.append(f"  timer due {t['due_at']}"
                     + (f" (truncated from {t['planned_due_at']})" if t["truncated"] else "")
                     + (f", settled {t['lateness_ms']:g} ms late" if t["lateness_ms"] else ""))
    if r["poll"]:
        p = r["poll"]
        lines.append(f"  poll {p['state']}  rounds {p['rounds_used']}/{p['max_rounds']}  "
                     f"last {p['last_outcome'] or '-'}  next {p['next_poll_at'] or '-'}  "
                     f"poll deadline {p['poll_deadline']}"
                     + (f"  stopped on {p['stop_reason']}" if p["stop_reason"] else ""))
    if r["task"]:
        k = r["task"]
        lines.append(f"  task {k['task_id']} {k['status']}  attempts {k['attempts_used']}/{k['max_attempts']}"
                     + (f"  held by {k['lease_holder']} until {k['lease_expires_at']}" if k["lease_holder"] else "")
                     + (f"  next try {k['next_retry_at']}" if k["next_retry_at"] else "")
                     + f"  deadline {k['deadline_at']}" + ("  cancel requested" if k["cancel_requested"] else ""))
        if k["last_error"]:
            lines.append(f"  last error {k['last_error']}")
        for late in k["late_reports"]:
            said = (json.dumps(late["result"], ensure_ascii=False) if late["kind"] == "SUCCEEDED"
                    else str(late["error"]))
            said = said if len(said) <= 200 else said[:197] + "..."
            lines.append(f"  late report of attempt #{late['attempt_no']} by {late['worker_id']} at "
                         f"{late['reported_at']} (changed nothing): {late['kind']} {said}")
    w = r["wait"]
    if w["kind"] or r["type"] == "SIGNAL":
        lines.append(f"  wait {w['kind'] or 'SIGNAL'} {w['status'] or 'not created yet'}  activation "
                     f"#{w['activation_sequence']}  deadline {w['deadline_at'] or '-'}")
        if w["name"]:
            correlation = json.dumps(w["correlation_key"], ensure_ascii=False)
            lines.append(f"  pins {w['name']} v{w['payload_version']} ({w['payload_type']})  correlation "
                         f"{correlation} hex {w['correlation_key_hex'] or '-'}")
    for b in r["blockers"]:
        detail = f": {b['detail'] if isinstance(b['detail'], str) else json.dumps(b['detail'])}" if b["detail"] else ""
        lines.append(f"  blocked by {b['blocker']} {b['reason'] or ''}".rstrip()
                     + (f" since {b['since']}" if b["since"] else "")
                     + (f", next check {b['next_check_at']}" if b["next_check_at"] else "") + detail)
    if r["signals_total"] > len(r["signals"]):  # the latest 100 are shown: say where the others are
        lines.append(f"  signals: the latest {len(r['signals'])} of {r['signals_total']} (`weave signals list` "
                     "lists them all)")
    for s in r["signals"]:
        detail = f"  {json.dumps(s['detail'])}" if s["detail"] else ""
        lines.append(f"  {s['signal_id']:<10} #{s['target_activation_sequence']} {s['status']:<9} {s['why']}{detail}")
    return "\n".join(lines)


def _key(args: argparse.Namespace) -> str:
    import uuid

    return args.idempotency_key or str(uuid.uuid4())


def _instance_after(args: argparse.Namespace, result: dict) -> int:
    """An action's answer: the instance as the action answered it (its scope is enough; no read scope needed), under
    --json with the kept values as they were kept (the action was called ``verbatim``), as `workflows show` prints
    them and the API answers the action."""
    _print(args, {**result["instance"], "replayed": bool(result["replayed"])},
           lambda p: _human_instance(p) + ("\n(replayed: nothing was done again)" if p["replayed"] else ""))
    return 0


# instance actions: name -> the routine, called with (conn, token, ns, workflow_id, reason, key)
INSTANCE_ACTIONS = {"pause": routines.instance_pause, "resume": routines.instance_resume,
                    "cancel": routines.instance_cancel, "retry": routines.instance_retry}


def cmd_workflows_action(args: argparse.Namespace) -> int:
    with _conn(args) as conn:
        result = INSTANCE_ACTIONS[args.action](conn, _token(args), args.namespace, args.workflow_id, args.reason,
                                               _key(args), verbatim=args.json)
        return _instance_after(args, result)


def cmd_workflows_deadline(args: argparse.Namespace) -> int:
    at = None if args.at is None else _utc_time("--at", args.at, "DEADLINE_INVALID")
    with _conn(args) as conn:
        result = routines.instance_deadline(conn, _token(args), args.namespace, args.workflow_id, args.reason,
                                            _key(args), deadline_at=at, extend_ms=args.extend_ms, verbatim=args.json)
        return _instance_after(args, result)


def _utc_time(flag: str, text: str, code: str) -> Any:
    """An RFC 3339 time with a zone, as the naive UTC datetime the routines take (a time without a zone would be
    read in the zone of the host the command runs on)."""
    try:
        return routines.from_rfc3339(text)
    except ValueError:
        raise CliError(code, f"{flag} must be an RFC 3339 time with a zone, got {text!r}") from None
    except OverflowError:  # a zone that moves it past 9999-12-31 or before year 1 in UTC
        raise CliError(code, f"{flag} must fall within the years 1-9999 once moved to UTC, got {text!r}") from None


def _shifted(moment: Any, age: Any, flag: str, code: str) -> Any:
    """``moment`` + ``age`` (a negative age for a time before it), or a refusal naming ``flag`` when the sum falls
    outside the calendar (years 1-9999)."""
    try:
        return moment + age
    except OverflowError:
        raise CliError(code, f"{flag} reaches outside the years 1-9999 from the engine clock "
                             f"({moment:%Y-%m-%dT%H:%M:%S}Z)") from None


DURATION_UNITS = {"d": 86_400, "h": 3_600, "m": 60, "s": 1}


def _duration(text: str) -> Any:
    """``90d``, ``36h``, ``30m`` or ``45s``: an age, as a timedelta."""
    import datetime as dt

    number, unit = text[:-1], text[-1:]
    if unit not in DURATION_UNITS or not number.isdigit() or int(number) == 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not an age such as 90d, 36h, 30m or 45s")
    try:
        return dt.timedelta(seconds=int(number) * DURATION_UNITS[unit])
    except OverflowError:  # past timedelta's 999,999,999 days, far past the calendar's last time
        raise argparse.ArgumentTypeError(f"{text!r} is longer than any time the calendar holds") from None


ARCHIVE_TRIES = 5


def _purge_archived(conn: db.Connection, token: str, args: argparse.Namespace, cutoff: Any, after: str | None,
                    archive: IO[str], limit: int, only: list[str] | None = None) -> dict:
    """One window of an archiving run: name it (a dry run), append its instances' rows to the archive and flush them
    to disk, then remove exactly those instances, each with the number of rows archived for it. A row added to one
    of them in between (a late report, a refused signal) makes the purge refuse the window, which is then archived
    again: the archive's last line for an instance holds every row that was removed."""
    from procedures import history

    for _ in range(ARCHIVE_TRIES):
        named = routines.instances_purge(conn, token, args.namespace, cutoff, after=after, limit=limit, only=only,
                                         dry_run=True)
        rows = history.rows_of(conn, named["workflow_ids"])
        history.write(archive, args.namespace, rows)
        archive.flush()
        os.fsync(archive.fileno())
        counts = {workflow_id: sum(map(len, tables.values())) for workflow_id, tables in rows.items()}
        try:
            return routines.instances_purge(conn, token, args.namespace, cutoff, after=after, limit=limit,
                                            reason=args.reason, only=counts)
        except errors.HistoryChanged:
            continue
    raise errors.HistoryChanged(f"HISTORY_CHANGED: the instances after {after or 'the first'} kept gaining rows "
                                f"while they were archived ({ARCHIVE_TRIES} tries); run the purge again later")


# The first window of a run that removes takes at most this many instances: how many rows an instance holds is
# known only once some have gone (a poll of 10,000 rounds holds about 40,000), and --max-rows sizes the next ones.
PURGE_PROBE = 10


def _purge_window(args: argparse.Namespace, windows: int, removed: int, rows: int) -> int:
    """How many instances the next window takes: at most --batch, and as many as --max-rows allows at the rows per
    instance the run has removed so far. Until a window has removed any, PURGE_PROBE, doubled for each window that
    removed none (a stretch of live instances is crossed in few windows); a dry run removes nothing: --batch."""
    if args.dry_run:
        return args.batch
    if not removed:
        return min(args.batch, PURGE_PROBE * 2 ** min(windows, 10))
    return max(1, min(args.batch, int(args.max_rows * removed // max(rows, 1))))


def cmd_workflows_purge(args: argparse.Namespace) -> int:
    """A retention run: windows of at most --batch instances until the cursor says done, each its own transaction,
    sized to about --max-rows rows by the rows per instance removed so far, with a line of progress on stderr for
    each window that removed anything. With --archive, each window is named by a dry run first, its instances' rows
    are appended to the archive and flushed to disk, and only then are exactly those instances removed (one the
    window could not take then waits for the next run)."""
    if args.older_than is None and args.finished_before is None and not args.workflow_ids:
        raise CliError("USAGE_INVALID", "give a cutoff (--older-than or --finished-before), or the instances to "
                                        "remove (--workflow-id)")
    for workflow_id in args.workflow_ids or ():
        if not re.fullmatch(r"wf_[1-9][0-9]{0,18}", workflow_id):
            raise CliError("USAGE_INVALID", f"--workflow-id {workflow_id!r} is not a workflow id (wf_ and a number)")
    if not args.dry_run and not (args.reason or "").strip():  # before an archive is written, not after
        raise CliError("REASON_INVALID", "a purge that removes says why: give --reason (1-1024 characters)",
                       EXIT_CODES[422])
    archive = None  # closed below
    if args.archive and not args.dry_run:
        # The rows hold task inputs (an http task's headers too), payloads and instance inputs: a new archive is
        # its owner's alone, whatever the umask.
        archive = os.fdopen(os.open(args.archive, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600), "a",
                            encoding="utf-8")
    try:
        with _conn(args) as conn:
            token = _token(args)
            if args.finished_before is not None:
                cutoff = _utc_time("--finished-before", args.finished_before, "INVALID_ARGUMENT")
            else:  # one cutoff for the whole run, on the engine's clock, not the host's; named ones: now
                now = db.call_row(conn, "weave_clock_now")["now_at"]
                cutoff = now if args.older_than is None else _shifted(now, -args.older_than, "--older-than",
                                                                      "INVALID_ARGUMENT")
            # The counters of /metrics keep what goes: their sums are brought up to date first, and an instance
            # with a row they have not counted yet waits for a later run (uncounted).
            routines.metrics_catch_up(conn)
            total = {"purged": 0, "workflow_ids": [], "rows_deleted": 0, "held": 0, "held_ids": [], "uncounted": 0,
                     "windows": 0, "finished_before": routines.rfc3339(cutoff), "dry_run": args.dry_run,
                     "archive": args.archive}

            def purge(after: str | None, limit: int, only: list[str] | None = None) -> dict:
                """One window, added to the run's totals."""
                if archive is None:
                    window = routines.instances_purge(conn, token, args.namespace, cutoff, after=after, only=only,
                                                      limit=limit, reason=args.reason, dry_run=args.dry_run)
                else:
                    window = _purge_archived(conn, token, args, cutoff, after, archive, limit, only)
                total["windows"] += 1
                for key in ("purged", "rows_deleted", "held", "uncounted"):
                    total[key] += window[key]
                total["held_ids"] += window["held_ids"]
                total["workflow_ids"] += window["workflow_ids"]
                return window

            if args.workflow_ids:
                # Named instances: each its own window of one, the instance after the one before its number, and
                # only that one (the namespace's next instance is another one when the named one is not in it).
                for workflow_id in dict.fromkeys(args.workflow_ids):
                    after = f"wf_{int(workflow_id[3:]) - 1}" if workflow_id != "wf_1" else None
                    if purge(after, 1, [workflow_id])["uncounted"]:
                        total.setdefault("uncounted_ids", []).append(workflow_id)
            else:
                after = None
                while True:
                    window = purge(after, _purge_window(args, total["windows"], total["purged"],
                                                       total["rows_deleted"]))
                    after = window["next_after"]
                    if window["purged"] and not args.json:
                        print(f"{'would remove' if args.dry_run else 'removed'} {total['purged']} instance(s) so "
                              "far" + (f", {total['rows_deleted']} rows" if not args.dry_run else "")
                              + (f"; next after {after}" if after else ""), file=sys.stderr, flush=True)
                    if after is None:
                        break
    finally:
        if archive is not None:
            archive.close()
    if args.workflow_ids:  # each one not removed, and why it may not have been
        gone = set(total["workflow_ids"]) | set(total["held_ids"]) | set(total.get("uncounted_ids", ()))
        total["left_ids"] = [w for w in dict.fromkeys(args.workflow_ids) if w not in gone]
    _print(args, total, lambda t: (
        f"{'would remove' if t['dry_run'] else 'removed'} {t['purged']} instance(s) finished before "
        f"{t['finished_before']}" + ("" if t["dry_run"] else f" ({t['rows_deleted']} rows)")
        + (f", archived to {t['archive']}" if t["archive"] and not t["dry_run"] else "")
        + (f": {', '.join(t['workflow_ids'])}" if t["dry_run"] and t["workflow_ids"] else "")
        + (f"\nkept {t['held']} settled instance(s) that still hold work: {', '.join(t['held_ids'])}"
           if t["held"] else "")
        + (f"\nleft {t['uncounted']} settled instance(s) whose last rows /metrics has not counted yet for a later "
           "run" if t["uncounted"] else "")
        + (f": {', '.join(t['uncounted_ids'])}" if t.get("uncounted_ids") else "")
        + (f"\nleft {', '.join(t['left_ids'])}: not settled (cancel it first), finished after the cutoff, held by "
           "another transaction at that moment, or not in this namespace" if t.get("left_ids") else "")))
    if args.workflow_ids and (total["held"] or total["left_ids"] or total.get("uncounted_ids")):
        return EXIT_CODES[409]  # not every named instance went (or would go): a script must not take it as done
    return 0


def cmd_steps_action(args: argparse.Namespace) -> int:
    with _conn(args) as conn:
        common = (conn, _token(args), args.namespace, args.workflow_id, args.step_key, args.reason, _key(args))
        seq = args.activation
        if args.action == "reactivate":
            result = routines.step_reactivate(*common, timeout_ms=args.timeout_ms, activation_sequence=seq,
                                              verbatim=args.json)
        elif args.action == "continue":
            result = routines.step_continue(*common, extra_rounds=args.extra_rounds,
                                            poll_deadline_ms=args.poll_deadline_ms, activation_sequence=seq,
                                            verbatim=args.json)
        else:
            output = _json_argument("--output", "output", args.output, "INPUT_INVALID")
            result = routines.step_resolve(*common, output=output, output_json=args.output,
                                           evidence_ref=args.evidence_ref, activation_sequence=seq, verbatim=args.json)
        return _instance_after(args, result)


def _cell(value: Any) -> str:
    """A value in a table: "-" when absent, as the other tables show it; its line breaks and other controls escaped,
    so that a value cannot end its row and add one of its own making."""
    return "-" if value is None else _escaped(str(value))


def _table(rows: list[dict], columns: list[str], empty: str) -> str:
    if not rows:
        return empty
    widths = [max(len(c), *(len(_cell(r[c])) for r in rows)) for c in columns]
    lines = ["  ".join(c.upper().ljust(w) for c, w in zip(columns, widths, strict=True))]
    lines += ["  ".join(_cell(r[c]).ljust(w) for c, w in zip(columns, widths, strict=True)) for r in rows]
    return "\n".join(lines)


# listings: command -> (wrapper, columns shown, text when empty)
LISTINGS: dict[str, tuple[Callable[[db.Connection, str, str], list[dict]], list[str], str]] = {
    "definitions": (routines.definition_list, ["name", "latest_version", "versions", "queues", "created_at"],
                    "no definitions"),
    "apps": (routines.app_list, ["name", "max_in_flight", "status", "in_flight", "waiting"], "no apps"),
    "queues": (routines.queue_list, ["name", "capacity", "queued", "running", "waiting"], "no queues"),
    "credentials": (routines.credential_list, ["credential_id", "actor", "scopes", "queues", "status", "created_at",
                                               "expires_at"],
                    "no credentials"),
}


def cmd_list(args: argparse.Namespace) -> int:
    wrapper, columns, empty = LISTINGS[args.command]
    with _conn(args) as conn:
        rows = wrapper(conn, _token(args), args.namespace)
    shown = [{k: ",".join(v) if isinstance(v, list) else v for k, v in row.items()} for row in rows]
    _print(args, rows, lambda _: _table(shown, columns, empty))
    return 0


def cmd_definitions_show(args: argparse.Namespace) -> int:
    with _conn(args) as conn:
        row = routines.definition_get(conn, _token(args), args.namespace, args.name, args.version)
    _print(args, row, lambda d: f"{d['name']} version {d['version']} (digest {d['digest']}, {d['created_at']})\n"
           + json.dumps({"name": d["name"], "steps": d["steps"]}, indent=2))
    return 0


def cmd_orchestrator(args: argparse.Namespace) -> int:
    from orchestrator.loop import run_orchestrator

    return run_orchestrator(_dsn(args), batch=args.batch, concurrency=args.concurrency,
                            idle_probe_ms=args.idle_probe_ms, idle_max_ms=args.idle_max_ms, node_id=args.node_id,
                            json_errors=args.json)


def cmd_api(args: argparse.Namespace) -> int:
    from api.server import run_api

    return run_api(_dsn(args), args.bind, args.workers, threads=args.threads, access_log=args.access_log,
                   json_errors=args.json)


def cmd_dev(args: argparse.Namespace) -> int:
    from orchestrator.dev import run_dev

    dsn_text = args.dsn or settings.dsn_given()
    if dsn_text:
        _parsed_dsn(dsn_text)  # refused as every command refuses it, before a server or a lock is touched
    return run_dev(Path(args.data_dir), dsn_text, args.bind, quiet=args.quiet)


def cmd_worker(args: argparse.Namespace) -> int:
    from orchestrator.worker import run_worker

    return run_worker(_dsn(args), queues=args.queue, handler_modules=args.handlers or [],
                      concurrency=args.concurrency, namespace=args.namespace, lease_ms=args.lease_ms,
                      heartbeat_ms=args.heartbeat_ms, grace_ms=args.grace_ms, worker_id=args.worker_id,
                      idle_max_ms=args.idle_max_ms, json_errors=args.json)


# --- parser ---------------------------------------------------------------------------------------------
def _common(p: argparse.ArgumentParser, *, token: bool = True, namespace: bool = True, json_out: bool = True,
            json_help: str = "print machine-readable JSON") -> None:
    p.add_argument("--dsn", help="database URL (default: $WEAVE_DSN, else mysql://root@127.0.0.1:3306/weave); TLS: "
                                 "?ssl_mode=VERIFY_IDENTITY&ssl_ca=CA.pem (ssl_cert, ssl_key for a client certificate)")
    if namespace:
        p.add_argument("--namespace", default=settings.namespace(),
                       help="namespace (default: $WEAVE_NAMESPACE, else 'default')")
    if token:
        p.add_argument("--token", help="bearer token (default: $WEAVE_TOKEN)")
    if json_out:
        p.add_argument("--json", action="store_true", help=json_help)


def _count(text: str) -> int:
    """A command-line count (workers, threads, connections, a batch): a whole number of at least 1. Zero would
    start a process that serves or advances nothing, and says so nowhere."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _queue_names(text: str) -> str:
    """A worker's queue (or a comma list of them): names as queues are named. A name no queue can have would
    make every claim fail, so it is refused as the command line is read."""
    from procedures.pulse import queue_names

    try:
        return ",".join(queue_names(text))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


NAMESPACE_RULE = "1-64 characters of A-Z a-z 0-9 _ . -, and not . or .."


def _namespace_name(text: str) -> str:
    """A worker's namespace, named as namespaces are: with another name its claims would find nothing, silently
    (and an empty one would serve every namespace)."""
    import re

    if not re.fullmatch(r"(?!\.\.?\Z)[A-Za-z0-9_.-]{1,64}", text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a namespace name ({NAMESPACE_RULE})")
    return text


def _host_port(text: str) -> str:
    """HOST:PORT (an IPv6 host in brackets) with a port of 1-65535."""
    host, _, port = text.rpartition(":")
    if not host or host == "[]" or not db.is_port(port):
        raise argparse.ArgumentTypeError(f"{text!r} is not HOST:PORT (a port of 1-65535)")
    return text


def _bind(text: str) -> str:
    """Where the API listens: HOST:PORT, or unix:PATH (a socket for a proxy on the same host)."""
    if text.startswith("unix:") and len(text) > len("unix:"):
        return text
    try:
        return _host_port(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"{text!r} is not HOST:PORT (a port of 1-65535) or unix:PATH") from None


def _command(group: Any, name: str, *args: Any, func: Callable[[argparse.Namespace], int], token: bool = True,
             namespace: bool = True, daemon: bool = False, **kwargs: Any) -> argparse.ArgumentParser:
    """A subcommand with the common options (``--dsn``, ``--namespace``, ``--token``, ``--json``) that runs ``func``.
    A ``daemon`` prints no result: its ``--json`` covers only what is refused before it starts."""
    p: argparse.ArgumentParser = group.add_parser(name, *args, **kwargs)
    _common(p, token=token, namespace=namespace,
            json_help=DAEMON_JSON if daemon else "print machine-readable JSON")
    p.set_defaults(func=func)
    return p


WORKFLOW_ID = "the instance's id (wf_...)"
STEP_KEY = "the step's key in its definition"
IDEMPOTENCY_KEY = "default: a new random key (pass one to make retries safe)"
NAME_RULE = "1-64 of A-Z a-z 0-9 _ . : -"
ADMIN_KEY = ("default: none, and a run again puts these values again; with a key, a run again answers the first "
             "run's answer and changes nothing, even after other changes")
DAEMON_JSON = "errors that stop it before it starts as JSON on stderr (its log is JSON lines anyway)"


def _action_arguments(p: argparse.ArgumentParser, *, step: bool = False) -> None:
    p.add_argument("workflow_id", help=WORKFLOW_ID)
    if step:
        p.add_argument("step_key", help=STEP_KEY)
    p.add_argument("--reason", required=True, help="why, for the audit trail and the event history (1-1024 chars)")
    p.add_argument("--idempotency-key", help=IDEMPOTENCY_KEY)
    if step:
        p.add_argument("--activation", type=int, metavar="N",
                       help="act only if the step is still at activation N, the one you looked at (refused, "
                            "INVALID_STATE, once it was reactivated)")


def _version() -> str:
    """The package's version and the level it ships: what `weave migrate` brings a database to, and what every
    process checks a database against before it starts (R-16)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        number = version("weave")
    except PackageNotFoundError:  # run from a checkout that was never installed
        number = "unknown"
    return f"weave {number} (ships level {installer.shipped_level()})"


class _Version(argparse.Action):
    """--version, worked out only when asked for (the level reads every routine file)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        print(_version())
        parser.exit()


class _Parser(argparse.ArgumentParser):
    """A parser whose usage errors, under ``--json``, are ``{"code": "USAGE_INVALID", "detail"}`` on stderr like
    every other error (exit 2 either way); its subcommands' parsers are of its class."""

    json_errors = False

    def error(self, message: str) -> Any:
        if not self.json_errors:
            super().error(message)
        print(json.dumps({"code": "USAGE_INVALID", "detail": f"{self.prog}: {message}"}), file=sys.stderr)
        self.exit(EXIT_USAGE)


def build_parser(*, json_errors: bool = False) -> argparse.ArgumentParser:
    parser_class = type("Parser", (_Parser,), {"json_errors": json_errors})
    parser = parser_class(
        prog="weave", description="Weave: a durable wait engine for long-running workflows on MySQL/MariaDB.",
        epilog="Configuration: WEAVE_DSN (mysql://user:password@host:port/db), WEAVE_TOKEN, WEAVE_NAMESPACE. "
               + EXIT_HELP + ".")
    parser.add_argument("--version", action=_Version, nargs=0,
                        help="print the version and the schema level this code ships, then exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser("dev", help="run everything on one machine on the embedded default database",
                       description="Start a private database (unless WEAVE_DSN is set), migrate, bootstrap a dev "
                                   "namespace with example definitions, and run the engine until Ctrl-C.")
    p.add_argument("--dsn", help="use this database instead of a private one (default: $WEAVE_DSN)")
    p.add_argument("--data-dir", default=".weave", help="where the private database keeps its data (.weave)")
    p.add_argument("--bind", type=_host_port, default="127.0.0.1:8080",
                   help="where the API listens: HOST:PORT (default 127.0.0.1:8080)")
    p.add_argument("--quiet", action="store_true", help="no status line while running")
    p.add_argument("--json", action="store_true",
                   help="a malformed --dsn or environment setting as JSON on stderr; what it prints once starting "
                        "is for a person")
    p.set_defaults(func=cmd_dev)

    p = _command(sub, "migrate", help="create or upgrade the schema and routines (idempotent)",
                 description="Apply the schema migrations and install the stored routines. Re-running is a "
                             "no-op, and two at once take turns; one that failed or was cut off resumes where it "
                             "stopped when run again. Upgrade order: stop old nodes, migrate, start new nodes.",
                 func=cmd_migrate, token=False, namespace=False)
    p.add_argument("--test-clock", action="store_true",
                   help="install with the movable test clock (tests only; chosen at first install)")
    p.add_argument("--plan", action="store_true",
                   help="print what migrate would do (migrations to apply, where a stopped one resumes, routines "
                        "to install or drop) and change nothing")

    p = _command(sub, "bootstrap", help="create a namespace and print an admin token",
                 description="Create the namespace if needed and a credential with scopes admin and "
                             "definitions:publish (no signal rights). The token is shown once.",
                 func=cmd_bootstrap, token=False)

    creds = sub.add_parser("credentials", help="create, list, disable or enable credentials").add_subparsers(
        dest="action", metavar="ACTION", required=True)
    p = _command(creds, "list", help="list the namespace's credentials, never their tokens (admin)", func=cmd_list)
    p = _command(creds, "create", help="create a credential (admin); prints its token once",
                 func=cmd_credentials_create)
    p.add_argument("--actor", required=True, help="actor name recorded in audit rows")
    p.add_argument("--scopes", required=True, help="comma list, e.g. workflows:read,workflows:signal")
    p.add_argument("--queues", default="*", help="comma list of queues the credential may use, or * (default)")
    expiry = p.add_mutually_exclusive_group()
    expiry.add_argument("--expires-in", type=_duration, metavar="AGE",
                        help="stop authenticating this long from now, on the engine's clock: 45s, 30m, 36h or 90d")
    expiry.add_argument("--expires-at", metavar="TIME", help="stop authenticating at this time, RFC 3339 with a zone")
    p.add_argument("--idempotency-key", help="default: none, and every run makes a credential; with a key, a run "
                                             "again answers which credential the first made (its token is shown "
                                             "once, by the first run). With --expires-in a run again asks for "
                                             "another expiry: give --expires-at")
    p = _command(creds, "disable", help="disable a credential: its token stops working, and the instances it "
                                        "started take no new work until it is enabled again (admin)",
                 func=cmd_credentials_disable)
    p.add_argument("credential_id", help="cred_...")
    p = _command(creds, "enable", help="enable a disabled credential again (admin)", func=cmd_credentials_enable)
    p.add_argument("credential_id", help="cred_...")

    apps = sub.add_parser("apps", help="manage apps").add_subparsers(dest="action", metavar="ACTION", required=True)
    p = _command(apps, "list", help="list apps with their quota and tasks in flight (admin)", func=cmd_list)
    p = _command(apps, "create", help="create an app or change its quota/status (admin)", func=cmd_apps_create)
    p.add_argument("name", help=f"app name ({NAME_RULE})")
    p.add_argument("--max-in-flight", type=int, required=True, help="quota of QUEUED+RUNNING tasks")
    p.add_argument("--status", choices=["ACTIVE", "DISABLED"], help="default: ACTIVE for a new app, else unchanged")
    p.add_argument("--idempotency-key", help=ADMIN_KEY)

    queues = sub.add_parser("queues", help="manage queues").add_subparsers(dest="action", metavar="ACTION",
                                                                          required=True)
    p = _command(queues, "list", help="list queues with their capacity and tasks (admin)", func=cmd_list)
    p = _command(queues, "create", help="create a queue or change its capacity (admin)", func=cmd_queues_create)
    p.add_argument("name", help=f"queue name ({NAME_RULE})")
    p.add_argument("--capacity", type=int, required=True, help="most QUEUED+RUNNING tasks at once")
    p.add_argument("--idempotency-key", help=ADMIN_KEY)

    defs = sub.add_parser("definitions", help="publish, list and show definitions").add_subparsers(
        dest="action", metavar="ACTION", required=True)
    p = _command(defs, "list", help="list definitions with their latest version (workflows:read)", func=cmd_list)
    p = _command(defs, "show", help="show a definition version, the latest by default (workflows:read)",
                 func=cmd_definitions_show)
    p.add_argument("name", help="definition name")
    p.add_argument("--version", type=int, help="version (default: the latest)")
    p = _command(defs, "publish", help="validate and publish a definition JSON file (definitions:publish)",
                 func=cmd_definitions_publish)
    p.add_argument("file", help="path to the definition JSON, or - for stdin")
    p.add_argument("--idempotency-key",
                   help="default: none, and the same content as the latest version answers that version; with a key "
                        "(a build's id, say), a retry answers its first publish even after later ones")

    wf = sub.add_parser("workflows", help="start, inspect, act on and purge workflow instances").add_subparsers(
        dest="action", metavar="ACTION", required=True)
    p = _command(wf, "start", help="start an instance (workflows:start)", func=cmd_workflows_start)
    p.add_argument("definition", help="name of a published definition")
    p.add_argument("--version", type=int, help="definition version (default: latest)")
    p.add_argument("--app", required=True, help="the app whose quota the instance's tasks use")
    p.add_argument("--input", help="instance input as JSON text (default {})")
    deadline = p.add_mutually_exclusive_group(required=True)
    deadline.add_argument("--deadline-ms", type=int, help="instance deadline, milliseconds from now")
    deadline.add_argument("--deadline-at", metavar="TIME",
                          help="instance deadline as an RFC 3339 time with a zone, e.g. 2027-01-31T18:00:00Z")
    p.add_argument("--business-key", help="your own key for the instance, to find it by (1-256 chars)")
    p.add_argument("--idempotency-key", help=IDEMPOTENCY_KEY)
    p = _command(wf, "list", help="list instances, newest first (workflows:read)", func=cmd_workflows_list)
    p.add_argument("--status", choices=["RUNNING", "SUCCEEDED", "NEEDS_REVIEW", "CANCELLING", "CANCELLED"],
                   help="only instances in this status")
    p.add_argument("--definition", help="only instances of this definition")
    p.add_argument("--control", choices=["ACTIVE", "PAUSED"], help="only instances with this control")
    p.add_argument("--business-key", help="only the instances started with this business key (exact)")
    p.add_argument("--review-code", metavar="CODE",
                   help="only instances with an open review reason of this code, e.g. TASK_FAILED")
    p.add_argument("--deferred", action="store_true", help="only instances whose next check is deferred (R-18)")
    p.add_argument("--limit", type=int, default=50, help="instances per page, 1-500 (default 50)")
    p.add_argument("--cursor", help="next_cursor of the previous page")
    p = _command(wf, "review", help="the instances waiting for a person, the one waiting longest first, with their "
                 "open reasons (workflows:read)", func=cmd_workflows_review)
    p.add_argument("--limit", type=int, default=50, help="instances shown, 1-500 (default 50)")
    p = _command(wf, "show", help="show an instance with its steps (workflows:read)", func=cmd_workflows_show)
    p.add_argument("workflow_id", help=WORKFLOW_ID)
    p = _command(wf, "wait", help="wait until an instance settles or needs a person, then show it (workflows:read)",
                 func=cmd_workflows_wait)
    p.add_argument("workflow_id", help=WORKFLOW_ID)
    p.add_argument("--until", type=_statuses, default=_statuses(WAIT_UNTIL), metavar="STATUS[,STATUS...]",
                   help=f"the statuses to wait for (default {WAIT_UNTIL})")
    p.add_argument("--timeout", type=_duration, default=_duration("60s"), metavar="AGE",
                   help="how long to wait: 45s, 30m, 36h or 90d (default 60s); out of time, exit code 8")
    for action, text in (("pause", "pause an instance: no new work starts (workflows:control)"),
                         ("resume", "resume a paused instance (workflows:control)"),
                         ("cancel", "cancel an instance (workflows:control)")):
        _action_arguments(_command(wf, action, help=text, func=cmd_workflows_action))
    _action_arguments(_command(
        wf, "retry", help="once the cause is fixed, retry what failed: CANDIDATE_FAILING, a step held back by it, "
        "OWNERSHIP_MISMATCH (workflows:review)", func=cmd_workflows_action,
        description="Close the instance's CANDIDATE_FAILING reasons (a decision failed three times in a row the same "
                    "way) and OWNERSHIP_MISMATCH reasons (a task's outcome whose ownership did not verify, set "
                    "aside); make its failing decisions due at once, counted from zero, and its outcomes set aside "
                    "PENDING again, to be verified again. A step in review for CANDIDATE_FAILING alone goes on where "
                    "it stopped, in the same activation: its timer's due time, its wait's deadline and the signals "
                    "sent to it meanwhile, its poll's rounds and its task's outcome are kept (the task does not run "
                    "again). The instance runs again when no reason is left. Fix the cause first (what the reason's "
                    "detail names; for a mismatch, the rows): a decision that fails three times more the same way, "
                    "or an outcome that still does not verify, sends the instance back to review. With nothing to "
                    "retry it is refused (exit code 5), naming a step in review: reactivate or resolve it."))
    p = _command(wf, "deadline", help="set a later instance deadline (workflows:review)", func=cmd_workflows_deadline)
    _action_arguments(p)
    when = p.add_mutually_exclusive_group(required=True)
    when.add_argument("--at", help="the new deadline, RFC 3339 with a zone")
    when.add_argument("--extend-ms", type=int, help="milliseconds to add to the current deadline")
    p = _command(wf, "explain", help="why is this step still waiting? (workflows:read)", func=cmd_signals_explain)
    p.add_argument("workflow_id", help=WORKFLOW_ID)
    p.add_argument("step_key", help=STEP_KEY)
    p = _command(wf, "rounds", help="print a POLL step's rounds with their results (workflows:read)",
                 description="Print the rounds of a POLL step's activation, oldest first, a page at a time, "
                             "with their results. An instance read (`weave workflows show --json`) carries the "
                             "latest 50 of each current activation; this gives every one, of an earlier activation "
                             "too.",
                 func=cmd_workflows_rounds)
    p.add_argument("workflow_id", help=WORKFLOW_ID)
    p.add_argument("step_key", help=STEP_KEY)
    p.add_argument("--activation", type=int, help="the activation sequence to read (default: the step's latest)")
    p.add_argument("--after", type=int, default=0, help="print the rounds after this number (default 0: from round 1)")
    p.add_argument("--limit", type=int, default=100,
                   help="rounds at most, 1-1000 (default 100); a page ends sooner once its results pass 8 MiB, and "
                        "says where the next one starts")
    p = _command(wf, "events", help="print the event history (workflows:read)", func=cmd_workflows_events)
    p.add_argument("workflow_id", help=WORKFLOW_ID)
    p.add_argument("--after", type=int, default=0, help="print the events after this seq (default 0: from the first)")
    p.add_argument("--limit", type=int, default=1000, help="events at most, 1-1000 (default 1000)")

    p = _command(wf, "purge", help="remove settled instances and all their rows: history retention (admin)",
                 description="Remove instances that are SUCCEEDED or CANCELLED, finished before a cutoff and hold "
                             "no work open, with every row of theirs (steps, tasks, signals, events, their audit "
                             "rows). "
                             "Works in windows of --batch instances, each one transaction with one audit row naming "
                             "the instances it removed; safe to stop and run again. Workflow ids are never reused, "
                             "but a start with a removed instance's idempotency key starts a new instance: keep "
                             "history longer than your clients retry.",
                 func=cmd_workflows_purge)
    cutoff = p.add_mutually_exclusive_group()
    cutoff.add_argument("--older-than", type=_duration, metavar="AGE",
                        help="finished longer ago than this, on the engine's clock: 90d, 36h, 30m or 45s")
    cutoff.add_argument("--finished-before", metavar="TIME", help="finished before this time, RFC 3339 with a zone")
    p.add_argument("--workflow-id", action="append", metavar="ID", dest="workflow_ids",
                   help="remove only this instance (repeat for more), finished before the cutoff or, without one, "
                        "at any time before now: one customer's instances when their data must go. A live one is "
                        "kept and named (cancel it first), and the exit code is then 5, not 0")
    p.add_argument("--reason", help="why, for the audit trail (1-1024 chars; required unless --dry-run)")
    p.add_argument("--batch", type=int, default=100,
                   help="instances per window and transaction at most, 1-1000 (default 100)")
    p.add_argument("--max-rows", type=_count, default=100_000,
                   help="rows per window, about: after a first window of at most 10 instances, each window takes as "
                        "many as this allows at the rows per instance removed so far (default 100000); a dry run, "
                        "which removes nothing, takes --batch")
    p.add_argument("--dry-run", action="store_true", help="count and name what would go; change nothing")
    p.add_argument("--archive", metavar="FILE",
                   help="first append every row of each instance removed to FILE, one JSON line per instance, "
                        "written to disk before the instance goes (a window that gained a row meanwhile is "
                        "archived again: an instance's last line holds what was removed)")

    st = sub.add_parser("steps", help="recover steps in review").add_subparsers(
        dest="action", metavar="ACTION", required=True)
    p = _command(st, "reactivate", help="reactivate a step in review as a new activation (workflows:review)",
                 func=cmd_steps_action)
    _action_arguments(p, step=True)
    p.add_argument("--timeout-ms", type=int, help="the new activation's timeout (SIGNAL and POLL steps)")
    p = _command(st, "continue", help="continue a POLL stopped on rounds or deadline (workflows:review)",
                 func=cmd_steps_action)
    _action_arguments(p, step=True)
    p.add_argument("--extra-rounds", type=int, help="rounds to add to the budget")
    p.add_argument("--poll-deadline-ms", type=int, help="a later poll deadline, in ms from now")
    p = _command(st, "resolve", help="settle a step in review with an output you give (workflows:review)",
                 func=cmd_steps_action)
    _action_arguments(p, step=True)
    p.add_argument("--output", required=True, help="the step's output as JSON text, e.g. '{\"paid\": true}'")
    p.add_argument("--evidence-ref", help="a reference to evidence (no whitespace)")

    p = _command(sub, "audit", help="read the audit trail, newest first (admin; workflows:read with --workflow-id)",
                 description="The audit trail, newest first: without --workflow-id the namespace's own actions "
                             "(credentials, apps, queues, definitions, console sign-ins, retention runs; admin), with "
                             "it that instance's audit rows (workflows:read).",
                 func=cmd_audit)
    p.add_argument("--workflow-id", help="an instance's audit rows instead of the namespace's own actions")
    p.add_argument("--action", help="only this action, e.g. credential.disable; an instance's action (instance.pause, "
                                    "step.resolve, ...) with --workflow-id")
    p.add_argument("--limit", type=int, default=50, help="rows per page, 1-500 (default 50)")
    p.add_argument("--cursor", help="next_cursor of the previous page")

    p = _command(sub, "status", help="backlog per candidate class, oldest due lag, tasks in flight, reviews",
                 description="What the engine has to do now, across namespaces. --check also runs the M-4 "
                             "invariants and compares the routines' bodies with the build's, and exits 1 if an "
                             "invariant is broken or a routine was replaced by hand.",
                 func=cmd_status, token=False, namespace=False)
    p.add_argument("--check", action="store_true",
                   help="also run the M-4 invariant queries and compare the routines with the build's")

    p = _command(sub, "api", help="serve the HTTP API under gunicorn",
                 description="Serve the HTTP API (07-api). Refuses to start against a database at another "
                             "schema level; answers 503 UNAVAILABLE while the database is unreachable.",
                 func=cmd_api, token=False, namespace=False, daemon=True)
    p.add_argument("--bind", type=_bind, default="127.0.0.1:8080",
                   help="HOST:PORT or unix:PATH to listen on (default 127.0.0.1:8080)")
    p.add_argument("--workers", type=_count, default=2, help="gunicorn worker processes (default 2)")
    p.add_argument("--threads", type=_count, default=8, help="serving threads per worker (default 8)")
    p.add_argument("--no-access-log", dest="access_log", action="store_false",
                   help="do not write gunicorn's access log (one line per request on stdout, on by default; up to "
                        "a third of the API's CPU on a small request) when a proxy in front logs the requests already")
    sg = sub.add_parser("signals", help="send and inspect external signals").add_subparsers(
        dest="action", metavar="ACTION", required=True)
    p = _command(sg, "send", help="send a signal to a SIGNAL step (workflows:signal); prints the receipt",
                 description="Send an external signal. The payload is passed exactly as given (JSON text). "
                             "Re-sending with the same --idempotency-key and content answers the first receipt.",
                 func=cmd_signals_send)
    p.add_argument("workflow_id", help=WORKFLOW_ID)
    p.add_argument("--step", required=True, help="target step key")
    p.add_argument("--name", required=True, help="signal name declared by the step")
    p.add_argument("--payload-version", required=True, help="payload version declared by the step")
    p.add_argument("--activation", type=int, required=True, help="target activation sequence (1 for the first)")
    p.add_argument("--correlation-key", required=True, help="exact correlation key (trailing spaces count)")
    p.add_argument("--payload", required=True, help="payload as JSON text, e.g. '{\"approved\": true}' or null")
    p.add_argument("--reason", required=True, help="why the signal is sent (1-1024 chars)")
    p.add_argument("--evidence-ref", help="optional reference to evidence (no whitespace)")
    p.add_argument("--idempotency-key", help=IDEMPOTENCY_KEY)
    p = _command(sg, "get", help="show a signal's current state (workflows:read)", func=cmd_signals_get)
    p.add_argument("workflow_id", help=WORKFLOW_ID)
    p.add_argument("signal_id", help="sig_...")
    p = _command(sg, "list", help="list an instance's signals, oldest first (workflows:read)",
                 description="List the signals sent to an instance in the order they were accepted, a page at a "
                             "time (--cursor with the next page's cursor): each with its status, disposition, target "
                             "and idempotency key; --json gives each payload as it was accepted. `weave signals "
                             "explain` says why each of a step's latest 100 did or did not win.",
                 func=cmd_signals_list)
    p.add_argument("workflow_id", help=WORKFLOW_ID)
    p.add_argument("--status", choices=["PENDING", "CONSUMED", "REJECTED", "EXPIRED"],
                   help="only signals in this status")
    p.add_argument("--limit", type=int, default=100, help="signals at most, 1-1000 (default 100)")
    p.add_argument("--cursor", help="the next_cursor of the previous page")
    p = _command(sg, "explain", help="why is this step's wait still open? (workflows:read)", func=cmd_signals_explain)
    p.add_argument("workflow_id", help=WORKFLOW_ID)
    p.add_argument("step_key", help=STEP_KEY)

    p = _command(sub, "orchestrator", help="run the scan loop daemon",
                 description="Scan due candidates and advance each in its own transaction. Any number may "
                             "run against one database. Stops cleanly on SIGTERM/SIGINT.",
                 func=cmd_orchestrator, token=False, namespace=False, daemon=True)
    p.add_argument("--batch", type=_count, default=100, help="candidates per scan, 1-10000 (default 100)")
    p.add_argument("--concurrency", type=_count, default=4, help="parallel advance connections (default 4)")
    p.add_argument("--idle-probe-ms", type=_count, default=20,
                   help="while nothing is due, the first sleep between probes; never past the next due time the "
                        "probe sees (default 20)")
    p.add_argument("--idle-max-ms", type=_count, default=200,
                   help="while nothing is due the sleep between probes doubles up to this: how long work that "
                        "another node makes due at once may wait (default 200)")
    p.add_argument("--node-id", help="name in logs (default: host:pid)")

    p = _command(sub, "worker", help="run a Pulse worker daemon",
                 description="Claim tasks from the given queues, run their handlers and report the outcomes. "
                             "Any number may run against one database. On SIGTERM/SIGINT it stops claiming and "
                             "lets running attempts finish within the grace period.",
                 epilog="The built-in http handler (http@1) calls only hosts listed in WEAVE_HTTP_ALLOWLIST.",
                 func=cmd_worker, token=False, namespace=False, daemon=True)
    p.add_argument("--handlers", action="append", metavar="MODULE[,MODULE]",
                   help="modules whose @handler functions to load (repeatable)")
    p.add_argument("--queue", action="append", required=True, metavar="QUEUE", type=_queue_names,
                   help=f"queue to serve ({NAME_RULE}; repeatable; a queue that does not exist yet is fine)")
    p.add_argument("--namespace", type=_namespace_name,
                   help="serve the queues of this namespace only (default: every namespace)")
    p.add_argument("--concurrency", type=_count, default=8, help="attempts run at once, 1-1000 (default 8)")
    p.add_argument("--lease-ms", type=int, default=30_000,
                   help="lease per attempt, renewed by heartbeats; at most 86400000 (default 30000)")
    p.add_argument("--heartbeat-ms", type=int, default=10_000, help="heartbeat interval (default 10000)")
    p.add_argument("--grace-ms", type=int, default=30_000,
                   help="on stop, how long running attempts may take to finish (default 30000)")
    p.add_argument("--worker-id", help="name recorded on attempts and in logs, never the same for two workers running "
                                       "at once (default: host:pid:random)")
    p.add_argument("--idle-max-ms", type=_count, default=800,
                   help="longest sleep between claims while nothing is queued; it starts at 50 ms after work and "
                        "doubles (default 800)")
    return parser


def _fail(args: argparse.Namespace, code: str, detail: str, exit_code: int, extra: str = "",
          errors_: list[dict] | None = None) -> int:
    if getattr(args, "json", False):
        print(json.dumps({"code": code, "detail": detail, **({"errors": errors_} if errors_ else {})}),
              file=sys.stderr)
    else:
        print(f"weave: {code}{extra}: {detail}", file=sys.stderr)
    return exit_code


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser(json_errors="--json" in (sys.argv[1:] if argv is None else argv))
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except CliError as exc:
        return _fail(args, exc.code, exc.detail, exc.exit_code)
    except settings.SettingInvalid as exc:
        return _fail(args, "CONFIG_INVALID", str(exc), EXIT_USAGE)
    except errors.SchemaMismatch as exc:  # an unknown database too: the engine's database at no level (errors.py)
        return _fail(args, exc.code, str(exc.detail), EXIT_FAILED)
    except errors.WeaveError as exc:
        exit_code = EXIT_CODES.get(exc.http_status, EXIT_FAILED)
        if isinstance(exc, errors.ValidationFailed):
            return _fail(args, exc.code, exc.detail, exit_code, f" [{exc.field_code}]", exc.errors)
        if exit_code == EXIT_CODES[404] and getattr(args, "namespace", None):
            # Another namespace's objects, and a namespace the token is not of, answer as missing ones: say where
            # the command looked (without WEAVE_NAMESPACE, in `default`).
            return _fail(args, exc.code, f"{exc.detail} (looked in namespace {args.namespace}, which --namespace or "
                                         "WEAVE_NAMESPACE chooses)", exit_code)
        return _fail(args, exc.code, exc.detail, exit_code)
    except pymysql.err.MySQLError as exc:
        if errors.errno_of(exc) in errors.LOGIN_REFUSED_ERRNOS:  # as the API answers it: unavailable (exit 7)
            said = f"({errors.errno_of(exc)}: {exc.args[-1] if exc.args else exc})"
            if errors.errno_of(exc) in errors.PRIVILEGE_REFUSED_ERRNOS:
                return _fail(args, "UNAVAILABLE", f"the database refused the user of {_dsn(args).redacted()} a "
                             f"privilege it needs {said}: grant it as docs/operations.md sets the users up",
                             EXIT_CODES[503])
            return _fail(args, "UNAVAILABLE", f"the database refused the login of {_dsn(args).redacted()} "
                         f"{said}: check the user and password of WEAVE_DSN (or --dsn)", EXIT_CODES[503])
        return _fail(args, "DATABASE_ERROR", f"the database answered {errors.errno_of(exc)}: "
                     f"{exc.args[-1] if exc.args else exc}", EXIT_FAILED)
    except OSError as exc:
        return _fail(args, "IO_ERROR", str(exc), EXIT_FAILED)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
