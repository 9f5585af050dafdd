"""C-4 `retry`: a CANDIDATE_FAILING reason of the instance itself (R-18: the failing decision's step was not active,
or it was the ROOT walk), or an OWNERSHIP_MISMATCH (R-6: a task's outcome whose ownership did not verify, set aside),
is closed by no step's action; once its cause is fixed, retry closes it and makes the instance's failing decisions due
at once, each with its failures counted from zero, and its outcomes set aside PENDING again, verified again."""

from __future__ import annotations

import pytest

from procedures import db as dbmod
from procedures import errors, pulse, routines
from tests.sql.test_control import ONE_TASK
from tests.support.signals import send, signal_flow

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
    world.publish(signal_flow(before_timer_ms=1_000))
    wf = world.start("approval-flow", {"order_id": "o-1"})
    orch.drain()
    with pytest.raises(errors.InvalidState, match="the instance is RUNNING, not NEEDS_REVIEW"):
        retry(world, wf)
    # A failing checkpoint on an ACTIVE step: the step's own reason, which reactivate or resolve closes.
    cp = "SELECT id, version FROM weave_pending_advances WHERE step_key = 'cool_off'"
    assert fail(world, "CHECKPOINT", cp, error="INVALID_STATE: a handler refused this checkpoint") == [0, 0, 1]
    events = len(world.events(wf))
    with pytest.raises(errors.InvalidState, match="nothing of the instance itself to retry; reactivate or resolve its "
                                                  "step cool_off"):
        retry(world, wf)
    assert world.instance(wf)["status"] == "NEEDS_REVIEW" and len(world.events(wf)) == events
    assert world.db.scalar("SELECT COUNT(*) FROM weave_review_reasons WHERE closed_at IS NULL") == 1
    assert world.db.scalar("SELECT COUNT(*) FROM weave_audit WHERE action = 'instance.retry'") == 0
    routines.instance_cancel(world.db.conn, world.token, "acme", wf, "done", "c1")
    with pytest.raises(errors.InvalidState, match="CANCELLED, not NEEDS_REVIEW"):
        retry(world, wf)


def test_C4_a_step_in_review_beside_it_keeps_the_instance_in_review(world, orch):
    wf = early_signal_in_review(world, orch)
    cp = "SELECT id, version FROM weave_pending_advances WHERE step_key = 'cool_off'"
    assert fail(world, "CHECKPOINT", cp, error="INVALID_STATE: a handler refused this checkpoint") == [0, 0, 1]
    result = retry(world, wf)
    assert (result["closed"], result["status"]) == (1, "NEEDS_REVIEW")
    (reason,) = world.instance(wf)["review_reasons"]
    assert (reason["code"], reason["step_key"]) == ("CANDIDATE_FAILING", "cool_off")
    assert not [e for e in world.events(wf) if e["type"] == "INSTANCE_REOPENED"]
    # The step's failing checkpoint is the step's: left as it was, for its own action.
    assert world.db.scalar("SELECT attempts FROM weave_pending_advances WHERE step_key = 'cool_off'") == 3
    reactivated = routines.step_reactivate(world.db.conn, world.token, "acme", wf, "cool_off", "handler fixed", "r1")
    assert reactivated["status"] == "RUNNING"


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
