"""The daemons' logs: one JSON object per line, every string in it text a log pipeline can carry."""

from __future__ import annotations

import io
import json
import logging

from procedures.logs import JsonFormatter


def logged(emit) -> list[dict]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    log = logging.getLogger("weave.test-logs")
    log.handlers[:], log.propagate, log.level = [handler], False, logging.INFO
    emit(log)
    lines = stream.getvalue().splitlines()
    entries = [json.loads(line) for line in lines]
    for line, entry in zip(lines, entries, strict=True):
        line.encode("ascii")  # escaped: whatever the terminal's or journal's encoding
        json.dumps(entry, ensure_ascii=False).encode("utf-8")  # every string decoded from it is text
    return entries


def test_a_lone_surrogate_in_a_message_a_field_or_an_exception_stays_one_line_of_text():
    def emit(log: logging.Logger) -> None:
        log.info("attempt ended", extra={"fields": {"error": "open('/data/\udcff.csv')\nfailed",
                                                    "attempts": [1, "\ud800"], "n": {"k\udfff": 1, 7: "é"}}})
        try:
            raise OSError("cannot read /data/\udcff.csv\nretrying")
        except OSError:
            log.exception("attempt crashed in the worker \ud800")

    ended, crashed = logged(emit)
    assert ended["error"] == "open('/data/\\udcff.csv')\nfailed" and ended["attempts"] == [1, "\\ud800"]
    assert ended["n"] == {"k\\udfff": 1, "7": "é"}
    assert crashed["msg"] == "attempt crashed in the worker \\ud800"
    assert crashed["exc"].endswith("OSError: cannot read /data/\\udcff.csv\nretrying")
