"""C-4 `retry`: a CANDIDATE_FAILING reason of the instance itself (R-18: the failing decision's step was not active,
or it was the ROOT walk), or an OWNERSHIP_MISMATCH (R-6: a task's outcome whose ownership did not verify, set aside),
is closed by no step's action; once its cause is fixed, retry closes it and makes the instance's failing decisions due
at once, each with its failures counted from zero, and its outcomes set aside PENDING again, verified again."""

from __future__ import annotations

import pytest

from procedures import db as dbmod
from procedures import errors, pulse, routines
from tests.sql.test_control import ONE_TASK
from tests.support.signals import failing_in_review, send, signal_flow, signal_step

ERROR = "INVALID_STATE: the signal could not be applied"


def fail(world, cls: str, sql: str, times: int = 3, error: str = ERROR) -> list[int]:
    """The candidate ``sql`` reads (its id and version) reported failing ``times`` times: the review flags."""
    flags = []
    for _ in range(times):
        c = world.db.row(sql)
        (row,) = dbmod.call(world.db.conn, "weave_candidate_fail", cls, c["id"], c["version"], error)[0]
        assert row["recorded"] == 1
        flags.append(row["review"])
    return flags


PENDING_SIGNAL = "SELECT id, version FROM weave_signals WHERE status = 'PENDING'"
ROOT = "SELECT id, version FROM weave_pending_advances WHERE step_key = ''"


def retry(world, wf, key="t1", reason="routine restored", token=None):
    return routines.instance_retry(world.db.conn, token or world.token, "acme", wf, reason, key)


def early_signal_in_review(world, orch) -> str:
    """An early signal (its step `approval` PENDING behind `cool_off`) failing a third time the same way: the
    reason is the instance's own."""
    world.publish(signal_flow(before_timer_ms=60_000))
    wf = world.start("approval-flow", {"order_id": "o-1"})
    orch.drain()
    send(world, wf, queued=True)
    assert fail(world, "SIGNAL", PENDING_SIGNAL) == [0, 0, 1]
    (reason,) = world.instance(wf)["review_reasons"]
    assert reason["code"] == "CANDIDATE_FAILING" and reason["step_key"] is None
    # No step names what failed: the reason does, for the operator who fixes its cause.
    signal = f"sig_{world.db.scalar('SELECT id FROM weave_signals')}"
    assert reason["detail"]["candidate"] == {"class": "SIGNAL", "signal_id": signal, "step_key": "approval"}
    return wf


def test_C4_R18_retry_ends_the_review_no_step_action_could_end(world, orch):
    wf = early_signal_in_review(world, orch)
    with pytest.raises(errors.InvalidState, match="step is ACTIVE, not NEEDS_REVIEW"):
        routines.step_reactivate(world.db.conn, world.token, "acme", wf, "cool_off", "try", "r1")
    before = world.db.row("SELECT version, available_at FROM weave_signals")
    result = retry(world, wf)
    assert (result["closed"], result["retried"], result["status"], result["replayed"]) == (1, 1, "RUNNING", 0)
    assert result["instance"]["status"] == "RUNNING" and result["instance"]["gate"] == "OPEN"
    sig = world.db.row("SELECT attempts, last_error, version, available_at FROM weave_signals")
    now = world.db.scalar("SELECT MIN(updated_at) FROM weave_instances")
    assert (sig["attempts"], sig["last_error"], sig["version"]) == (0, None, before["version"] + 1)
    assert sig["available_at"] <= now  # due at once, no longer backed off
    assert world.db.row("SELECT code, closed_by FROM weave_review_reasons") == {
        "code": "CANDIDATE_FAILING", "closed_by": "retry"}
    retried = [e for e in world.events(wf) if e["type"] == "INSTANCE_RETRIED"]
    assert [e["data"]["closed"] for e in retried] == [1] and retried[0]["data"]["reason"] == "routine restored"
    assert world.db.scalar("SELECT COUNT(*) FROM weave_audit WHERE action = 'instance.retry'") == 1
    orch.drain()
    world.db.advance(60_000)
    orch.drain()  # the timer settles, `approval` activates and its early signal wins
    assert world.instance(wf)["status"] == "SUCCEEDED"
    assert world.db.scalar("SELECT status FROM weave_signals") == "CONSUMED"


