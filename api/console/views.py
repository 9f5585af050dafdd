"""Shaping for the console's pages: durations against the engine clock, graph order, the lateness chart.
Pure functions over the resource shapes the routines' wrappers answer; no SQL and no clock of their own."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from procedures.jsontext import Verbatim


def parse_time(value: str | None) -> dt.datetime | None:
    return None if value is None else dt.datetime.strptime(value, "%Y-%m-%dT%H:%M:%S.%fZ")


def duration(seconds: float) -> str:
    seconds = abs(seconds)
    if seconds < 1:
        return f"{int(seconds * 1000)} ms"
    parts, rest = [], int(seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if rest >= size or (unit == "s" and not parts):
            parts.append(f"{rest // size}{unit}")
            rest %= size
    return " ".join(parts[:2])


def time_left(at: str | None, now: dt.datetime) -> str | None:
    """'in 4m 10s' or 'overdue by 3s', measured on the engine clock the session read."""
    moment = parse_time(at)
    if moment is None:
        return None
    gap = (moment - now).total_seconds()
    return f"in {duration(gap)}" if gap >= 0 else f"passed {duration(gap)} ago"


def graph_order(document: dict | None, steps: list[dict]) -> list[dict]:
    """Steps in graph order (every step after the steps it waits for; document order among equals), each with
    the keys it waits for."""
    after = {s["key"]: list(s.get("after") or []) for s in (document or {}).get("steps", [])}
    by_key = {s["key"]: s for s in steps}
    placed: list[str] = []
    pending = [s["key"] for s in steps]
    while pending:
        ready = [k for k in pending if all(a in placed or a not in by_key for a in after.get(k, []))]
        take = ready[0] if ready else pending[0]
        placed.append(take)
        pending.remove(take)
    return [{**by_key[k], "after": after.get(k, [])} for k in placed]


# A kept value may be a megabyte (an input) or 256 KiB (a payload), and a page shows many: of a longer one, a page
# shows this many characters and says how many it left out.
SHOWN_CHARS = 8192


def pretty(value: Any) -> str:
    """A value as indented JSON for a page, cut past SHOWN_CHARS characters. A ``Verbatim`` value (read as kept, not
    parsed with the page's other rows) is parsed only here, one at a time."""
    if isinstance(value, Verbatim):
        value = json.loads(value.text)
    text = json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False, default=str)
    if len(text) <= SHOWN_CHARS:
        return text
    return f"{text[:SHOWN_CHARS]}\n… {len(text) - SHOWN_CHARS:,} more characters of this value are not shown"


def lateness_chart(rows: list[dict], width: int = 560, height: int = 200) -> dict:
    """Bars of the timer lateness histogram (cumulative buckets from weave_status, shown per bucket)."""
    buckets, previous = [], 0
    for row in rows:
        count = int(row["timers"]) - previous
        previous = int(row["timers"])
        le = row["le_seconds"]
        label = "> 300 s" if le is None else f"≤ {float(le):g} s"
        buckets.append({"label": label, "count": max(count, 0)})
    top = max([b["count"] for b in buckets] + [1])
    left, bottom, plot_h = 40, 30, height - 50
    slot = (width - left - 10) / max(len(buckets), 1)
    for i, bucket in enumerate(buckets):
        bar_h = round(plot_h * bucket["count"] / top, 1)
        bucket.update(x=round(left + i * slot + slot * 0.15, 1), w=round(slot * 0.7, 1), h=bar_h,
                      y=round(height - bottom - bar_h, 1), cx=round(left + i * slot + slot / 2, 1))
    return {"width": width, "height": height, "buckets": buckets, "top": top, "base_y": height - bottom,
            "label_y": height - bottom + 16, "left": left, "total": previous}


# What usually helps, per review reason code: the operations guide's table ("What each reason means and what usually
# helps"), in the few words a page has room for. tests/console/test_console_http.py holds the two to the same codes.
REVIEW_HELP = {
    "INSTANCE_DEADLINE": "New work was needed after the instance deadline: extend the deadline (the instance goes on "
                         "by itself), or cancel.",
    "TIMER_TRUNCATED": "The deadline cut the timer short: extend the deadline, then reactivate the step (the full "
                       "delay again, from now), or resolve it to accept the shorter wait.",
    "TASK_FAILED": "The handler failed for good (see last_error): fix the cause, then reactivate (a new task with "
                   "fresh attempts), or resolve with the output.",
    "TASK_UNKNOWN": "The worker's lease ran out, so the effect is unknown: check the external system; if it happened, "
                    "resolve with its result, if not, reactivate. A late report, if one came, is shown with the "
                    "step's task.",
    "TASK_EXPIRED": "No attempt started before the task's deadline (no worker for its queue, workers busy, or its "
                    "mutex key held; see why): start workers or free the key, then reactivate.",
    "POLL_FAILED": "A round's task failed, or expired before a worker took it (see kind and why): fix the handler, "
                   "the remote side or the workers, then reactivate, or resolve.",
    "POLL_UNKNOWN": "A round's effect is unknown (its lease ran out): check the remote side, then reactivate, or "
                    "resolve.",
    "POLL_INVALID_RESULT": "A round answered no valid result object (see invalid_because): fix the handler, then "
                           "reactivate, or resolve.",
    "POLL_REVIEW_VALUE": "The remote system answered a review status: decide, then resolve with the result, or "
                         "reactivate to ask again.",
    "POLL_ROUNDS_EXHAUSTED": "Still pending when the rounds ran out: continue with extra rounds, or reactivate, or "
                             "resolve.",
    "POLL_DEADLINE": "Still pending at the poll deadline: continue with a later poll deadline, or reactivate, or "
                     "resolve.",
    "POLL_DEADLINE_IN_FLIGHT": "The poll deadline came while a round ran: wait until its task settles, then continue, "
                               "reactivate or resolve.",
    "FINAL_RESULT_CONFLICT": "The poll's answer and its final signal disagree: find out which is true, and resolve "
                             "with it.",
    "SIGNAL_TIMEOUT": "No matching signal came before the deadline: the step's signals say why each did not win; then "
                      "reactivate (senders target the new activation) or resolve with the payload.",
    "ACCEPTANCE_PROOF_MISMATCH": "A stored signal no longer matches its acceptance's audit row: treat it as a "
                                 "security incident, then resolve or reactivate.",
    "OWNERSHIP_MISMATCH": "Rows that should point at each other do not (corruption, a bad restore, manual edits): "
                          "investigate, repair, then reactivate or resolve.",
    "ACTIVATION_FAILED": "The step's inputs could not be made from what is frozen (see detail): reactivating fails the "
                         "same way, so resolve the step, or cancel and start again with a corrected input.",
    "QUEUE_NOT_FOUND": "The queue the definition names is gone: create it again, then reactivate, or resolve.",
    "APP_NOT_FOUND": "The app the instance runs under is gone: create it again, then reactivate, or resolve.",
    "CANDIDATE_FAILING": "A decision failed three times in a row with the same error (see detail): fix what the error "
                         "names, then reactivate or resolve the step.",
}
