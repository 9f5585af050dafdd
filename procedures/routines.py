"""One thin wrapper per public routine. Business rules live in the routines (``procedures/*.sql``);
a wrapper only passes arguments and shapes the result sets into the resource shapes of the API."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from . import candidates, errors, jsontext
from .db import Connection as Conn
from .db import call, call_row

if TYPE_CHECKING:
    from .definitions import Definition


def rfc3339(value: dt.datetime | None) -> str | None:
    """Times leave the engine as RFC 3339 UTC with microseconds."""
    return None if value is None else value.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def from_rfc3339(text: str) -> dt.datetime:
    """An RFC 3339 time with a zone as the naive UTC datetime the routines take. ValueError when ``text`` is not one
    (a time without a zone would be read in the zone of the host), OverflowError when its zone moves it outside the
    years 1-9999 (9999-12-31T23:00:00-05:00 is in year 10000 in UTC)."""
    moment = dt.datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    if moment.tzinfo is None:
        raise ValueError(f"{text!r} has no zone")
    return moment.astimezone(dt.timezone.utc).replace(tzinfo=None)


def _json(text: Any, verbatim: bool = False) -> Any:
    """A kept JSON value: parsed, or with ``verbatim`` as its text (``jsontext.Verbatim``), for an answer that writes
    it back as it was kept."""
    if text is None:
        return None
    if isinstance(text, bytes | bytearray):
        text = text.decode("utf-8")
    return jsontext.Verbatim(text) if verbatim else json.loads(text)


# --- namespaces, credentials, apps, queues -------------------------------------------------------------
def namespace_bootstrap(conn: Conn, namespace: str) -> dict:
    """See procedures/admin/weave_namespace_bootstrap.sql."""
    return call_row(conn, "weave_namespace_bootstrap", namespace)


def credential_create(conn: Conn, token: str, namespace: str, actor: str, scopes: list[str] | str,
                      queues: list[str] | str = "*", expires_at: dt.datetime | None = None,
                      idempotency_key: str | None = None) -> dict:
    """See procedures/admin/weave_credential_create.sql. ``expires_at``: UTC, when the credential stops
    authenticating (None: never). With ``idempotency_key``, a key used before answers the credential it made
    (``replayed``), whose token was shown once: ``token`` is None."""
    scopes = scopes if isinstance(scopes, str) else ",".join(scopes)
    queues = queues if isinstance(queues, str) else ",".join(queues)
    row = call_row(conn, "weave_credential_create", token, namespace, actor, scopes, queues, expires_at,
                   idempotency_key)
    return {**row, "scopes": row["scopes"].split(","), "queues": row["queues"].split(","),
            "expires_at": rfc3339(row["expires_at"]), "replayed": bool(row["replayed"])}


def credential_disable(conn: Conn, token: str, namespace: str, credential_id: str) -> dict:
    """See procedures/admin/weave_credential_disable.sql."""
    return call_row(conn, "weave_credential_disable", token, namespace, credential_id)


def credential_enable(conn: Conn, token: str, namespace: str, credential_id: str) -> dict:
    """See procedures/admin/weave_credential_enable.sql."""
    return call_row(conn, "weave_credential_enable", token, namespace, credential_id)


def app_put(conn: Conn, token: str, namespace: str, name: str, max_in_flight: int,
            status: str | None = None, idempotency_key: str | None = None) -> dict:
    """See procedures/admin/weave_app_put.sql. With ``idempotency_key``, a key used before answers its first put
    again (``replayed``) and changes nothing."""
    row = call_row(conn, "weave_app_put", token, namespace, name, max_in_flight, status, idempotency_key)
    return {**row, "replayed": bool(row["replayed"])}


def queue_put(conn: Conn, token: str, namespace: str, name: str, capacity: int,
              idempotency_key: str | None = None) -> dict:
    """See procedures/admin/weave_queue_put.sql. With ``idempotency_key``, as ``app_put``."""
    row = call_row(conn, "weave_queue_put", token, namespace, name, capacity, idempotency_key)
    return {**row, "replayed": bool(row["replayed"])}


def _dated(row: dict) -> dict:
    return {**row, "created_at": rfc3339(row["created_at"]), "updated_at": rfc3339(row["updated_at"])}


def _credential(row: dict) -> dict:
    return {**row, "scopes": row["scopes"].split(","), "queues": row["queues"].split(","),
            "created_at": rfc3339(row["created_at"]), "disabled_at": rfc3339(row["disabled_at"]),
            "expires_at": rfc3339(row["expires_at"])}


def _definition(row: dict) -> dict:
    return {**row, "queues": [q for q in row["queues"].split(",") if q], "created_at": rfc3339(row["created_at"])}


# A configuration list's routine, with how each of its rows is shown.
_PAGED: dict[str, tuple[str, Callable[[dict], dict]]] = {
    "definitions": ("weave_definition_list", _definition),
    "apps": ("weave_app_list", _dated),
    "queues": ("weave_queue_list", _dated),
    "credentials": ("weave_credential_list", _credential),
}


def config_page(conn: Conn, token: str, namespace: str, listing: str, *, limit: int = 100,
                cursor: str | None = None) -> dict:
    """A page of a configuration list (``definitions``, ``apps``, ``queues`` or ``credentials``; see their routines):
    ``{"items": [...], "next_cursor": ...}``, the cursor None on the last page."""
    routine, shown = _PAGED[listing]
    rows, more = call(conn, routine, token, namespace, limit, cursor)
    return {"items": [shown(r) for r in rows], "next_cursor": more[0]["next_cursor"]}


def config_list(conn: Conn, token: str, namespace: str, listing: str) -> list[dict]:
    """Every row of a configuration list, read page by page (each page one short read)."""
    items: list[dict] = []
    cursor: str | None = None
    while True:
        page = config_page(conn, token, namespace, listing, limit=1000, cursor=cursor)
        items += page["items"]
        cursor = page["next_cursor"]
        if cursor is None:
            return items


def app_list(conn: Conn, token: str, namespace: str) -> list[dict]:
    """Every app of the namespace (procedures/admin/weave_app_list.sql)."""
    return config_list(conn, token, namespace, "apps")


def queue_list(conn: Conn, token: str, namespace: str) -> list[dict]:
    """Every queue of the namespace (procedures/admin/weave_queue_list.sql)."""
    return config_list(conn, token, namespace, "queues")


def credential_list(conn: Conn, token: str, namespace: str) -> list[dict]:
    """Every credential of the namespace (procedures/admin/weave_credential_list.sql): never a token."""
    return config_list(conn, token, namespace, "credentials")


# --- console sessions --------------------------------------------------------------------------------------
def console_session_open(conn: Conn, token: str, namespace: str, session_hash: str, sealed_token: bytes,
                         ttl_s: int) -> dict:
    """See procedures/admin/weave_console_session_open.sql."""
    row = call_row(conn, "weave_console_session_open", token, namespace, session_hash, sealed_token, ttl_s)
    return {**row, "scopes": row["scopes"].split(","), "queues": row["queues"].split(",")}


def console_session_get(conn: Conn, session_hash: str) -> dict:
    """See procedures/admin/weave_console_session_get.sql."""
    row = call_row(conn, "weave_console_session_get", session_hash)
    return {**row, "scopes": row["scopes"].split(","), "queues": row["queues"].split(","),
            "sealed_token": bytes(row["sealed_token"])}


def console_session_close(conn: Conn, session_hash: str) -> bool:
    """See procedures/admin/weave_console_session_close.sql."""
    return bool(call_row(conn, "weave_console_session_close", session_hash)["closed"])


# --- definitions -----------------------------------------------------------------------------------------
def definition_publish(conn: Conn, token: str, namespace: str, definition: Definition,
                       idempotency_key: str | None = None) -> dict:
    """Publish a validated ``procedures.definitions.Definition``; see procedures/admin/weave_definition_publish.sql.
    Queues that do not exist are a ``ValidationFailed`` (``QUEUE_NOT_FOUND``) with an error at the queue of each
    step that uses one, as the validator reports a document's other problems. With ``idempotency_key``, a key used
    before answers its first publish again (``replayed``)."""
    try:
        row = call_row(conn, "weave_definition_publish", token, namespace, definition.canonical_json,
                       definition.compiled_json, ",".join(definition.queues), idempotency_key)
    except errors.ValidationFailed as exc:
        if exc.field_code != "QUEUE_NOT_FOUND":
            raise
        raise _queues_not_found(exc, definition) from None
    return {"name": row["name"], "version": row["version"], "digest": row["digest"], "created": bool(row["created"]),
            "replayed": bool(row["replayed"])}


def _queues_not_found(exc: errors.ValidationFailed, definition: Definition) -> errors.ValidationFailed:
    """The routine's refusal, which lists the missing queues ("...: a,b" or "...: a,b,..." when more did not fit),
    as one error per step using one of them, at ``steps[i].queue``."""
    named = exc.detail.rpartition(": ")[2].split(",")
    more = named[-1] == "..."
    missing = set(named[:-1] if more else named)
    found = [{"field": f"steps[{i}].queue", "code": "QUEUE_NOT_FOUND",
              "message": f"queue {step['queue']} does not exist in the namespace; create it first"}
             for i, step in enumerate(definition.steps) if step.get("queue") in missing]
    if more:
        found.append({"field": "steps", "code": "QUEUE_NOT_FOUND",
                      "message": "more queues of the definition do not exist than one answer names"})
    return errors.ValidationFailed(str(exc), field_code="QUEUE_NOT_FOUND", errors=found or None)


def definition_list(conn: Conn, token: str, namespace: str) -> list[dict]:
    """Every definition of the namespace with its latest version (procedures/admin/weave_definition_list.sql)."""
    return config_list(conn, token, namespace, "definitions")


def definition_get(conn: Conn, token: str, namespace: str, name: str, version: int | None = None) -> dict:
    """See procedures/admin/weave_definition_get.sql."""
    row = call_row(conn, "weave_definition_get", token, namespace, name, version)
    document = _json(row["document"])
    return {**document, "version": row["version"], "digest": row["digest"],
            "created_at": rfc3339(row["created_at"])}


# --- instances ---------------------------------------------------------------------------------------------
def instance_start(conn: Conn, token: str, namespace: str, *, definition: str, app: str, input: Any = None,
                   idempotency_key: str, version: int | None = None, deadline_at: dt.datetime | None = None,
                   deadline_ms: int | None = None, business_key: str | None = None,
                   input_json: str | None = None, verbatim: bool = False) -> dict:
    """See procedures/instances/weave_instance_start.sql. ``input_json`` passes the input text as received. The
    answer's ``instance`` is the started instance as ``instance_get`` shows it (``verbatim`` as there)."""
    text = input_json if input_json is not None else json.dumps({} if input is None else input,
                                                                separators=(",", ":"), ensure_ascii=False)
    sets = call(conn, "weave_instance_start", token, namespace, definition, version, app, text,
                deadline_at, deadline_ms, business_key, idempotency_key)
    if not sets or not sets[0]:
        raise errors.WeaveError("INTERNAL: weave_instance_start answered no row")
    instance = _instance_view(sets, verbatim)
    return {"workflow_id": instance["workflow_id"], "status": instance["status"],
            "created": bool(sets[0][0]["created"]), "instance": instance}