def test_C4_S11_a_retried_early_signal_of_a_reactivated_step_waits_for_its_wait_and_wins_first(world, orch):
    """An early signal for a reactivated step whose wait is not open yet (the instance paused) failed three times;
    the retry made it due at once. Its processing answered it REJECTED STEP_SETTLED, so the signal accepted after
    it won the wait (S-11, M-4.17). It stays early until the wait opens, and then wins as the first."""
    world.publish(signal_flow(timeout_ms=60_000))
    wf = world.start("approval-flow", {"order_id": "o-1"})
    orch.drain()
    world.past_due(orch, wf, "approval", 60_000)
    routines.instance_pause(world.db.conn, world.token, "acme", wf, "hold", "p1")
    routines.step_reactivate(world.db.conn, world.token, "acme", wf, "approval", "again", "r1")
    first, second = (send(world, wf, target_activation_sequence=2) for _ in range(2))
    assert first["status"] == second["status"] == "PENDING"
    fail(world, "SIGNAL", f"SELECT id, version FROM weave_signals WHERE id = {first['signal_id'][4:]}")
    assert [r["code"] for r in world.instance(wf)["review_reasons"]] == ["CANDIDATE_FAILING"]
    retry(world, wf)
    orch.drain()
    assert world.db.scalar("SELECT status FROM weave_signals WHERE id = %s", int(first["signal_id"][4:])) == "PENDING"
    routines.instance_resume(world.db.conn, world.token, "acme", wf, "go on", "r2")
    orch.drain()
    step = world.step(wf, "approval")
    assert step["status"] == "SUCCEEDED" and step["wait"]["winner_signal_id"] == first["signal_id"]
    assert world.db.row("SELECT status, disposition FROM weave_signals WHERE id = %s", int(second["signal_id"][4:])) \
        == {"status": "REJECTED", "disposition": "WAIT_SETTLED"}


def test_C4_R12_retry_counts_failures_from_zero_and_a_report_of_the_old_version_records_nothing(world, orch):
    wf = early_signal_in_review(world, orch)
    stale = world.db.row(PENDING_SIGNAL)
    retry(world, wf)
    (row,) = dbmod.call(world.db.conn, "weave_candidate_fail", "SIGNAL", stale["id"], stale["version"], ERROR)[0]
    assert row == {"recorded": 0, "review": 0}
    assert fail(world, "SIGNAL", PENDING_SIGNAL) == [0, 0, 1]  # three more in a row, not one
    assert world.instance(wf)["status"] == "NEEDS_REVIEW"
    assert retry(world, wf, key="t2")["closed"] == 1


def test_C4_retry_of_a_failing_root_walk_makes_it_due_and_the_instance_goes_on(world, orch):
    world.publish(ONE_TASK)
    world.db.execute("UPDATE weave_apps SET status = 'DISABLED'")  # the first activation waits for ROOT
    wf = world.start("one", {"order_id": "o-1"})
    assert fail(world, "CHECKPOINT", ROOT, error="INVALID_STATE: the walk could not be applied") == [0, 0, 1]
    (reason,) = world.instance(wf)["review_reasons"]
    assert (reason["code"], reason["step_key"]) == ("CANDIDATE_FAILING", None)
    assert reason["detail"]["candidate"] == {"class": "CHECKPOINT", "kind": "ROOT", "step_key": None}
    world.db.execute("UPDATE weave_apps SET status = 'ACTIVE'")
    result = retry(world, wf)
    assert (result["closed"], result["status"]) == (1, "RUNNING")
    root = world.db.row("SELECT attempts, due_at, available_at FROM weave_pending_advances WHERE step_key = ''")
    assert root["attempts"] == 0 and root["available_at"] == root["due_at"]
    orch.drain()
    assert world.step(wf, "charge")["status"] == "ACTIVE"


