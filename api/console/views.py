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


