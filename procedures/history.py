"""An instance's history as rows: what a retention run archives before ``weave_instances_purge`` removes it.

Every row of an instance, in every table that holds one (the tables ``weave_instances_purge`` removes from), read
in one consistent snapshot and written as one JSON line per instance, so that an archive can be read (or loaded
back) without the engine. Rows are kept as the tables hold them: times as ``YYYY-MM-DD HH:MM:SS.ffffff`` UTC,
text as text, and bytes that are not UTF-8 as ``{"base64": ...}``.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
from typing import IO, Any

from .db import Connection

# The instance's own tables, found by instance_id; then Pulse's, found through the instance's tasks.
BY_INSTANCE = ("weave_instances", "weave_steps", "weave_activations", "weave_waits", "weave_poll_states",
               "weave_poll_rounds", "pulse_tasks", "pulse_inbox", "weave_signals", "weave_pending_advances",
               "weave_review_reasons", "weave_events", "weave_audit")
BY_TASK = ("pulse_attempts", "pulse_permits", "pulse_late_reports")
# Each table's rows in the order of its primary key (events: by instance, then seq).
KEY = {"weave_events": "instance_id, seq", "weave_poll_states": "activation_id", "pulse_permits": "attempt_id"}


def _value(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S.%f")
    if isinstance(value, bytes | bytearray):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            return {"base64": base64.b64encode(value).decode("ascii")}
    return value


def rows_of(conn: Connection, workflow_ids: list[str]) -> dict[str, dict[str, list[dict]]]:
    """Every row of each instance named, table by table, read in one snapshot (its own transaction)."""
    ids = [int(w.removeprefix("wf_")) for w in workflow_ids]
    found: dict[int, dict[str, list[dict]]] = {i: {} for i in ids}
    if not ids:
        return {}
    marks = ", ".join(["%s"] * len(ids))
    with conn.cursor() as cur:
        cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY")
    try:
        with conn.cursor() as cur:
            for table in BY_INSTANCE:
                column = "id" if table == "weave_instances" else "instance_id"
                cur.execute(f"SELECT * FROM {table} WHERE {column} IN ({marks}) ORDER BY {KEY.get(table, 'id')}", ids)
                for row in cur.fetchall():
                    found[row[column]].setdefault(table, []).append({k: _value(v) for k, v in row.items()})
            for table in BY_TASK:
                order = KEY.get(table, "id")
                cur.execute(f"SELECT t.instance_id AS _instance, x.* FROM pulse_tasks t JOIN {table} x "
                            f"ON x.task_id = t.id WHERE t.instance_id IN ({marks}) ORDER BY x.{order}", ids)
                for row in cur.fetchall():
                    instance = row.pop("_instance")
                    found[instance].setdefault(table, []).append({k: _value(v) for k, v in row.items()})
    finally:
        conn.commit()
    return {f"wf_{i}": tables for i, tables in found.items()}


def write(out: IO[str], namespace: str, rows: dict[str, dict[str, list[dict]]]) -> None:
    """One JSON line per instance: its namespace, its id and its rows by table."""
    for workflow_id, tables in rows.items():
        out.write(json.dumps({"namespace": namespace, "workflow_id": workflow_id, "tables": tables},
                             ensure_ascii=False, separators=(",", ":")) + "\n")