def test_C4_C6_retry_is_refused_where_it_has_nothing_to_do_and_changes_nothing(world, orch):
    world.publish(signal_flow(timeout_ms=60_000))
    wf = world.start("approval-flow", {"order_id": "o-1"})
    orch.drain()
    with pytest.raises(errors.InvalidState, match="the instance is RUNNING, not NEEDS_REVIEW"):
        retry(world, wf)
    # No decision failed: the wait ran out, a step's own reason, which its reactivate or resolve closes.
    assert world.past_due(orch, wf, "approval", 60_000)["review_reasons"][0]["code"] == "SIGNAL_TIMEOUT"
    events = len(world.events(wf))
    with pytest.raises(errors.InvalidState, match="^INVALID_STATE: nothing to retry; reactivate or resolve its step "
                                                  "approval$"):
        retry(world, wf)
    assert world.instance(wf)["status"] == "NEEDS_REVIEW" and len(world.events(wf)) == events
    assert world.db.scalar("SELECT COUNT(*) FROM weave_review_reasons WHERE closed_at IS NULL") == 1
    assert world.db.scalar("SELECT COUNT(*) FROM weave_audit WHERE action = 'instance.retry'") == 0
    routines.instance_cancel(world.db.conn, world.token, "acme", wf, "done", "c1")
    with pytest.raises(errors.InvalidState, match="CANCELLED, not NEEDS_REVIEW"):
        retry(world, wf)


def test_C4_S11_a_step_in_review_for_more_than_a_failing_decision_keeps_the_instance_in_review(world, orch):
    """Two steps side by side. A signal for `approval`'s open wait fails a third time (its step to review,
    CANDIDATE_FAILING); then the instance deadline cuts `cool_off` short (TIMER_TRUNCATED), and passes `approval`'s
    deadline too while it waits in review. Retry sends `approval` on: its signal, accepted before that deadline,
    wins (S-11, M-4.12). `cool_off` waits for its own action, and the instance stays in review."""
    world.publish({"name": "side-by-side", "steps": [{"key": "cool_off", "type": "TIMER", "delay_ms": 120_000},
                                                     signal_step()]})
    wf = world.start("side-by-side", {"order_id": "o-1"}, deadline_ms=60_000)
    orch.drain()
    sent = send(world, wf, queued=True)
    assert fail(world, "SIGNAL", PENDING_SIGNAL) == [0, 0, 1]
    assert world.step(wf, "approval")["status"] == "NEEDS_REVIEW"
    world.db.advance(61_000)
    orch.drain()
    assert {(r["code"], r["step_key"]) for r in world.instance(wf)["review_reasons"]} == {
        ("CANDIDATE_FAILING", "approval"), ("TIMER_TRUNCATED", "cool_off")}
    result = retry(world, wf)
    assert (result["closed"], result["steps"], result["status"]) == (1, ["approval"], "NEEDS_REVIEW")
    orch.drain()
    step = world.step(wf, "approval")
    assert step["status"] == "SUCCEEDED" and step["wait"]["winner_signal_id"] == sent["signal_id"]
    (reason,) = world.instance(wf)["review_reasons"]
    assert (reason["code"], reason["step_key"]) == ("TIMER_TRUNCATED", "cool_off")
    assert not [e for e in world.events(wf) if e["type"] == "INSTANCE_REOPENED"]
    routines.instance_deadline(world.db.conn, world.token, "acme", wf, "more time", "d1", extend_ms=3_600_000)
    routines.step_resolve(world.db.conn, world.token, "acme", wf, "cool_off", "waited long enough", "s1",
                          output={"waited": True})
    orch.drain()
    assert world.instance(wf)["status"] == "SUCCEEDED"


def test_C4_retry_needs_review_scope_a_key_and_a_reason_and_replays(world, orch):
    wf = early_signal_in_review(world, orch)
    control = world.credential(["workflows:control", "workflows:read"])["token"]
    with pytest.raises(errors.Forbidden):
        retry(world, wf, token=control)
    with pytest.raises(errors.ValidationFailed) as info:
        retry(world, wf, reason="   ")
    assert info.value.field_code == "REASON_INVALID"
    first = retry(world, wf)
    again = retry(world, wf)
    assert (again["closed"], again["retried"], again["status"], again["replayed"]) == (1, 1, "RUNNING", 1)
    assert first["replayed"] == 0
    with pytest.raises(errors.IdempotencyConflict):
        retry(world, wf, reason="another reason")
    assert world.db.scalar("SELECT COUNT(*) FROM weave_audit WHERE action = 'instance.retry'") == 1