def _wait_view(row: dict) -> dict | None:
    if row["wait_kind"] is None:
        return None
    view = {"kind": row["wait_kind"], "status": row["wait_status"],
            "winner_signal_id": row["winner_signal_id"], "settled_at": rfc3339(row["settled_at"])}
    if row["wait_kind"] == "TIMER":
        view["due_at"] = rfc3339(row["due_at"])
    else:
        view["deadline_at"] = rfc3339(row["wait_deadline_at"])
    return view


def instance_get(conn: Conn, token: str, namespace: str, workflow_id: str, *, verbatim: bool = False) -> dict:
    """See procedures/instances/weave_instance_get.sql; shaped as the 07-api instance resource. With ``verbatim``,
    the kept JSON values (input, outputs, round results, review details) are their text (``jsontext.Verbatim``),
    for an answer that gives them as they were kept."""
    return _instance_view(call(conn, "weave_instance_get", token, namespace, workflow_id), verbatim)


def _instance_view(sets: list[list[dict]], verbatim: bool = False) -> dict:
    """The five result sets of _weave_instance_show as the 07-api instance resource."""
    head, step_rows, round_rows, reasons, checkpoints = sets
    if not head:  # found and authorised, but not read whole: a row it joins was deleted by hand
        raise errors.InvalidState("INVALID_STATE: the instance names an app that does not exist "
                                  "(`weave status --check` lists such rows)")
    inst = head[0]
    rounds: dict[str, list] = {}
    for r in round_rows:
        rounds.setdefault(r["step_key"], []).append(
            {"number": r["round_no"], "task_id": r["task_id"], "outcome": r["outcome"],
             "result": _json(r["result"], verbatim), "result_at": rfc3339(r["result_at"])})
    steps: dict[str, dict] = {}
    for row in step_rows:
        step = steps.get(row["step_key"])
        if step is None:
            step = steps[row["step_key"]] = {
                "key": row["step_key"], "type": row["type"], "status": row["status"],
                "activation_sequence": row["activation_seq"], "output": _json(row["output"], verbatim),
                "started_at": rfc3339(row["started_at"]), "wait": None, "final_wait": None, "poll": None}
            if row["poll_state"] is not None:
                step["poll"] = {"state": row["poll_state"], "rounds_used": row["rounds_used"],
                                "max_rounds": row["max_rounds"], "next_poll_at": rfc3339(row["next_poll_at"]),
                                "poll_deadline": rfc3339(row["poll_deadline"]),
                                "current_task_id": row["current_task_id"],
                                "rounds": rounds.get(row["step_key"], [])}
        wait = _wait_view(row)
        if wait is not None:
            step["final_wait" if wait["kind"] == "POLL_FINAL" else "wait"] = wait
    return {
        "workflow_id": inst["workflow_id"], "namespace": inst["namespace"], "app": inst["app"],
        "definition": {"name": inst["definition_name"], "version": inst["definition_version"]},
        "status": inst["status"], "control": inst["control"], "gate": inst["gate"],
        "deadline_at": rfc3339(inst["deadline_at"]), "business_key": inst["business_key"],
        "input": _json(inst["input"], verbatim),
        "review_reasons": [{"code": r["code"], "step_key": r["step_key"],  # '' and 0 are NULL in the set
                            "activation_sequence": r["activation_seq"], "detail": _json(r["detail"], verbatim),
                            "opened_at": rfc3339(r["opened_at"])} for r in reasons],
        "created_at": rfc3339(inst["created_at"]), "updated_at": rfc3339(inst["updated_at"]),
        "finished_at": rfc3339(inst["finished_at"]),
        "deferred": _deferred_view(checkpoints),
        "steps": list(steps.values()),
        "checkpoints": [{"step_key": c["step_key"] or None, "kind": c["kind"], "due_at": rfc3339(c["due_at"]),
                         "available_at": rfc3339(c["available_at"]), "attempts": c["attempts"],
                         "last_error": c["last_error"], "deferred_reason": c["deferred_reason"]}
                        for c in checkpoints],
    }


