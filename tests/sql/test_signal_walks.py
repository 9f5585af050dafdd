"""Property: whatever signals come, and whenever, acceptance answers as S-8 and S-9 say, replays answer the first
receipt byte for byte, the first on-time match wins, and no signal is left without an answer (S-4..S-14).

Seeded random walks send signals to a SIGNAL step that a TIMER opens later, over SQL and inside a caller's
transaction (S-16): early and on time, with the right or another correlation, for the current, an old or a future
activation, under new keys and under keys used before (the same request, or another one). Meanwhile the clock
moves past the wait's and the instance's deadlines, an operator reactivates the step in review, pauses and resumes
the instance, and rarely cancels it. Before each send the test reads the state the send meets and computes its
answer from it alone: refused (422, nothing stored), a replay, a conflict (409), or stored REJECTED with the first
S-9 reason that applies, or PENDING. After the engine ran, a PENDING signal that matched an open wait of the current
activation, with no earlier match, must have won it (S-11). After every step the invariants hold (M-4.17 among
them: a satisfied wait's winner is the first on-time match of its activation), and the step's explanation (S-17)
says of each signal what its row says, and never that one is not yet consumed, the engine having run. At rest
every signal has its answer.

A failure names its walk and prints its history.
"""

from __future__ import annotations

import datetime as dt
import json

from procedures import errors, invariants, routines, signals
from tests.support import walks
from tests.support.signals import send
from tests.support.world import World

NAME, VERSION = "approval.decided", "1"
DEADLINE_MS, TIMEOUT_MS, COOL_OFF_MS = 150_000, 30_000, 20_000
FLOW = {"name": "approve", "steps": [
    {"key": "cool_off", "type": "TIMER", "delay_ms": COOL_OFF_MS},
    {"key": "approval", "type": "SIGNAL", "after": ["cool_off"],
     "signal": {"name": NAME, "payload_version": VERSION, "payload_type": "object"},
     "correlation": "$.input.order_id", "timeout_ms": TIMEOUT_MS},
    {"key": "then", "type": "TIMER", "after": ["approval"], "delay_ms": 60_000}]}
WALKS, STEPS_PER_WALK = walks.seeds(40), 40
SETTLED = ("CANCELLING", "CANCELLED", "SUCCEEDED")