def test_C4_S11_retry_sends_a_signal_step_on_in_its_activation_and_its_first_signal_wins(world, orch):
    """A signal for an open wait failed a third time the same way: its step went to review (CANDIDATE_FAILING), and
    another came while the fault was fixed. Retry sends the step on in its own activation: the first signal wins
    (S-11), the second is answered WAIT_SETTLED. A reactivation would have answered both STALE_ACTIVATION (S-8), and
    a resolve needed the payload copied by hand."""
    wf, first = failing_in_review(world, orch)
    (reason,) = world.instance(wf)["review_reasons"]
    assert reason["detail"]["candidate"] == {"class": "SIGNAL", "signal_id": first["signal_id"], "step_key": "approval"}
    world.db.advance(60_000)  # past its backoff, the fault gone: the signal waits for its step's recovery
    orch.drain()
    second = send(world, wf)
    assert second["status"] == "PENDING"
    result = retry(world, wf)
    assert (result["closed"], result["retried"], result["steps"], result["status"]) == (1, 2, ["approval"], "RUNNING")
    assert world.db.row("SELECT attempts, available_at <= due_at AS due FROM weave_pending_advances") == {
        "attempts": 0, "due": 1}
    orch.drain()
    step = world.step(wf, "approval")
    assert (step["status"], step["activation_sequence"]) == ("SUCCEEDED", 1)
    assert step["wait"]["winner_signal_id"] == first["signal_id"]
    assert world.db.row("SELECT status, disposition FROM weave_signals WHERE id = %s", int(second["signal_id"][4:])) \
        == {"status": "REJECTED", "disposition": "WAIT_SETTLED"}
    assert world.instance(wf)["status"] == "SUCCEEDED"
    events = world.events(wf)
    (retried,) = [e for e in events if e["type"] == "STEP_RETRIED"]
    assert (retried["step_key"], retried["activation_sequence"]) == ("approval", 1)
    assert retried["data"] == {"actor": retried["data"]["actor"], "reason": "routine restored"}
    assert [e["data"]["steps"] for e in events if e["type"] == "INSTANCE_RETRIED"] == [["approval"]]
    again = retry(world, wf)  # its answer again, from the audit row
    assert (again["replayed"], again["closed"], again["steps"]) == (1, 1, ["approval"])


def test_C4_T6_retry_sends_a_timer_on_to_its_own_due_time(world, orch):
    """A timer's checkpoint failed a third time and its step went to review. Retry counts its failures from zero
    and the timer settles at the due time it was given at its start (T-1, T-6), where a reactivation would start the
    whole delay again from now."""
    world.publish(signal_flow(before_timer_ms=600_000))
    wf = world.start("approval-flow", {"order_id": "o-1"})
    orch.drain()
    due = world.step(wf, "cool_off")["wait"]["due_at"]
    cp = "SELECT id, version FROM weave_pending_advances WHERE step_key = 'cool_off'"
    assert fail(world, "CHECKPOINT", cp, error="INVALID_STATE: a handler refused this checkpoint") == [0, 0, 1]
    world.db.advance(120_000)
    orch.drain()
    assert world.step(wf, "cool_off")["status"] == "NEEDS_REVIEW"
    assert retry(world, wf)["steps"] == ["cool_off"]
    assert world.db.row("SELECT attempts, DATE_FORMAT(available_at, '%%Y-%%m-%%dT%%H:%%i:%%s.%%fZ') AS at "
                        "FROM weave_pending_advances WHERE step_key = 'cool_off'") == {"attempts": 0, "at": due}
    orch.drain()
    assert world.step(wf, "cool_off")["status"] == "ACTIVE"
    world.db.advance(480_000)
    orch.drain()
    (settled,) = [e for e in world.events(wf) if e["type"] == "TIMER_SETTLED"]
    assert settled["data"]["due_at"] == due and world.step(wf, "approval")["status"] == "ACTIVE"