def _deferred_view(checkpoints: list[dict]) -> dict | None:
    """The longest-standing deferred check of an instance (R-18): why, since when, when it is looked at again."""
    deferred = [c for c in checkpoints if c["deferred_reason"] is not None]
    if not deferred:
        return None
    row = min(deferred, key=lambda c: (c["deferred_since"], c["step_key"]))
    return {"reason": row["deferred_reason"], "step_key": row["step_key"] or None,
            "since": rfc3339(row["deferred_since"]), "next_check_at": rfc3339(row["available_at"]),
            "attempts": row["deferrals"], "detail": row["last_error"]}


def instance_events(conn: Conn, token: str, namespace: str, workflow_id: str, after: int = 0,
                    limit: int = 100, *, verbatim: bool = False) -> list[dict]:
    """See procedures/instances/weave_instance_events.sql. ``verbatim``: each event's data as kept (a resolve's
    output in its STEP_RESOLVED event is written back with every digit, never parsed)."""
    rows = call(conn, "weave_instance_events", token, namespace, workflow_id, after, limit)[0]
    return [{"seq": r["seq"], "type": r["type"], "step_key": r["step_key"] or None,
             "activation_sequence": r["activation_seq"] or None, "occurred_at": rfc3339(r["occurred_at"]),
             "data": _json(r["data"], verbatim)} for r in rows]