class Walk(walks.Walk):
    def __init__(self, db, orch, seed: int):
        super().__init__(db, orch, seed)
        self.world = World.create(db)
        self.world.publish(FLOW)
        self.wf = self.world.start("approve", {"order_id": "o-1"}, deadline_ms=DEADLINE_MS)
        self.iid = self.world.internal_id(self.wf)
        self.sent: dict[str, tuple[dict, dict | None]] = {}  # key -> (fields, first receipt or None if refused)
        self.ops = 0
        # In some walks most signals match; in others few or none do, and the wait times out, is reactivated,
        # and the signals of the earlier activation come late.
        self.matching = self.draw([3, 1, 0])
        self.drain()

    # What a send meets

    def state(self) -> dict:
        """The instance, the step's current activation and its wait, and the time, in one read."""
        return self.db.row(
            "SELECT i.status, i.deadline_at, s.activation_seq AS k, s.activation_id, w.status AS wait, "
            "w.deadline_at AS wait_deadline, w.correlation_key AS pinned, UTC_TIMESTAMP(6) + INTERVAL "
            "(SELECT clock_offset_us FROM weave_install WHERE id = 1) MICROSECOND AS now "
            "FROM weave_instances i JOIN weave_steps s ON s.instance_id = i.id AND s.step_key = 'approval' "
            "LEFT JOIN weave_waits w ON w.activation_id = s.activation_id AND w.kind = 'SIGNAL' "
            "WHERE i.id = %s", self.iid)

    def expected(self, fields: dict, before: dict, after_now: dt.datetime) -> set[str]:
        """The answers S-8 and S-9 allow for ``fields`` sent into ``before`` (several when a deadline fell between
        the read and the send): FUTURE_ACTIVATION (refused), or the stored status and disposition."""
        k, seq = before["k"], fields["target_activation_sequence"]
        if seq > max(k, 1) or (before["activation_id"] is None and k == 0 and seq != 1):
            return {"FUTURE_ACTIVATION"}
        if before["status"] in SETTLED:
            return {"REJECTED INSTANCE_SETTLED"}
        if seq < k:
            return {"REJECTED STALE_ACTIVATION"}
        if before["activation_id"] is None:  # not yet active (or reactivated, not yet active again): early
            return {"PENDING -"} | ({"REJECTED LATE"} if before["deadline_at"] <= after_now else set())
        if before["wait"] != "WAITING":
            return {"REJECTED STEP_SETTLED"}
        answers = set()
        for now in {before["now"], after_now}:
            if now >= before["wait_deadline"] or now >= before["deadline_at"]:
                answers.add("REJECTED LATE")
            elif fields["correlation_key"].encode() != bytes(before["pinned"]):
                answers.add("REJECTED CORRELATION_MISMATCH")
            else:
                answers.add("PENDING -")
        return answers

    # What happens

    def a_signal_comes(self) -> None:
        before = self.state()
        k = max(before["k"], 1)
        key = f"s-{len(self.sent) + 1}"
        fields = {"name": NAME, "payload_version": VERSION, "target_step_key": "approval",
                  "target_activation_sequence": self.draw([k] * 5 + [k - 1, k + 1]) or 1,
                  "correlation_key": self.draw(["o-1"] * self.matching + ["o-2"] * (4 - self.matching)),
                  "payload": json.dumps({"approved": self.draw([True, False])}), "reason": "decided"}
        again = self.draw([None] * 6 + ["same", "other"]) if self.sent else None
        if again:  # a key used before: the same request (a replay), or another one (a conflict)
            key = self.draw(sorted(self.sent))
            first, receipt = self.sent[key]
            fields = dict(first) if again == "same" else {**first, "reason": first["reason"] + " again"}
        queued = self.draw([False, False, True])
        try:
            got = send(self.world, self.wf, key, queued=queued, **fields)
        except errors.ValidationFailed as exc:
            got = exc.field_code
        except errors.IdempotencyConflict:
            got = "IDEMPOTENCY_CONFLICT"
        after_now = self.db.now()
        self.history.append(f"send {key} seq {fields['target_activation_sequence']} {fields['correlation_key']}"
                            f"{' queued' if queued else ''} ({again or 'new'}) -> "
                            f"{got if isinstance(got, str) else (got['status'], got['disposition'])}")
        if again:
            first, receipt = self.sent[key]
            if receipt is None:  # the first was refused and nothing was stored: this is a first send too
                pass
            elif again == "same":
                assert not isinstance(got, str) and got["replayed"], got
                assert got["receipt_json"] == receipt["receipt_json"], (got, receipt)  # byte for byte (S-4)
                self.drain()
                return
            else:
                assert got == "IDEMPOTENCY_CONFLICT", got
                self.drain()
                return
        allowed = self.expected(fields, before, after_now)
        answer = got if isinstance(got, str) else f"{got['status']} {got['disposition'] or '-'}"
        assert answer in allowed, (answer, allowed, before)
        self.sent[key] = (fields, None if isinstance(got, str) else got)
        if isinstance(got, str):
            assert not self.db.scalar("SELECT COUNT(*) FROM weave_signals WHERE idempotency_key = %s", key)
            return
        self.drain()
        # The first on-time match of an open wait of the current activation wins it (S-11).
        if answer == "PENDING -" and before["activation_id"] is not None:
            earlier = self.db.scalar(
                "SELECT COUNT(*) FROM weave_signals WHERE instance_id = %s AND target_activation_seq = %s "
                "AND correlation_key = %s AND accepted_at < %s AND status <> 'REJECTED'", self.iid,
                fields["target_activation_sequence"], b"o-1", before["now"])
            if not earlier and self.state()["status"] not in SETTLED:
                row = self.db.row("SELECT status FROM weave_signals WHERE idempotency_key = %s", key)
                assert row["status"] == "CONSUMED", row

    def time_passes(self) -> None:
        self.db.advance(self.draw([2_000, 10_000, 25_000]))
        if self.draw([True, True, True, False]):  # else the runners lag: a deadline may pass before they look
            self.drain()

    def operator_acts(self) -> None:
        self.ops += 1
        action = self.draw(["reactivate", "reactivate", "pause", "resume", "cancel"])
        try:
            if action == "reactivate":
                state = self.state()
                if state["status"] == "NEEDS_REVIEW" and state["now"] >= state["deadline_at"]:
                    # Past the instance deadline: as the operations guide says, move it first, then reactivate.
                    routines.instance_deadline(self.db.conn, self.world.token, self.world.namespace, self.wf,
                                               "more time", f"op-{self.ops}-deadline",
                                               deadline_at=state["now"] + dt.timedelta(milliseconds=TIMEOUT_MS))
                routines.step_reactivate(self.db.conn, self.world.token, self.world.namespace, self.wf,
                                         "approval", "ask again", f"op-{self.ops}")
            elif action == "cancel" and self.draw([False, False, True]):
                routines.instance_cancel(self.db.conn, self.world.token, self.world.namespace, self.wf, "stop",
                                         f"op-{self.ops}")
            elif action in ("pause", "resume"):
                getattr(routines, f"instance_{action}")(self.db.conn, self.world.token, self.world.namespace,
                                                        self.wf, "as drawn", f"op-{self.ops}")
        except errors.WeaveError as exc:
            assert exc.code in ("INVALID_STATE", "TASK_IN_FLIGHT"), exc
            return
        self.history.append(action)
        self.drain()

    WEIGHTS = {"a_signal_comes": 6, "time_passes": 3, "operator_acts": 1}

    def step(self) -> None:
        (what,) = self.rng.choices(list(self.WEIGHTS), list(self.WEIGHTS.values()))
        if what != "a_signal_comes":
            self.history.append(what)
        getattr(self, what)()
        invariants.check(self.db.conn)
        self.explain_agrees()

    def explain_agrees(self) -> None:
        """S-17 says of each signal what its row says, and, the engine having run, none is left not consumed."""
        told = signals.explain(self.db.conn, self.world.token, self.world.namespace, self.wf, "approval")
        rows = self.db.rows("SELECT id, status, disposition FROM weave_signals WHERE instance_id = %s "
                            "ORDER BY accepted_at, id", self.iid)
        assert [s["signal_id"] for s in told["signals"]] == [f"sig_{r['id']}" for r in rows]
        for said, row in zip(told["signals"], rows, strict=True):
            if row["status"] == "CONSUMED":
                assert said["why"] == "WON", (said, row)
            elif row["status"] != "PENDING":
                assert said["why"] == row["disposition"], (said, row)
            else:
                assert said["why"] != "NOT_YET_CONSUMED", ("a signal the engine left unconsumed", said)
        won = [r["id"] for r in rows if r["status"] == "CONSUMED"]
        if told["wait"]["winner_signal_id"] is not None:
            assert told["wait"]["winner_signal_id"] in [f"sig_{i}" for i in won], (told["wait"], won)

    def rest(self) -> None:
        """Past every deadline, resumed: every signal has its answer."""
        self.ops += 1
        try:
            routines.instance_resume(self.db.conn, self.world.token, self.world.namespace, self.wf, "rest",
                                     f"op-{self.ops}")
        except errors.InvalidState:
            pass
        for _ in range(4):
            self.db.advance(DEADLINE_MS)
            self.drain()
        pending = self.db.rows("SELECT id, status, expires_at FROM weave_signals WHERE instance_id = %s "
                               "AND status = 'PENDING'", self.iid)
        assert not pending, pending
        invariants.check(self.db.conn)


def test_S8_S11_S14_signals_in_any_order_and_at_any_time_get_their_answer(db, orch):
    answers: dict[str, int] = {}
    for seed in WALKS:
        walk = Walk(db, orch, seed)
        with walks.told(seed, walk):
            for _ in range(STEPS_PER_WALK):
                walk.step()
            walk.rest()
        for row in db.rows("SELECT status, disposition FROM weave_signals"):
            label = f"{row['status']} {row['disposition'] or '-'}"
            answers[label] = answers.get(label, 0) + 1
    # The walks met every answer a signal can get here.
    assert {"CONSUMED -", "REJECTED LATE", "REJECTED STALE_ACTIVATION", "REJECTED CORRELATION_MISMATCH",
            "REJECTED WAIT_SETTLED", "REJECTED STEP_SETTLED", "EXPIRED EXPIRED_UNMATCHED"} <= set(answers), answers