def test_C4_K7_retry_applies_the_outcome_a_task_step_recorded_while_in_review(world, orch):
    """A task's outcome failed a third time to apply: its step went to review. Once the fault was gone the outcome
    was consumed at its next try, only recorded (TASK_OUTCOME_RECORDED), as the step no longer waited for it. Retry
    sends the step on and applies that outcome: the step succeeds with the task's output, the task run once. A
    reactivation would have run the task again (a second charge), a resolve needed the output copied by hand."""
    from tests.sql.test_pulse import claim, task_flow

    world.publish(task_flow())
    wf = world.start("pay", {"order_id": "a"})
    orch.drain()
    (c,) = claim(world)
    with world.held(wf):
        pulse.attempt_complete(world.db.conn, c["attempt_id"], "w1", {"charged": 42})
    inbox = "SELECT id, version FROM pulse_inbox WHERE state = 'PENDING'"
    assert fail(world, "INBOX", inbox, error="INVALID_STATE: the outcome could not be applied") == [0, 0, 1]
    world.db.advance(60_000)
    orch.drain()
    assert [e["type"] for e in world.events(wf)][-1] == "TASK_OUTCOME_RECORDED"
    assert world.step(wf, "work")["status"] == "NEEDS_REVIEW"
    result = retry(world, wf)
    assert (result["closed"], result["retried"], result["steps"]) == (1, 1, ["work"])
    assert world.db.row("SELECT state, attempts, consumed_at FROM pulse_inbox") == {
        "state": "PENDING", "attempts": 0, "consumed_at": None}
    orch.drain()
    step = world.step(wf, "work")
    assert (step["status"], step["output"], step["activation_sequence"]) == ("SUCCEEDED", {"charged": 42}, 1)
    assert world.instance(wf)["status"] == "SUCCEEDED"
    assert world.db.row("SELECT COUNT(*) AS tasks, MAX(attempts_used) AS attempts FROM pulse_tasks") == {
        "tasks": 1, "attempts": 1}


def test_C4_P4_retry_sends_a_poll_on_with_its_rounds_and_leaves_one_answered_for_good_in_review(world, orch):
    """A POLL's next-round checkpoint failed a third time: retry sends it on with its rounds and budget (round 2 of
    3). Round 2's PENDING answer then failed to apply, and was only recorded once the fault was gone, the step in
    review, which stopped the poll: retry sends it on between rounds, as that answer would have (round 3 at its
    interval). Round 3's DONE, recorded the same way, is for a person: retry refuses, saying so, and changes
    nothing; resolve settles the step with what the round answered."""
    from tests.sql.test_polls import INTERVAL, answer, poll_flow

    inbox = "SELECT id, version FROM pulse_inbox WHERE state = 'PENDING'"
    world.publish(poll_flow())
    wf = world.start("pay", {"order_id": "o-1"})
    orch.drain()
    answer(world, "PENDING")
    orch.drain()
    cp = "SELECT id, version FROM weave_pending_advances WHERE step_key = 'check'"
    assert fail(world, "CHECKPOINT", cp, error="INVALID_STATE: a handler refused this checkpoint") == [0, 0, 1]
    world.db.advance(INTERVAL)
    orch.drain()
    assert world.step(wf, "check")["status"] == "NEEDS_REVIEW"
    assert retry(world, wf)["steps"] == ["check"]
    orch.drain()
    poll = world.step(wf, "check")["poll"]
    assert (poll["rounds_used"], poll["max_rounds"], world.step(wf, "check")["activation_sequence"]) == (2, 3, 1)

    answer(world, "PENDING")
    assert fail(world, "INBOX", inbox, error="INVALID_STATE: the outcome could not be applied") == [0, 0, 1]
    world.db.advance(60_000)
    orch.drain()  # the fault gone, the round's answer is recorded, and the poll stops there
    assert world.db.scalar("SELECT state FROM weave_poll_states") == "STOPPED"
    assert retry(world, wf, key="t2")["steps"] == ["check"]
    orch.drain()  # round 2 answered a minute ago, the interval half a minute: round 3 is due at once
    poll = world.step(wf, "check")["poll"]
    assert (poll["rounds_used"], world.step(wf, "check")["status"]) == (3, "ACTIVE")

    answer(world, {"status": "DONE", "paid": 42})
    assert fail(world, "INBOX", inbox, error="INVALID_STATE: the outcome could not be applied") == [0, 0, 1]
    world.db.advance(60_000)
    orch.drain()
    events = len(world.events(wf))
    with pytest.raises(errors.InvalidState, match="nothing to retry; reactivate or resolve its step check \\(its "
                                                  "poll stopped in review\\)$"):
        retry(world, wf, key="t3")
    assert len(world.events(wf)) == events and world.step(wf, "check")["status"] == "NEEDS_REVIEW"
    routines.step_resolve(world.db.conn, world.token, "acme", wf, "check", "paid, as round 3 answered", "s1",
                          output={"status": "DONE", "paid": 42})
    orch.drain()
    assert world.instance(wf)["status"] == "SUCCEEDED"