def step_rounds(conn: Conn, token: str, namespace: str, workflow_id: str, step_key: str, *,
                activation_sequence: int | None = None, after: int = 0, limit: int = 100,
                verbatim: bool = False) -> dict:
    """See procedures/instances/weave_step_rounds.sql: a page of a POLL activation's rounds (the step's latest
    activation unless ``activation_sequence`` names one), with ``next_after`` to read on from. ``verbatim`` as for
    ``instance_get``."""
    (head,), rows = call(conn, "weave_step_rounds", token, namespace, workflow_id, step_key, activation_sequence,
                         after, limit)
    rounds = [{"number": r["round_no"], "task_id": r["task_id"], "outcome": r["outcome"],
               "result": _json(r["result"], verbatim), "result_at": rfc3339(r["result_at"]),
               "created_at": rfc3339(r["created_at"])} for r in rows]
    return {"step_key": head["step_key"], "activation_sequence": head["activation_seq"],
            "latest_activation_sequence": head["latest_activation_seq"],
            "poll_state": head["poll_state"], "rounds_used": head["rounds_used"], "max_rounds": head["max_rounds"],
            "rounds": rounds, "next_after": rounds[-1]["number"] if rounds else after,
            # Rounds are numbered 1..rounds_used: past the last one given, more follow exactly when it is not the last.
            "more": bool(rounds) and rounds[-1]["number"] < (head["rounds_used"] or 0)}


