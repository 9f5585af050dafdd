"""The candidate classes: what the scan proposes, which routine advances one candidate, and whether a
failure is booked (R-10, R-12). The scan loop, ``weave status`` and ``/metrics`` all read this registry;
adding a class means adding it here and to ``weave_scan`` (and ``weave_status``), which a contract test
keeps in step."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CandidateClass:
    name: str
    advancer: str  # the routine that advances one candidate of the class, in its own transaction
    bookkept: bool  # failures recorded with weave_candidate_fail; the others come back in the next scan
    what: str  # what a due candidate is, for status and metric help texts
    listed: bool = False  # weave_candidates_advance takes lists of the class (each candidate its own transaction)
    table: str | None = None  # its rows, each naming its instance (instance_id): the classes whose advance skips a
    # held instance (BUSY)


CLASSES: tuple[CandidateClass, ...] = (
    CandidateClass("INBOX", "weave_inbox_consume", True, "task outcomes not yet applied to their instance", True,
                   "pulse_inbox"),
    CandidateClass("CHECKPOINT", "weave_checkpoint_advance", True, "checkpoints due (timers, polls, roots)", True,
                   "weave_pending_advances"),
    CandidateClass("SIGNAL", "weave_signal_process", True, "accepted signals not yet consumed or rejected",
                   table="weave_signals"),
    CandidateClass("LEASE", "pulse_lease_recover", False, "running attempts whose lease ran out"),
    CandidateClass("TASK_EXPIRY", "pulse_task_expire", False, "queued tasks past their deadline"),
)
BY_NAME: dict[str, CandidateClass] = {c.name: c for c in CLASSES}
NAMES: tuple[str, ...] = tuple(BY_NAME)