def round_outcome_set_aside(world, orch) -> tuple[str, dict]:
    """A POLL whose round's task a hand edit took from its round (the round names another task): the round's answer
    does not verify and is set aside, applied to nothing (R-6). The instance and the edit to undo."""
    from tests.sql.test_polls import claim, poll_flow, started

    world.publish(poll_flow())
    wf = started(world, orch)
    got = claim(world)
    world.db.execute("UPDATE weave_poll_rounds SET task_id = task_id + 1000")
    with world.held(wf):
        pulse.attempt_complete(world.db.conn, got["attempt_id"], "w1", {"status": "DONE", "output": {"paid": 1}})
    assert orch.drain()["INBOX:MISMATCH"] == 1
    inst = world.instance(wf)
    assert [(r["code"], r["step_key"]) for r in inst["review_reasons"]] == [("OWNERSHIP_MISMATCH", None)]
    assert inst["steps"][0]["status"] == "ACTIVE"  # no step in review: reactivate and resolve cannot act
    with pytest.raises(errors.InvalidState, match="step is ACTIVE, not NEEDS_REVIEW"):
        routines.step_resolve(world.db.conn, world.token, "acme", wf, "check", "by hand", "s1", output={"paid": 1})
    return wf, {"undo": "UPDATE weave_poll_rounds SET task_id = task_id - 1000"}


def test_C4_R6_retry_after_the_rows_are_repaired_verifies_the_outcome_set_aside_and_applies_it(world, orch):
    wf, edit = round_outcome_set_aside(world, orch)
    world.db.execute(edit["undo"])  # the person repairs the rows
    result = retry(world, wf, reason="round's task restored from the backup")
    assert (result["closed"], result["retried"], result["status"]) == (1, 1, "RUNNING")
    assert world.db.row("SELECT state, consumed_at FROM pulse_inbox") == {"state": "PENDING", "consumed_at": None}
    orch.drain()  # verified again, now it holds: the round's answer settles the poll
    assert world.instance(wf)["status"] == "SUCCEEDED"
    assert world.db.scalar("SELECT state FROM pulse_inbox") == "CONSUMED"
    assert world.db.row("SELECT code, closed_by FROM weave_review_reasons") == {
        "code": "OWNERSHIP_MISMATCH", "closed_by": "retry"}


def test_C4_R6_retry_without_the_repair_sets_the_outcome_aside_again_and_never_applies_it(world, orch):
    wf, _ = round_outcome_set_aside(world, orch)
    retry(world, wf, reason="retried before anyone looked")
    orch.drain()
    inst = world.instance(wf)
    assert [(r["code"], r["step_key"]) for r in inst["review_reasons"]] == [("OWNERSHIP_MISMATCH", None)]
    assert inst["steps"][0]["status"] == "ACTIVE"
    assert world.db.scalar("SELECT outcome FROM weave_poll_rounds") == "IN_FLIGHT"  # nothing applied by guessing
    assert world.db.scalar("SELECT state FROM pulse_inbox") == "MISMATCH"