def instance_list(conn: Conn, token: str, namespace: str, *, status: str | None = None,
                  definition: str | None = None, control: str | None = None, business_key: str | None = None,
                  review_code: str | None = None, deferred: bool = False, limit: int = 50,
                  cursor: str | None = None) -> dict:
    """See procedures/instances/weave_instance_list.sql. ``cursor`` is the opaque value of a previous page; one
    that no page answered is refused (CURSOR_INVALID). A full page has a next cursor only when more follow."""
    # ASCII digits only: str.isdigit() also accepts '²' and the like, which int() then refuses.
    if cursor is not None and not (cursor.isascii() and cursor.isdigit() and len(cursor) <= 19):
        raise errors.ValidationFailed("CURSOR_INVALID: not a cursor of this list", field_code="CURSOR_INVALID",
                                      field="cursor")
    before = int(cursor) if cursor is not None else None
    filters = (status, definition, control, business_key, review_code, 1 if deferred else 0)
    rows = call(conn, "weave_instance_list", token, namespace, *filters, limit, before)[0]
    items = [{"workflow_id": r["workflow_id"], "definition": {"name": r["definition_name"],
                                                              "version": r["definition_version"]},
              "status": r["status"], "control": r["control"], "gate": r["gate"],
              "deadline_at": rfc3339(r["deadline_at"]), "business_key": r["business_key"],
              "created_at": rfc3339(r["created_at"]), "updated_at": rfc3339(r["updated_at"])} for r in rows]
    next_cursor = None
    if len(rows) == limit:
        last = rows[-1]["cursor_id"]
        if call(conn, "weave_instance_list", token, namespace, *filters, 1, last)[0]:
            next_cursor = str(last)
    return {"items": items, "next_cursor": next_cursor}


def review_queue(conn: Conn, token: str, namespace: str, *, limit: int = 50) -> dict:
    """See procedures/instances/weave_review_queue.sql: ``{"items": [...], "in_review": n}``, the instance waiting
    longest first, each with its open ``review_reasons`` and ``waiting_since``."""
    rows = call(conn, "weave_review_queue", token, namespace, limit)[0]

    def opened(text: str) -> str | None:  # a time in a JSON document: '2026-12-07 06:40:00.123456'
        return rfc3339(dt.datetime.fromisoformat(text))

    items = [{"workflow_id": r["workflow_id"], "definition": {"name": r["definition_name"],
                                                              "version": r["definition_version"]},
              "business_key": r["business_key"], "waiting_since": rfc3339(r["waiting_since"]),
              "updated_at": rfc3339(r["updated_at"]),
              "review_reasons": [{**reason, "opened_at": opened(reason["opened_at"])}
                                 for reason in _json(r["reasons"]) or []]} for r in rows]
    return {"items": items, "in_review": rows[0]["in_review"] if rows else 0}


def audit_list(conn: Conn, token: str, namespace: str, *, workflow_id: str | None = None, action: str | None = None,
               limit: int = 50, cursor: str | None = None, verbatim: bool = False) -> dict:
    """See procedures/admin/weave_audit_list.sql: ``{"items": [...], "next_cursor": ...}``, newest first (``details``
    parsed, or with ``verbatim`` as kept)."""
    rows, more = call(conn, "weave_audit_list", token, namespace, workflow_id, action, limit, cursor)
    items = [{**r, "details": _json(r["details"], verbatim), "accepted_at": rfc3339(r["accepted_at"]),
              "deadline_at": rfc3339(r["deadline_at"]), "created_at": rfc3339(r["created_at"])} for r in rows]
    return {"items": items, "next_cursor": more[0]["next_cursor"]}


def instances_purge(conn: Conn, token: str, namespace: str, finished_before: dt.datetime, *, after: str | None = None,
                    limit: int = 100, reason: str | None = None, only: list[str] | dict[str, int] | None = None,
                    dry_run: bool = False) -> dict:
    """See procedures/admin/weave_instances_purge.sql: one window of a retention run."""
    row = call_row(conn, "weave_instances_purge", token, namespace, finished_before, after, limit, reason,
                   None if only is None else json.dumps(only), dry_run)
    return {**row, "workflow_ids": _json(row["workflow_ids"]), "held_ids": _json(row["held_ids"])}


def status(conn: Conn) -> dict:
    """See procedures/instances/weave_status.sql: the figures of ``/metrics``, ``weave status`` and the console.
    The backlog has a row for every candidate class of the registry, in its order (0 when none is due)."""
    backlog, tasks, review, lateness, polls, deferred, failing, instances, expiring, heads = call(conn, "weave_status")
    due = {row["class"]: row for row in backlog}
    backlog = [due.get(c.name, {"class": c.name, "due": 0, "oldest_due_at": None, "lag_ms": 0})
               for c in candidates.CLASSES]
    # A row per review code, then the row of them all (code NULL); none at all when nothing is in review.
    reviewed = next((r for r in review if r["code"] is None), {"open_review_reasons": 0, "instances_in_review": 0})
    return {"backlog": backlog, "tasks": {r["status"]: r["tasks"] for r in tasks},
            "open_review_reasons": reviewed["open_review_reasons"],
            "instances_in_review": reviewed["instances_in_review"],
            "review_by_code": {r["code"]: {"open_review_reasons": r["open_review_reasons"],
                                           "instances_in_review": r["instances_in_review"]}
                               for r in review if r["code"] is not None},
            "now_at": polls[0]["now_at"],
            "lateness": lateness, "polls_in_flight": polls[0]["polls_in_flight"],
            "polls_waiting": polls[0]["polls_waiting"], "signals_pending": polls[0]["signals_pending"],
            "tasks_overdue": polls[0]["tasks_overdue"],
            "queues_waiting": [{"namespace": r["namespace"], "queue": r["queue"],
                                "next_ready_at": rfc3339(r["next_ready_at"]), "wait_ms": float(r["wait_ms"])}
                               for r in heads],
            "deferred": {r["reason"]: r["instances"] for r in deferred},
            "deferred_oldest_ms": {r["reason"]: float(r["oldest_ms"] or 0) for r in deferred},
            "failing": {r["class"]: {"failing": int(r["failing"]), "repeated": int(r["repeated"])} for r in failing},
            "instances": {r["status"]: {"instances": r["instances"], "paused": int(r["paused"])} for r in instances},
            "expiring_credentials": [{**r, "expires_at": rfc3339(r["expires_at"])} for r in expiring]}