@pytest.mark.breaks_invariants("M-4.24")
def test_M4_24_a_review_reason_no_action_can_close_is_caught(world, orch):
    """A person can always end a review: an instance's own reason has its instance action, a step's reason its step in
    review (or a task still to settle it). A reason no action closes left a cancel the only way out."""
    from procedures import invariants

    wf = early_signal_in_review(world, orch)
    assert "M-4.24" not in invariants.violations(world.db.conn)  # its own CANDIDATE_FAILING: retry closes it
    reason = world.db.scalar("SELECT id FROM weave_review_reasons")
    world.db.execute("UPDATE weave_review_reasons SET code = 'TASK_FAILED' WHERE id = %s", reason)
    assert invariants.violations(world.db.conn)["M-4.24"] == [reason]  # the instance's, but no instance action's
    world.db.execute("UPDATE weave_review_reasons SET step_key = 'cool_off' WHERE id = %s", reason)
    assert world.step(wf, "cool_off")["status"] == "ACTIVE"
    assert invariants.violations(world.db.conn)["M-4.24"] == [reason]  # a step's, on a step not in review


def test_C4_the_reasons_retry_closes_are_those_the_console_and_the_invariant_know():
    """The routine names them in its own SQL; the console offers retry and M-4.24 holds an instance's reasons by
    RETRY_CLOSES: the two lists are one."""
    import re
    from pathlib import Path

    from procedures.reviews import RETRY_CLOSES

    text = (Path(__file__).resolve().parents[2] / "procedures" / "control" / "weave_instance_retry.sql").read_text()
    (codes,) = re.findall(r"code IN \(([^)]*)\)", text)
    assert tuple(c.strip().strip("'") for c in codes.split(",")) == RETRY_CLOSES


def test_S13_S14_a_signal_on_time_for_a_step_in_review_is_kept_for_its_recovery_past_its_expiry(world, orch):
    """A signal accepted on time for an open wait whose step is in review used to expire at its expiry (the instance
    deadline), before any recovery: one a retry would have applied was gone. It is kept, and looked at no more
    until the step's recovery answers it: here a resolve, STEP_SETTLED."""
    wf, _ = failing_in_review(world, orch, deadline_ms=120_000)
    world.db.advance(60_000)
    orch.drain()  # past its backoff: its step is in review, so it is kept
    kept = world.db.row("SELECT status, version, available_at FROM weave_signals")
    assert kept["status"] == "PENDING" and kept["available_at"].year == 9999
    world.db.advance(120_000)  # past its expiry, the instance deadline
    orch.drain()
    assert world.db.row("SELECT status, version, available_at FROM weave_signals") == kept
    routines.instance_deadline(world.db.conn, world.token, "acme", wf, "more time", "d1", extend_ms=3_600_000)
    routines.step_resolve(world.db.conn, world.token, "acme", wf, "approval", "approved by phone", "s1",
                          output={"approved": True})
    assert world.db.row("SELECT status, disposition FROM weave_signals") == {
        "status": "REJECTED", "disposition": "STEP_SETTLED"}


@pytest.mark.breaks_invariants("M-4.25")
def test_M4_25_a_signal_kept_for_a_step_no_longer_in_review_is_caught(world, orch):
    """A kept signal is looked at no more: while its step is in review that is right, and a retry or a continue makes
    it due again as the step goes on. One kept on a step that went on would never be looked at again."""
    from procedures import invariants

    wf, _ = failing_in_review(world, orch)
    world.db.advance(60_000)
    orch.drain()  # past its backoff: kept for the step's recovery
    assert world.db.scalar("SELECT YEAR(available_at) FROM weave_signals") == 9999
    assert "M-4.25" not in invariants.violations(world.db.conn)
    retry(world, wf)  # the step goes on, and the signal is due again
    assert world.db.scalar("SELECT YEAR(available_at) FROM weave_signals") < 9999
    assert "M-4.25" not in invariants.violations(world.db.conn)
    world.db.execute("UPDATE weave_signals SET available_at = '9999-12-31 00:00:00'")
    assert invariants.violations(world.db.conn)["M-4.25"] == [world.db.scalar("SELECT id FROM weave_signals")]