# --- control -------------------------------------------------------------------------------------------------
def _acted(conn: Conn, routine: str, *args: Any, verbatim: bool = False) -> dict:
    """An operator action's answer: its own row, and under ``instance`` the instance as it is now (the action's
    result sets 2-6, shaped as ``instance_get``'s, ``verbatim`` as there)."""
    sets = call(conn, routine, *args)
    return {**sets[0][0], "instance": _instance_view(sets[1:6], verbatim)}


def instance_pause(conn: Conn, token: str, namespace: str, workflow_id: str, reason: str, idempotency_key: str,
                   *, verbatim: bool = False) -> dict:
    """See procedures/control/weave_instance_pause.sql."""
    return _acted(conn, "weave_instance_pause", token, namespace, workflow_id, reason, idempotency_key,
                  verbatim=verbatim)


def instance_resume(conn: Conn, token: str, namespace: str, workflow_id: str, reason: str,
                    idempotency_key: str, *, verbatim: bool = False) -> dict:
    """See procedures/control/weave_instance_resume.sql."""
    return _acted(conn, "weave_instance_resume", token, namespace, workflow_id, reason, idempotency_key,
                  verbatim=verbatim)


def instance_deadline(conn: Conn, token: str, namespace: str, workflow_id: str, reason: str, idempotency_key: str,
                      *, deadline_at: dt.datetime | None = None, extend_ms: int | None = None,
                      verbatim: bool = False) -> dict:
    """See procedures/control/weave_instance_deadline.sql."""
    return _acted(conn, "weave_instance_deadline", token, namespace, workflow_id, deadline_at, extend_ms, reason,
                    idempotency_key, verbatim=verbatim)


def instance_retry(conn: Conn, token: str, namespace: str, workflow_id: str, reason: str, idempotency_key: str,
                   *, verbatim: bool = False) -> dict:
    """See procedures/control/weave_instance_retry.sql. ``steps``: the keys of the steps that went on."""
    answer = _acted(conn, "weave_instance_retry", token, namespace, workflow_id, reason, idempotency_key,
                    verbatim=verbatim)
    return {**answer, "steps": json.loads(answer["steps"])}


def instance_cancel(conn: Conn, token: str, namespace: str, workflow_id: str, reason: str,
                    idempotency_key: str, *, verbatim: bool = False) -> dict:
    """See procedures/control/weave_instance_cancel.sql."""
    return _acted(conn, "weave_instance_cancel", token, namespace, workflow_id, reason, idempotency_key,
                  verbatim=verbatim)


def step_reactivate(conn: Conn, token: str, namespace: str, workflow_id: str, step_key: str, reason: str,
                    idempotency_key: str, *, timeout_ms: int | None = None, activation_sequence: int | None = None,
                    verbatim: bool = False) -> dict:
    """See procedures/control/weave_step_reactivate.sql. ``activation_sequence``: the activation the action is meant
    for (another one in review is refused, INVALID_STATE)."""
    return _acted(conn, "weave_step_reactivate", token, namespace, workflow_id, step_key, timeout_ms, reason,
                    idempotency_key, activation_sequence, verbatim=verbatim)


def step_resolve(conn: Conn, token: str, namespace: str, workflow_id: str, step_key: str, reason: str,
                 idempotency_key: str, *, output: Any = None, evidence_ref: str | None = None,
                 output_json: str | None = None, activation_sequence: int | None = None,
                 verbatim: bool = False) -> dict:
    """See procedures/control/weave_step_resolve.sql. ``output_json`` passes the output text as received;
    ``activation_sequence`` as for ``step_reactivate``."""
    text = output_json if output_json is not None else json.dumps(output, separators=(",", ":"), ensure_ascii=False)
    return _acted(conn, "weave_step_resolve", token, namespace, workflow_id, step_key, text, evidence_ref, reason,
                    idempotency_key, activation_sequence, verbatim=verbatim)


def step_continue(conn: Conn, token: str, namespace: str, workflow_id: str, step_key: str, reason: str,
                  idempotency_key: str, *, extra_rounds: int | None = None,
                  poll_deadline_ms: int | None = None, activation_sequence: int | None = None,
                  verbatim: bool = False) -> dict:
    """See procedures/control/weave_step_continue.sql; ``activation_sequence`` as for ``step_reactivate``."""
    return _acted(conn, "weave_step_continue", token, namespace, workflow_id, step_key, extra_rounds,
                    poll_deadline_ms, reason, idempotency_key, activation_sequence, verbatim=verbatim)


LATENCY_BUCKETS = (0.1, 0.5, 1.0, 5.0, 30.0, 300.0)


def metrics_fold(conn: Conn) -> bool:
    """See procedures/instances/weave_metrics_fold.sql: the sums behind ``engine_metrics`` brought up to date, without
    waiting for any lock (the session's lock wait at 0 for the call). False when a lock was held (another fold, a
    row not committed yet), another node's fold conflicted, or the server is read-only (a replica, a primary fenced
    for a failover) or refuses writes by a setting: nothing folded, and ``engine_metrics`` counts those rows from the
    rows meanwhile."""
    return _fold(conn) is not None


def _fold(conn: Conn) -> bool | None:
    """One fold without waiting for any lock: whether it reached its horizon, or None when a lock was held."""
    with conn.cursor() as cur:
        cur.execute("SET SESSION innodb_lock_wait_timeout = 0")
    try:
        return bool(call(conn, "weave_metrics_fold")[0][0]["caught_up"])
    except errors.TransientDatabaseError as exc:
        if exc.__cause__ is None or errors.errno_of(exc.__cause__) not in FOLD_LOCKED:
            raise
        return None
    finally:
        with conn.cursor() as cur:
            cur.execute("SET SESSION innodb_lock_wait_timeout = DEFAULT")


# A lock held (not waited for), a conflict with another node's fold, or a read-only server (1290): /metrics still
# answers, counting from the rows what the fold would have added.
FOLD_LOCKED = frozenset({1205, 1213, 1290, *errors.SETTING_REFUSED_ERRNOS})


def metrics_catch_up(conn: Conn, calls: int = 1000) -> bool:
    """Folds until the sums of /metrics reach the fold's horizon (two minutes ago): a fold adds at most 50,000 rows of
    each kind. True once caught up; False when a fold found a lock held (another fold, a transaction not committed
    yet) and left the rest to a later one."""
    for _ in range(calls):
        caught_up = _fold(conn)
        if caught_up is None:
            return False
        if caught_up:
            return True
    return False


def engine_metrics(conn: Conn) -> dict:
    """See procedures/instances/weave_metrics.sql: decisions by kind and result with their latency buckets
    (cumulative, ``LATENCY_BUCKETS`` seconds), signals by status and disposition, poll rounds by outcome. Folds
    first (``metrics_fold``), so that the read is of the sums and the last minutes' rows."""
    metrics_fold(conn)
    decisions, sigs, rounds = call(conn, "weave_metrics")
    columns = ("le_0_1", "le_0_5", "le_1", "le_5", "le_30", "le_300")
    return {
        "decisions": [{"kind": r["kind"], "result": r["result"], "count": int(r["decisions"]),
                       "sum": float(r["latency_seconds_sum"]),
                       "buckets": [(le, int(r[c] or 0)) for le, c in zip(LATENCY_BUCKETS, columns, strict=True)]}
                      for r in decisions],
        "signals": [(r["status"], r["disposition"], int(r["signals"])) for r in sigs],
        "rounds": {r["outcome"]: int(r["rounds"]) for r in rounds},
    }
