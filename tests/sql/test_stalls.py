"""R-18 nothing stalls silently: work that can never proceed goes to review with a reason code and its detail;
work deferred by something that can clear by itself stays deferred, and says why, since when and how often."""

from __future__ import annotations

import json
import threading

import pymysql
import pytest

from procedures import db as dbmod
from procedures import errors, invariants, pulse, routines
from procedures.definitions import DefinitionError
from tests.sql.test_pulse import claim, task_flow, task_step
from tests.support.signals import failing_in_review, send, signal_flow
from tests.support.waiting import wait_for


def status_sets(world) -> tuple[dict, dict]:
    sets = dbmod.call(world.db.conn, "weave_status")
    deferred = {r["reason"]: r["instances"] for r in sets[5]}
    failing = {r["class"]: (int(r["failing"]), int(r["repeated"])) for r in sets[6]}
    return deferred, failing


def test_R18_a_definition_naming_a_missing_queue_is_refused_at_publish(world):
    with pytest.raises(errors.ValidationFailed) as info:
        world.publish(task_flow(queue="later"))
    assert info.value.field_code == "QUEUE_NOT_FOUND"
    assert world.db.scalar("SELECT COUNT(*) FROM weave_definitions") == 0
    routines.queue_put(world.db.conn, world.admin, world.namespace, "later", 10)
    assert world.publish(task_flow(queue="later"))["version"] == 1


def test_R18_a_name_the_servers_json_paths_cannot_take_is_refused_at_publish(world):
    """The server cannot name a member that begins with "-" in a JSON path, quoted or not: the path is a syntax
    error and finds nothing. A step key, an expression or a template place with such a name would publish and fail
    every activation (a start answered 500, a successor's activation failed under its predecessor's report)."""
    with world.db.conn.cursor() as cur:
        cur.execute("""SELECT JSON_EXTRACT('{"-a": 1}', '$."-a"') AS dashed,
                              JSON_EXTRACT('{"a-": 1}', '$."a-"') AS plain""")
        assert cur.fetchone() == {"dashed": None, "plain": "1"}
        cur.execute("SHOW WARNINGS")
        assert [w["Code"] for w in cur.fetchall()] == [4042]  # Syntax error in JSON path
    for step, field in ((task_step("-a"), "steps[0].key"),
                        (task_step("a", input={"v": '$.input["-x"]'}), "steps[0].input.v"),
                        (task_step("a", input={"-x": "$.input.v"}), 'steps[0].input["-x"]')):
        with pytest.raises(DefinitionError) as info:
            world.publish({"name": "dashed", "steps": [step]})
        assert [e.field for e in info.value.errors] == [field]
    assert world.db.scalar("SELECT COUNT(*) FROM weave_definitions") == 0


def test_R18_every_missing_queue_is_named_at_the_field_of_each_step_that_uses_it(world):
    """The validator lists every problem of a document at once, each at its path; the queues, which only the
    database knows, must be no different."""
    doc = {"name": "pay", "steps": [task_step("a", queue="later"), task_step("b", queue="payments"),
                                    task_step("c", queue="other"), task_step("d", queue="later")]}
    with pytest.raises(errors.ValidationFailed) as info:
        world.publish(doc)
    assert info.value.field_code == "QUEUE_NOT_FOUND"
    assert [(e["field"], e["code"]) for e in info.value.errors] == [
        ("steps[0].queue", "QUEUE_NOT_FOUND"), ("steps[2].queue", "QUEUE_NOT_FOUND"),
        ("steps[3].queue", "QUEUE_NOT_FOUND")]
    assert "later" in info.value.errors[0]["message"] and "other" in info.value.errors[1]["message"]
    assert world.db.scalar("SELECT COUNT(*) FROM weave_definitions") == 0


def test_R18_missing_queues_past_what_one_answer_holds_are_named_as_far_as_it_goes(world):
    names = [f"{letter}{'q' * 59}" for letter in "abc"]  # 60 characters each: two do not fit in one message
    with pytest.raises(errors.ValidationFailed) as info:
        world.publish({"name": "pay", "steps": [task_step(f"s{i}", queue=name) for i, name in enumerate(names)]})
    assert [(e["field"], e["code"]) for e in info.value.errors] == [
        ("steps[0].queue", "QUEUE_NOT_FOUND"), ("steps", "QUEUE_NOT_FOUND")]
    assert names[0] in info.value.errors[0]["message"]


def test_R18_a_queue_gone_after_publish_sends_the_step_to_review_not_into_endless_deferral(world, orch):
    """Corrupt data on purpose: queues are never deleted, so the row is removed by hand."""
    routines.queue_put(world.db.conn, world.admin, world.namespace, "later", 10)
    world.publish(task_flow(queue="later"))
    world.db.execute("DELETE FROM weave_queues WHERE name = 'later'")
    wf = world.start("pay", {"order_id": "a"})
    orch.drain()
    inst = world.instance(wf)
    assert inst["status"] == "NEEDS_REVIEW" and inst["gate"] == "CLOSED"
    (reason,) = inst["review_reasons"]
    assert reason["code"] == "QUEUE_NOT_FOUND" and reason["step_key"] == "work"
    assert "later" in reason["detail"]["detail"]
    assert world.step(wf, "work")["status"] == "NEEDS_REVIEW"
    assert world.db.scalar("SELECT COUNT(*) FROM weave_pending_advances") == 0
    assert world.db.scalar("SELECT COUNT(*) FROM pulse_tasks") == 0


def test_R18_a_correlation_that_cannot_resolve_to_bytes_is_a_review_with_what_it_got(world, orch):
    world.publish(signal_flow())
    wf = world.start("approval-flow", {"order_id": 42})  # a number: no bytes a sender could match
    stats = orch.drain()  # the start's own activation asked already
    assert not any(k.endswith("FAILED") for k in stats)
    inst = world.instance(wf)
    assert inst["status"] == "NEEDS_REVIEW"
    (reason,) = inst["review_reasons"]
    assert reason["code"] == "ACTIVATION_FAILED" and reason["step_key"] == "approval"
    assert "INTEGER" in reason["detail"]["detail"] and "42" in reason["detail"]["detail"]
    assert world.db.scalar("SELECT COUNT(*) FROM weave_activations") == 0
    assert world.db.scalar("SELECT COUNT(*) FROM weave_audit WHERE action = 'step.review'") == 1
    types = [e["type"] for e in world.events(wf)]
    assert "REVIEW_OPENED" in types
    # The person can end it: nothing is in flight.
    routines.instance_cancel(world.db.conn, world.token, world.namespace, wf, "bad order id", "cancel-1")
    orch.drain()
    assert world.instance(wf)["status"] == "CANCELLED"


def test_R18_C4_an_activation_that_failed_keeps_its_number_for_the_recovery_that_names_it(world, orch):
    """A step whose first activation cannot be made shows that activation's number on the step, as its review
    reason and event do: a recovery guarded by that number is taken, one guarded by another is refused, and a
    reactivation is the next number, so an early signal for the failed activation never reaches the new one."""
    world.publish(signal_flow(before_timer_ms=1_000))
    wf = world.start("approval-flow", {"order_id": 42})  # a number: no bytes a sender could match
    early = send(world, wf, "early-1")
    assert early["status"] == "PENDING"
    world.db.advance(1_000)
    orch.drain()
    (reason,) = world.instance(wf)["review_reasons"]
    assert (reason["code"], reason["activation_sequence"]) == ("ACTIVATION_FAILED", 1)
    assert world.step(wf, "approval")["activation_sequence"] == 1
    assert world.db.scalar("SELECT COUNT(*) FROM weave_activations WHERE step_key = 'approval'") == 0
    before = world.db.table_counts()
    for wrong in (2, 3):
        with pytest.raises(errors.InvalidState, match="at activation 1"):
            routines.step_reactivate(world.db.conn, world.token, "acme", wf, "approval", "fixed", f"r-{wrong}",
                                     activation_sequence=wrong)
    assert world.db.table_counts() == before
    again = routines.step_reactivate(world.db.conn, world.token, "acme", wf, "approval", "fixed", "r-1",
                                     activation_sequence=1)
    assert again["activation_sequence"] == 2
    reactivated = [e for e in world.events(wf) if e["type"] == "STEP_REACTIVATED"]
    assert [e["data"]["previous_activation"] for e in reactivated] == [1]
    orch.drain()  # activation 2 fails the same way: its own number, its own review
    (reason,) = world.instance(wf)["review_reasons"]
    assert (reason["code"], reason["activation_sequence"]) == ("ACTIVATION_FAILED", 2)
    routines.step_resolve(world.db.conn, world.token, "acme", wf, "approval", "approved by phone", "s-2",
                          output={"approved": True}, activation_sequence=2)
    orch.drain()
    assert world.instance(wf)["status"] == "SUCCEEDED"
    assert world.db.scalar("SELECT status FROM weave_signals WHERE idempotency_key = 'early-1'") != "CONSUMED"


def test_R18_the_same_non_transient_failure_a_third_time_opens_a_review(world, orch):
    world.publish(signal_flow(before_timer_ms=1_000))
    wf = world.start("approval-flow", {"order_id": "o-1"})
    orch.drain()
    cp = world.db.row("SELECT id, version FROM weave_pending_advances WHERE step_key = 'cool_off'")
    error = "INVALID_STATE: a handler refused this checkpoint"
    for attempt in range(1, 4):
        (row,) = dbmod.call(world.db.conn, "weave_candidate_fail", "CHECKPOINT", cp["id"], cp["version"], error)[0]
        assert row["recorded"] == 1 and row["review"] == (1 if attempt == 3 else 0)
        cp = world.db.row("SELECT id, version FROM weave_pending_advances WHERE step_key = 'cool_off'")
    inst = world.instance(wf)
    assert inst["status"] == "NEEDS_REVIEW"
    (reason,) = inst["review_reasons"]
    assert reason["code"] == "CANDIDATE_FAILING" and reason["step_key"] == "cool_off"
    assert "failed 3 times" in reason["detail"]["detail"] and error in reason["detail"]["detail"]
    # Which decision failed, as a reason of the instance itself says it too.
    assert reason["detail"]["candidate"] == {"class": "CHECKPOINT", "kind": "TIMER", "step_key": "cool_off"}
    assert world.step(wf, "cool_off")["status"] == "NEEDS_REVIEW"


def test_R18_a_checkpoint_that_keeps_failing_after_its_review_asks_once(world, orch):
    """A checkpoint whose step review did not remove it (its step no longer ACTIVE) kept failing the same way, and
    each failure opened another CANDIDATE_FAILING reason on the instance: seven in 51 s, one a minute while the fault
    lasted. It asks once while such a reason is open; its failures still back off."""
    world.publish(signal_flow(before_timer_ms=1_000))
    wf = world.start("approval-flow", {"order_id": "o-1"})
    orch.drain()
    error = "INVALID_STATE: a handler refused this checkpoint"
    answers = []
    for _ in range(7):
        cp = world.db.row("SELECT id, version FROM weave_pending_advances WHERE step_key = 'cool_off'")
        (row,) = dbmod.call(world.db.conn, "weave_candidate_fail", "CHECKPOINT", cp["id"], cp["version"], error)[0]
        answers.append((row["recorded"], row["review"]))
    assert answers == [(1, 0), (1, 0), (1, 1), (1, 0), (1, 0), (1, 0), (1, 0)]
    assert [r["code"] for r in world.instance(wf)["review_reasons"]] == ["CANDIDATE_FAILING"]
    assert world.db.scalar("SELECT attempts FROM weave_pending_advances WHERE step_key = 'cool_off'") == 7


def resolved_in_review(world, orch, wf: str) -> None:
    """With the invariants holding, the operator settles `approval`, in review: the instance succeeds, and every
    signal left PENDING for the step is answered STEP_SETTLED."""
    invariants.check(world.db.conn)
    routines.step_resolve(world.db.conn, world.token, "acme", wf, "approval", "approved by phone", "s-1",
                          output={"approved": True})
    orch.drain()
    assert world.instance(wf)["status"] == "SUCCEEDED"
    assert {(r["status"], r["disposition"]) for r in world.db.rows("SELECT status, disposition FROM weave_signals")} \
        == {("REJECTED", "STEP_SETTLED")}


def test_R18_S3_a_signal_for_a_signal_step_in_review_makes_no_checkpoint_for_it(world, orch):
    """A signal no runner has looked at yet made the wait's checkpoint due; the checkpoint then failed a third
    time, its step went to review, and its next run removed it (the step no longer ACTIVE). A signal sent then
    waits for the step's recovery; it used to give the step a new checkpoint, not failing, beside the review
    (M-4.18), which its run removed again. The control walks with two racing orchestrators found it."""
    world.publish(signal_flow())
    wf = world.start("approval-flow", {"order_id": "o-1"})
    orch.drain()
    first = send(world, wf, queued=True)
    for _ in range(3):
        cp = world.db.row("SELECT id, version FROM weave_pending_advances WHERE step_key = 'approval'")
        dbmod.call(world.db.conn, "weave_candidate_fail", "CHECKPOINT", cp["id"], cp["version"],
                   "INVALID_STATE: a handler refused this checkpoint")
    assert world.step(wf, "approval")["status"] == "NEEDS_REVIEW"
    world.db.advance(60_000)  # past its backoff: the fault is gone, and its run finds the step in review
    orch.drain()
    assert world.db.scalar("SELECT COUNT(*) FROM weave_pending_advances WHERE step_key = 'approval'") == 0
    second = send(world, wf)
    assert first["status"] == second["status"] == "PENDING"
    assert world.db.scalar("SELECT COUNT(*) FROM weave_pending_advances WHERE step_key = 'approval'") == 0
    resolved_in_review(world, orch, wf)


def test_R18_transient_or_changing_failures_only_back_off(world, orch):
    world.publish(signal_flow(before_timer_ms=1_000))
    wf = world.start("approval-flow", {"order_id": "o-1"})
    orch.drain()
    for error in ["1213: Deadlock found", "1213: Deadlock found", "1213: Deadlock found",
                  "INVALID_STATE: one", "INVALID_STATE: two", "INVALID_STATE: three"]:
        cp = world.db.row("SELECT id, version FROM weave_pending_advances WHERE step_key = 'cool_off'")
        (row,) = dbmod.call(world.db.conn, "weave_candidate_fail", "CHECKPOINT", cp["id"], cp["version"], error)[0]
        assert row == {"recorded": 1, "review": 0}
    assert world.instance(wf)["status"] == "RUNNING"
    deferred, failing = status_sets(world)
    assert failing["CHECKPOINT"] == (1, 1)


def paused_between_timers(world, orch) -> str:
    """Two timers in a row, the instance paused and the first one settled: the second is deferred PAUSED."""
    world.publish({"name": "two-timers", "steps": [
        {"key": "first", "type": "TIMER", "delay_ms": 1_000},
        {"key": "second", "type": "TIMER", "delay_ms": 1_000, "after": ["first"]}]})
    wf = world.start("two-timers")
    orch.drain()
    routines.instance_pause(world.db.conn, world.token, world.namespace, wf, "hold", "pause-1")
    world.db.advance(1_000)
    orch.drain()
    return wf


def test_R18_a_paused_instance_is_visibly_deferred_with_reason_since_and_attempts(world, orch):
    wf = paused_between_timers(world, orch)
    first = world.instance(wf)["deferred"]
    assert first["reason"] == "PAUSED" and first["attempts"] == 1 and first["step_key"] is None
    assert first["next_check_at"] > first["since"]
    world.db.advance(61_000)
    orch.drain()
    again = world.instance(wf)["deferred"]
    assert again["reason"] == "PAUSED" and again["since"] == first["since"] and again["attempts"] == 2
    deferred, _ = status_sets(world)
    assert deferred == {"PAUSED": 1}
    routines.instance_resume(world.db.conn, world.token, world.namespace, wf, "go", "resume-1")
    orch.drain()
    assert world.instance(wf)["deferred"] is None
    assert status_sets(world)[0] == {}
    assert world.step(wf, "second")["status"] == "ACTIVE"


def test_R18_a_full_queue_is_a_deferral_that_clears_by_itself(world, orch):
    routines.queue_put(world.db.conn, world.admin, world.namespace, "tiny", 1)
    world.publish(task_flow(queue="tiny"))
    world.start("pay", {"order_id": "a"})
    second = world.start("pay", {"order_id": "b"})
    orch.drain()
    deferred = world.instance(second)["deferred"]
    assert deferred["reason"] == "QUEUE_FULL" and "tiny" in deferred["detail"]
    assert status_sets(world)[0] == {"QUEUE_FULL": 1}


def test_R18_R8_a_deferral_that_lasts_shows_its_age_where_the_count_stays_flat(world, orch):
    """At a full quota held by a long task, a deferred instance waits on while the count of deferrals stays at one.
    The status says how long the oldest deferral of each reason has lasted, so that such a wait shows."""
    routines.app_put(world.db.conn, world.admin, world.namespace, "billing", 1)
    world.publish(task_flow(task_timeout_ms=3_600_000))
    world.start("pay", {"order_id": "first"})
    waiting = world.start("pay", {"order_id": "waiting"})
    orch.drain()
    since = world.instance(waiting)["deferred"]["since"]
    claim(world, lease_ms=3_600_000)  # the first's task runs on
    for _ in range(5):
        world.db.advance(10_000)
        orch.drain()
    assert world.step(waiting, "work")["status"] == "PENDING"
    assert world.instance(waiting)["deferred"]["since"] == since
    figures = routines.status(world.db.conn)
    assert figures["deferred"] == {"QUOTA_FULL": 1}
    assert figures["deferred_oldest_ms"]["QUOTA_FULL"] >= 50_000


def _deferral(world, wf: str, step_key: str = "") -> dict:
    return world.db.row("SELECT * FROM weave_pending_advances WHERE instance_id = %s AND step_key = %s",
                        world.internal_id(wf), step_key)


@pytest.mark.parametrize("what", ["identity", "app"])
def test_R8_R18_work_deferred_for_a_disabled_identity_or_app_backs_off_and_its_enabling_wakes_it(world, orch, what):
    """A disabled identity or app defers new work (R-8) with what it waits for named; each look that finds it still
    disabled waits a second more, up to ten (R-8's bounded backoff: thousands of such instances looking every second
    crowded out the server), and enabling it makes the deferred work due at once, as resume does for a pause."""
    admin, ns = world.admin, world.namespace
    bot = world.credential(["workflows:start"], actor="bot")
    world.publish(task_flow())
    world.publish({"name": "poll", "steps": [task_step("first"), {
        "key": "check", "type": "POLL", "after": ["first"], "queue": "payments", "handler": "example.poll",
        "handler_version": "1", "input": {}, "interval_ms": 1_000, "max_rounds": 3, "timeout_ms": 3_600_000,
        "task_timeout_ms": 600_000, "result": {"pending": ["PENDING"], "success": ["DONE"]}}]})
    poll = world.start("poll", {"order_id": "p"}, token=bot["token"])
    got, = claim(world, lease_ms=3_600_000)
    pulse.attempt_complete(world.db.conn, got["attempt_id"], "w1", {})
    got, = claim(world, lease_ms=3_600_000)
    pulse.attempt_complete(world.db.conn, got["attempt_id"], "w1", {"status": "PENDING"})  # round 2 in a second
    if what == "identity":
        routines.credential_disable(world.db.conn, admin, ns, bot["credential_id"])
        reason, owner = "IDENTITY_DISABLED", world.db.scalar("SELECT id FROM weave_credentials WHERE actor = 'bot'")
    else:
        routines.app_put(world.db.conn, admin, ns, "billing", 1000, "DISABLED")
        reason, owner = "APP_DISABLED", world.db.scalar("SELECT id FROM weave_apps WHERE name = 'billing'")
    # A start deferred by the disabled app too (a disabled identity starts nothing).
    root = world.start("pay", {"order_id": "r"}, token=bot["token"]) if what == "app" else None
    world.db.advance(1_000)
    gaps = []
    for _ in range(12):
        if gaps:
            world.db.advance_to(_deferral(world, poll, "check")["available_at"])
        orch.drain()
        cp = _deferral(world, poll, "check")
        assert (cp["deferred_reason"], cp["deferred_for"]) == (reason, owner)
        gaps.append(round((cp["available_at"] - world.db.now()).total_seconds()))
    assert gaps == [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 10, 10]
    if root:
        assert (_deferral(world, root)["deferred_reason"], _deferral(world, root)["deferred_for"]) == (reason, owner)
    assert _deferral(world, poll, "check")["available_at"] > world.db.now()

    if what == "identity":
        routines.credential_enable(world.db.conn, admin, ns, bot["credential_id"])
    else:
        routines.app_put(world.db.conn, admin, ns, "billing", 1000, "ACTIVE")
    assert _deferral(world, poll, "check")["available_at"] <= world.db.now()  # due at once, no time passing
    orch.drain()
    assert world.db.scalar("SELECT rounds_used FROM weave_poll_states WHERE instance_id = %s",
                           world.internal_id(poll)) == 2
    assert root is None or world.step(root, "work")["status"] == "ACTIVE"


def test_R8_only_an_enabling_wakes_the_work_deferred_for_a_disabled_app(world):
    """A put of an app that is ACTIVE already (a new quota) changes no deferral: only the put that enables a disabled
    app wakes what waited for it. (A wake there would wait for decisions that read the app ACTIVE and wait in turn
    for the app's row, which the put holds.)"""
    admin, ns = world.admin, world.namespace
    world.publish(task_flow())
    routines.app_put(world.db.conn, admin, ns, "billing", 1000, "DISABLED")
    wf = world.start("pay", {"order_id": "a"})
    before = _deferral(world, wf)
    assert before["deferred_reason"] == "APP_DISABLED" and before["available_at"] > world.db.now()
    routines.app_put(world.db.conn, admin, ns, "billing", 500, "DISABLED")  # still disabled: no wake
    routines.app_put(world.db.conn, admin, ns, "billing", 400)  # the status left as it is: no wake
    assert _deferral(world, wf) == before
    routines.app_put(world.db.conn, admin, ns, "billing", 400, "ACTIVE")
    assert _deferral(world, wf)["available_at"] <= world.db.now()
    # A deferral for it not due yet (as one that read the app disabled just before the enabling leaves it):
    # a put that finds the app ACTIVE already leaves it as it is.
    world.db.execute("UPDATE weave_pending_advances SET available_at = %s + INTERVAL 5 SECOND WHERE instance_id = %s",
                     world.db.now(), world.internal_id(wf))
    later = _deferral(world, wf)
    routines.app_put(world.db.conn, admin, ns, "billing", 300, "ACTIVE")  # ACTIVE already: no wake
    routines.app_put(world.db.conn, admin, ns, "billing", 300)
    assert _deferral(world, wf) == later


def test_R8_only_an_enabling_wakes_the_work_deferred_for_a_disabled_identity(world):
    """As for an app: enabling a credential that is ACTIVE already wakes nothing."""
    admin, ns = world.admin, world.namespace
    bot = world.credential(["workflows:start"], actor="bot")
    world.publish({"name": "two", "steps": [task_step("first"), task_step("second", after=["first"])]})
    two = world.start("two", {"order_id": "b"}, token=bot["token"])
    got, = claim(world, lease_ms=3_600_000)
    routines.credential_disable(world.db.conn, admin, ns, bot["credential_id"])
    pulse.attempt_complete(world.db.conn, got["attempt_id"], "w1", {})  # its successor is deferred for the identity
    deferral = _deferral(world, two)
    assert deferral["deferred_reason"] == "IDENTITY_DISABLED" and deferral["available_at"] > world.db.now()
    routines.credential_enable(world.db.conn, admin, ns, bot["credential_id"])
    assert _deferral(world, two)["available_at"] <= world.db.now()  # enabled: due at once
    world.db.execute("UPDATE weave_pending_advances SET available_at = %s + INTERVAL 5 SECOND, "
                     "deferred_reason = 'IDENTITY_DISABLED' WHERE instance_id = %s",
                     world.db.now(), world.internal_id(two))
    later = _deferral(world, two)
    routines.credential_enable(world.db.conn, admin, ns, bot["credential_id"])  # ACTIVE already: no wake
    assert _deferral(world, two) == later


@pytest.mark.breaks_invariants("M-4.13b")  # the queue is deleted by hand
def test_R18_a_round_whose_long_named_queue_is_gone_defers_with_its_reason_whole(world, orch):
    """Corrupt data on purpose (queues are never deleted): a POLL round whose queue, with a long name, is gone says
    so in its deferral; the reason's text is not cut to fit a narrower parameter, which refused the decision."""
    name = "a-queue-with-a-rather-long-name-of-forty-chars"[:40]
    routines.queue_put(world.db.conn, world.admin, world.namespace, name, 10)
    world.publish({"name": "poll", "steps": [{
        "key": "check", "type": "POLL", "queue": name, "handler": "example.poll", "handler_version": "1",
        "input": {}, "interval_ms": 1_000, "max_rounds": 3, "timeout_ms": 3_600_000, "task_timeout_ms": 600_000,
        "result": {"pending": ["PENDING"], "success": ["DONE"]}}]})
    wf = world.start("poll", {})
    got, = pulse.task_claim(world.db.conn, "w1", name, limit=1, lease_ms=60_000)
    pulse.attempt_complete(world.db.conn, got["attempt_id"], "w1", {"status": "PENDING"})
    world.db.execute("DELETE FROM weave_queues WHERE name = %s", name)
    world.db.advance(1_000)
    orch.drain()
    cp = _deferral(world, wf, "check")
    assert cp["attempts"] == 0 and cp["last_error"] == f"QUEUE_NOT_FOUND: queue {name} does not exist"


def test_R18_a_definition_document_with_an_unknown_field_is_refused_from_sql_too(world):
    """The Python model refuses unknown keys with a hint; a document sent straight to the routine is refused too."""
    for doc in ('{"name": "x", "steps": [{"key": "a", "type": "TIMER", "delay_ms": 1}], "stpes": []}',):
        with pytest.raises(errors.ValidationFailed) as info:
            dbmod.call(world.db.conn, "weave_definition_publish", world.admin, world.namespace, doc, "{}", "", None)
        assert info.value.field_code == "UNKNOWN_FIELD" and "stpes" in str(info.value)
    assert world.db.scalar("SELECT COUNT(*) FROM weave_definitions") == 0


YEAR_MS, DAY_MS = 31_536_000_000, 86_400_000
LIMIT_RESULT = {"pending": ["PENDING"], "success": ["DONE"]}
LIMIT_STEPS = {
    "TIMER": {"key": "wait", "type": "TIMER", "delay_ms": YEAR_MS},
    "SIGNAL": {"key": "approve", "type": "SIGNAL", "signal": {"name": "approved", "payload_version": "1"},
               "correlation": "c", "timeout_ms": YEAR_MS},
    "TASK": {"key": "charge", "type": "TASK", "queue": "payments", "handler": "h", "handler_version": "1",
             "task_timeout_ms": DAY_MS, "priority": -1000,
             "retry": {"max_attempts": 100, "initial_backoff_ms": DAY_MS, "backoff_coefficient": 10.0,
                       "max_backoff_ms": DAY_MS}},
    "POLL": {"key": "check", "type": "POLL", "queue": "payments", "handler": "h", "handler_version": "1",
             "interval_ms": DAY_MS, "max_rounds": 10_000, "timeout_ms": YEAR_MS, "task_timeout_ms": 1, "priority": 1000,
             "retry": {"max_attempts": 1, "initial_backoff_ms": 0, "backoff_coefficient": 1.0, "max_backoff_ms": 0},
             "result": LIMIT_RESULT},
}
PAST_THE_LIMITS = [
    ("TIMER", "delay_ms", 0), ("TIMER", "delay_ms", YEAR_MS + 1), ("TIMER", "delay_ms", 10**15),
    ("TIMER", "delay_ms", -1), ("TIMER", "delay_ms", 1.5), ("TIMER", "delay_ms", "60000"), ("TIMER", "delay_ms", None),
    ("SIGNAL", "timeout_ms", YEAR_MS + 1), ("POLL", "timeout_ms", 0), ("POLL", "interval_ms", DAY_MS + 1),
    ("POLL", "max_rounds", 0), ("POLL", "max_rounds", 10_001), ("TASK", "task_timeout_ms", 0),
    ("TASK", "priority", 1001), ("POLL", "retry.max_attempts", 0), ("TASK", "retry.max_attempts", 101),
    ("TASK", "retry.initial_backoff_ms", -1), ("TASK", "retry.backoff_coefficient", 0.5),
    ("POLL", "retry.backoff_coefficient", 10.5), ("TASK", "retry.max_backoff_ms", DAY_MS + 1),
    ("TASK", "retry.max_attempts", None),
]


def _limit_document(kind: str, member: str | None = None, value=None) -> tuple[str, str]:
    """The validator's document of one step at its limits, with ``member`` then set to ``value`` behind its back."""
    from procedures import definitions

    valid = definitions.validate({"name": "limits", "steps": [LIMIT_STEPS[kind]]})
    document = json.loads(valid.canonical_json)
    if member is not None:
        *outer, last = member.split(".")
        target = document["steps"][0]
        for name in outer:
            target = target[name]
        target[last] = value
    return json.dumps(document), valid.compiled_json


def _refused_by_the_validator_and_the_routine(world, document: str, compiled: str, member: str) -> None:
    """The validator refuses ``document`` and so does the routine, sent it straight, naming ``member`` (their ranges
    and rules are one), and nothing is published."""
    from procedures import definitions

    with pytest.raises(definitions.DefinitionError):
        definitions.validate(json.loads(document))
    with pytest.raises(errors.ValidationFailed) as info:
        dbmod.call(world.db.conn, "weave_definition_publish", world.admin, world.namespace, document, compiled, None,
                   None)
    assert info.value.field_code == "DEFINITION_INVALID" and member in str(info.value)
    assert world.db.scalar("SELECT COUNT(*) FROM weave_definitions") == 0


@pytest.mark.parametrize("kind", sorted(LIMIT_STEPS))
def test_R18_T1_P1_a_step_at_the_limits_of_its_numbers_is_published_from_sql(world, kind):
    document, compiled = _limit_document(kind)
    assert dbmod.call_row(world.db.conn, "weave_definition_publish", world.admin, world.namespace, document, compiled,
                          None, None)["created"] == 1


@pytest.mark.parametrize("kind, member, value", PAST_THE_LIMITS, ids=[f"{k}-{m}-{v!r}" for k, m, v in PAST_THE_LIMITS])
def test_R18_T1_P1_a_step_number_past_its_limits_is_refused_from_sql_too(world, kind, member, value):
    """The validator keeps every number of a step in its range; a document sent straight to the routine was
    published with any. Its instances then failed at start with a raw server error (a datetime overflow, a column
    that cannot be NULL), a timer of 0 ms fired at once, a poll's interval overflowed only when a round answered
    PENDING (a decision that failed until it went to review), a task of 0 attempts never started. Refused now,
    naming the step and the member, and nothing is published."""
    document, compiled = _limit_document(kind, member, value)
    _refused_by_the_validator_and_the_routine(world, document, compiled, member)


WRITTEN_WITH_AN_EXPONENT = [("TIMER", "delay_ms", "1e3"), ("SIGNAL", "timeout_ms", "1E9"),
                            ("POLL", "interval_ms", "5e3"), ("TASK", "retry.max_attempts", "1e1"),
                            ("TASK", "priority", "-1e2")]


@pytest.mark.parametrize("kind, member, text", WRITTEN_WITH_AN_EXPONENT,
                         ids=[f"{k}-{m}-{t}" for k, m, t in WRITTEN_WITH_AN_EXPONENT])
def test_R18_T1_P1_a_step_integer_written_with_an_exponent_is_refused_from_sql_too(world, kind, member, text):
    """MariaDB types 1e3 as an INTEGER, in range as a number, but the engine reads the member AS UNSIGNED, which
    stops at the e: the timer of 1e3 ms waited 1 ms (or every start failed on a truncation). The validator takes no
    such integer (Python reads it as a float); the routine refuses it too, naming the member."""
    document, compiled = _limit_document(kind, member, 424242)
    document = document.replace("424242", text)
    _refused_by_the_validator_and_the_routine(world, document, compiled, member)


def test_R18_a_lost_race_for_the_last_task_slot_is_retried_never_counted_toward_review(world, orch):
    """Another decision took the last slot between the room check and the guarded update: ROOM_TAKEN is
    transient (the decision is retried and then defers), so it never becomes CANDIDATE_FAILING."""
    with pytest.raises(Exception) as raised:
        dbmod.call(world.db.conn, "_weave_raise", 50014, "ROOM_TAKEN: no room for a task: taken concurrently")
    exc = errors.translate(raised.value.__cause__ or raised.value)
    assert isinstance(exc, errors.TransientDatabaseError) and errors.is_transient(exc)
    world.publish(signal_flow(before_timer_ms=1_000))
    wf = world.start("approval-flow", {"order_id": "o-1"})
    orch.drain()
    for _ in range(4):
        cp = world.db.row("SELECT id, version FROM weave_pending_advances WHERE step_key = 'cool_off'")
        (row,) = dbmod.call(world.db.conn, "weave_candidate_fail", "CHECKPOINT", cp["id"], cp["version"], str(exc))[0]
        assert row == {"recorded": 1, "review": 0}
    assert world.instance(wf)["status"] == "RUNNING"


def test_R8_a_start_that_loses_the_race_for_a_queue_s_last_slot_is_deferred_not_refused(world, database):
    """A start whose guarded update of the queue's slots waited for another creator that then took the last slot
    was undone as ROOM_TAKEN, and the call answered it as the transient error it is: over HTTP a 503 saying the
    database was unavailable. The call tries the decision again at once, as after a deadlock, and the start is
    made, its task deferred QUEUE_FULL (R-8)."""
    routines.queue_put(world.db.conn, world.admin, world.namespace, "tiny", 1)
    world.publish(task_flow(queue="tiny"))
    rival = world.db.connect()  # a creator that takes the last slot and has not committed yet
    starter = dbmod.connect(database)
    answers: list[dict] = []
    failures: list[BaseException] = []

    def start() -> None:
        try:
            with starter.cursor() as cur:
                cur.execute("SET SESSION innodb_lock_wait_timeout = 20")
            answers.append(routines.instance_start(starter, world.token, world.namespace, definition="pay",
                                                   app="billing", input_json='{"order_id": "a"}',
                                                   idempotency_key="race", deadline_ms=3_600_000))
        except BaseException as exc:  # looked at below
            failures.append(exc)

    thread = threading.Thread(target=start)
    try:
        with rival.cursor() as cur:
            cur.execute("START TRANSACTION")
            cur.execute("UPDATE weave_queues SET slots_taken = slots_taken + 1 WHERE name = 'tiny'")
        thread.start()
        # INNODB_TRX is a cache that a read refreshes only when the one before is 0.1 s old.
        assert wait_for(lambda: not thread.is_alive() or world.db.scalar(
            "SELECT COUNT(*) FROM information_schema.INNODB_TRX WHERE trx_state = 'LOCK WAIT' AND "
            "trx_mysql_thread_id = %s", starter.thread_id()) == 1, timeout=10, interval=0.2)
        rival.commit()
        thread.join(30)
    finally:
        rival.rollback()
        rival.close()
    assert not thread.is_alive() and failures == [] and answers[0]["created"]
    wf = answers[0]["instance"]["workflow_id"]
    assert world.instance(wf)["deferred"]["reason"] == "QUEUE_FULL"
    assert world.db.scalar("SELECT COUNT(*) FROM pulse_tasks") == 0
    with starter.cursor() as cur:  # the rival's task never existed: its slot goes back for the invariants
        cur.execute("UPDATE weave_queues SET slots_taken = slots_taken - 1 WHERE name = 'tiny'")
    starter.commit()
    starter.close()


# A full disk, as InnoDB answers it when a table's file cannot grow: 1114, "the table is full".
TABLE_FULL_TRIGGER = ("CREATE TRIGGER test_table_full BEFORE INSERT ON weave_events FOR EACH ROW "
                      "BEGIN IF NEW.type = 'TIMER_SETTLED' THEN SIGNAL SQLSTATE 'HY000' SET MYSQL_ERRNO = 1114, "
                      "MESSAGE_TEXT = 'The table ''weave_events'' is full'; END IF; END")


def test_R18_a_full_disk_is_waited_out_never_counted_toward_review(world, orch):
    """A decision refused because the disk is full goes through once someone makes room: it backs off as often as
    it fails and never becomes CANDIDATE_FAILING; the timer then settles at its own due time."""
    world.publish({"name": "one-timer", "steps": [{"key": "wait", "type": "TIMER", "delay_ms": 1_000}]})
    wf = world.start("one-timer")
    orch.drain()
    orch.retry_attempts = 1  # each failure straight to the candidate's own backoff
    world.db.execute(TABLE_FULL_TRIGGER)
    try:
        world.db.advance(1_000)
        for _ in range(5):
            orch.drain()
            world.db.advance(60_000)  # past the candidate's backoff
        assert world.instance(wf)["status"] == "RUNNING" and not world.instance(wf)["review_reasons"]
        cp = world.db.row("SELECT attempts, last_error FROM weave_pending_advances WHERE step_key = 'wait'")
        assert cp["attempts"] >= 3 and cp["last_error"].startswith("1114")
        with pytest.raises(Exception) as raised:
            world.db.execute("INSERT INTO weave_events (instance_id, seq, namespace_id, type, data, occurred_at) "
                             "VALUES (0, 0, 0, 'TIMER_SETTLED', '{}', NOW(6))")
        assert errors.is_transient(raised.value.__cause__ or raised.value)
        # A file of the server's own that cannot grow (a temporary table of a read): the same, at a node's start too.
        assert errors.is_transient(pymysql.err.OperationalError(1021, "Disk got full writing 'tmp' (Errcode: 28)"))
    finally:
        world.db.execute("DROP TRIGGER IF EXISTS test_table_full")
    orch.drain()
    assert world.instance(wf)["status"] == "SUCCEEDED"
    (settled,) = [e for e in world.events(wf) if e["type"] == "TIMER_SETTLED"]
    assert settled["data"]["due_at"] < settled["data"]["settled_at"]


def test_R18_a_business_key_that_resolves_too_long_is_a_review_not_a_refused_start(world, orch):
    """The key fits its column only once resolved: a value of 300 characters is known at activation alone."""
    world.publish(task_flow(business_key="$.input.order_id"))
    wf = world.start("pay", {"order_id": "o" * 300})
    orch.drain()
    inst = world.instance(wf)
    assert inst["status"] == "NEEDS_REVIEW" and inst["gate"] == "CLOSED"
    (reason,) = inst["review_reasons"]
    assert reason["code"] == "ACTIVATION_FAILED" and reason["step_key"] == "work"
    assert "business_key" in reason["detail"]["detail"] and "300" in reason["detail"]["detail"]
    assert world.db.scalar("SELECT COUNT(*) FROM weave_activations") == 0
    assert world.db.scalar("SELECT COUNT(*) FROM pulse_tasks") == 0
    assert world.db.in_flight() == 0


def test_R18_a_mutex_key_read_from_an_earlier_output_that_is_too_long_is_a_review_not_a_stuck_outcome(world, orch):
    """The successor activates in the transaction that consumes the earlier task's outcome: a key that cannot fit
    must send the step to review there, not fail that consumption again and again."""
    world.publish({"name": "two", "steps": [task_step("quote"),
                                            task_step("work", after=["quote"], mutex_key="$.steps.quote.output")]})
    wf = world.start("two", {"order_id": "o-1"})
    orch.drain()
    (c,) = claim(world)
    pulse.attempt_complete(world.db.conn, c["attempt_id"], "w1", {"account": "a" * 300})
    orch.drain()
    inst = world.instance(wf)
    assert inst["status"] == "NEEDS_REVIEW"
    (reason,) = inst["review_reasons"]
    assert reason["code"] == "ACTIVATION_FAILED" and reason["step_key"] == "work"
    assert "mutex_key" in reason["detail"]["detail"] and '{"account": "aaa' in reason["detail"]["detail"]
    assert world.step(wf, "quote")["status"] == "SUCCEEDED"
    assert world.db.scalar("SELECT COUNT(*) FROM pulse_inbox WHERE state = 'PENDING'") == 0
    assert world.db.scalar("SELECT COUNT(*) FROM pulse_tasks WHERE step_key = 'work'") == 0


def nested(levels: int) -> list:
    """A JSON array nested ``levels`` deep ([] is one level)."""
    value: list = []
    for _ in range(levels - 1):
        value = [value]
    return value


def after_quote(world, orch, work: dict, result: dict) -> str:
    """Starts a flow of a TASK `quote` and, after it, the step ``work``; answers `quote` with ``result``."""
    world.publish({"name": "two", "steps": [task_step("quote"), work]})
    wf = world.start("two", {"order_id": "o-1"})
    orch.drain()
    (c,) = claim(world)
    pulse.attempt_complete(world.db.conn, c["attempt_id"], "w1", result)
    orch.drain()
    return wf


def test_R18_an_earlier_output_too_deep_for_the_frozen_inputs_is_a_review_not_a_stuck_outcome(world, orch):
    """An output of 30 levels is valid JSON on its own, but the successor places it whole in its input, which its
    frozen inputs nest two levels more, past the server's 32: the successor's activation can never resolve, and
    the outcome that activates it must still be consumed, with the successor in review."""
    wf = after_quote(world, orch, task_step("work", after=["quote"], input={"q": "$.steps.quote.output"}),
                     {"deep": nested(29)})
    inst = world.instance(wf)
    assert inst["status"] == "NEEDS_REVIEW"
    (reason,) = inst["review_reasons"]
    assert reason["code"] == "ACTIVATION_FAILED" and reason["step_key"] == "work"
    assert "deeper than the 32 levels" in reason["detail"]["detail"]
    assert world.step(wf, "quote")["status"] == "SUCCEEDED"
    assert world.db.scalar("SELECT COUNT(*) FROM pulse_inbox WHERE state = 'PENDING'") == 0


def test_R7_a_deep_output_no_template_reads_never_blocks_a_later_step(world, orch):
    """An activation reads only the outputs its templates name: a step that reads only the instance's input
    activates, whatever an earlier step's output holds, and never copies it."""
    wf = after_quote(world, orch, task_step("work", after=["quote"]), {"deep": nested(29)})
    inst = world.instance(wf)
    assert inst["status"] == "RUNNING" and inst["review_reasons"] == []
    assert world.step(wf, "work")["status"] == "ACTIVE"
    (task,) = claim(world)
    assert json.loads(task["input"]) == {"order_id": "o-1"}


def test_R7_templates_read_the_outputs_they_name_whatever_the_spelling_of_the_step_key(world, orch):
    """Step keys outside [A-Za-z_][A-Za-z0-9_]* are quoted in the compiled paths; an activation must still read
    the outputs those paths name."""
    world.publish({"name": "three", "steps": [
        task_step("check-1.a"), task_step("plain_2", after=["check-1.a"]),
        task_step("work", after=["plain_2"], input={"a": '$.steps["check-1.a"].output.v',
                                                     "b": "$.steps.plain_2.output.v", "o": "$.input.order_id"},
                  business_key="$.steps.plain_2.output.v")]})
    wf = world.start("three", {"order_id": "o-1"})
    for value in ("first", "second"):
        orch.drain()
        (c,) = claim(world)
        pulse.attempt_complete(world.db.conn, c["attempt_id"], "w1", {"v": value})
    orch.drain()
    (task,) = claim(world)
    assert json.loads(task["input"]) == {"a": "first", "b": "second", "o": "o-1"}
    assert world.db.scalar("SELECT business_key FROM pulse_tasks WHERE step_key = 'work'") == "second"
    assert world.instance(wf)["status"] == "RUNNING"


def test_R7_an_expression_indexing_a_value_that_is_no_array_finds_nothing(world, orch):
    """The server's JSON paths are lax: `$[0]` of "abc" is "abc", and `$.o[0].a` of {"o": {"a": 1}} is 1. An
    expression's item of a value that is no array finds nothing and resolves to null, as the concepts page says of
    any path that finds nothing; items of arrays, and of arrays in arrays, are found as before."""
    world.publish({"name": "items", "steps": [
        task_step("first"),
        task_step("work", after=["first"], input={
            "s0": "$.input.s[0]", "o0": "$.input.o[0]", "o0a": "$.input.o[0].a", "pair": "$.input.arr[0][1]",
            "past": "$.input.arr[0][1][0]", "out_item": "$.steps.first.output.l[1]",
            "out_text": "$.steps.first.output.v[0]", "out_whole": "$.steps.first.output[0]",
            "\u00e9l": '$.input["\u00e9"][0]'})]})
    world.start("items", {"order_id": "o-1", "s": "abc", "o": {"a": 1}, "arr": [[1, 2]], "\u00e9": ["x"]})
    orch.drain()
    (c,) = claim(world)
    pulse.attempt_complete(world.db.conn, c["attempt_id"], "w1", {"v": "text", "l": [7, 8]})
    orch.drain()
    (task,) = claim(world)
    assert json.loads(task["input"]) == {"s0": None, "o0": None, "o0a": None, "pair": 2, "past": None,
                                         "out_item": 8, "out_text": None, "out_whole": None, "\u00e9l": "x"}


def test_R18_an_input_as_deep_as_a_start_allows_is_a_review_at_activation_not_a_failed_start(world, orch):
    """A step that takes the whole input nests it one level deeper in its frozen inputs, past the server's 32."""
    world.publish(task_flow(input={"all": "$.input"}))
    wf = world.start("pay", {"order_id": "o-1", "deep": nested(30)})  # 31 levels: the most a start accepts
    orch.drain()
    inst = world.instance(wf)
    assert inst["status"] == "NEEDS_REVIEW"
    (reason,) = inst["review_reasons"]
    assert reason["code"] == "ACTIVATION_FAILED" and "deeper than the 32 levels" in reason["detail"]["detail"]
    assert world.db.scalar("SELECT COUNT(*) FROM pulse_tasks") == 0


def test_R7_a_shallow_read_of_an_input_as_deep_as_a_start_allows_activates(world, orch):
    """Expressions read the input and each output where they are kept, not from one document nesting them
    deeper: a step that reads one shallow member of the deepest input a start accepts runs."""
    world.publish(task_flow())
    wf = world.start("pay", {"order_id": "o-1", "deep": nested(30)})  # 31 levels
    orch.drain()
    assert world.instance(wf)["status"] == "RUNNING"
    (task,) = claim(world)
    assert json.loads(task["input"]) == {"order_id": "o-1"}


def test_R7_a_shallow_read_of_a_deep_output_activates(world, orch):
    """An output as deep as a result may carry (30 levels under its result object) read one member deep."""
    wf = after_quote(world, orch, task_step("work", after=["quote"], input={
        "id": "$.steps.quote.output.id", "first": "$.steps.quote.output.deep[0]"}), {"id": "q-1", "deep": nested(29)})
    assert world.instance(wf)["status"] == "RUNNING"
    (task,) = claim(world)
    assert json.loads(task["input"]) == {"id": "q-1", "first": nested(28)}


def test_R18_a_task_outcome_that_fails_the_same_way_a_third_time_opens_a_review_once(world, orch):
    """An outcome is a fact kept to be applied: it stays due, and its step goes to review instead of the instance
    staying RUNNING while the outcome fails every minute."""
    world.publish(task_flow())
    wf = world.start("pay", {"order_id": "a"})
    orch.drain()
    (c,) = claim(world)
    with world.held(wf):
        pulse.attempt_complete(world.db.conn, c["attempt_id"], "w1", {"ok": True})
    error = "INVALID_STATE: the outcome could not be applied"
    for attempt in range(1, 5):
        ev = world.db.row("SELECT id, version FROM pulse_inbox WHERE state = 'PENDING'")
        (row,) = dbmod.call(world.db.conn, "weave_candidate_fail", "INBOX", ev["id"], ev["version"], error)[0]
        assert row == {"recorded": 1, "review": 1 if attempt == 3 else 0}
    inst = world.instance(wf)
    assert inst["status"] == "NEEDS_REVIEW"
    (reason,) = inst["review_reasons"]
    assert reason["code"] == "CANDIDATE_FAILING" and reason["step_key"] == "work"
    assert "failed 3 times" in reason["detail"]["detail"] and error in reason["detail"]["detail"]
    task = world.db.scalar("SELECT task_id FROM pulse_inbox")
    assert reason["detail"]["candidate"] == {"class": "INBOX", "task_id": f"tsk_{task}", "step_key": "work"}
    assert world.db.scalar("SELECT COUNT(*) FROM pulse_inbox WHERE state = 'PENDING'") == 1
    assert status_sets(world)[1]["INBOX"] == (1, 1)


def test_R18_C2_a_cancel_waiting_for_an_outcome_that_keeps_failing_says_so_and_ends_once_it_applies(world, orch):
    """The cancel waits for a running task's outcome (C-2), and applying it fails a third time: a reason says so,
    and the instance stays CANCELLING, not in review (no action could act on it: the cancel is already taken). Once
    the fault is gone the outcome applies at its next try and the cancel ends; the reason is kept (M-4.23)."""
    world.publish(task_flow())
    wf = world.start("pay", {"order_id": "a"})
    orch.drain()
    (c,) = claim(world)
    routines.instance_cancel(world.db.conn, world.token, "acme", wf, "withdrawn", "c1")
    with world.held(wf):
        pulse.attempt_complete(world.db.conn, c["attempt_id"], "w1", {"ok": True})
    for _ in range(3):
        ev = world.db.row("SELECT id, version FROM pulse_inbox WHERE state = 'PENDING'")
        dbmod.call(world.db.conn, "weave_candidate_fail", "INBOX", ev["id"], ev["version"],
                   "INVALID_STATE: the outcome could not be applied")
    inst = world.instance(wf)
    assert inst["status"] == "CANCELLING" and [r["code"] for r in inst["review_reasons"]] == ["CANDIDATE_FAILING"]
    with pytest.raises(errors.InvalidState):
        routines.instance_retry(world.db.conn, world.token, "acme", wf, "fixed", "r1")
    world.db.advance(60_000)  # past its backoff
    orch.drain()
    assert world.instance(wf)["status"] == "CANCELLED"
    assert world.db.scalar("SELECT state FROM pulse_inbox") == "CONSUMED"
    invariants.check(world.db.conn)


def test_R18_a_signal_of_an_open_wait_that_fails_a_third_time_sends_its_step_to_review_without_its_checkpoint(
        world, orch):
    """A signal no runner has looked at yet, for an open wait, fails the same way a third time: its step goes to
    review, and the wait's checkpoint goes with it, as at a signal's proof mismatch (M-4.18). It used to stay beside
    the review, not failing, until its run removed it. The operator's resolve then settles the step."""
    wf, _ = failing_in_review(world, orch)
    (reason,) = world.instance(wf)["review_reasons"]
    assert (reason["code"], reason["step_key"]) == ("CANDIDATE_FAILING", "approval")
    assert world.step(wf, "approval")["status"] == "NEEDS_REVIEW"
    assert world.db.scalar("SELECT COUNT(*) FROM weave_pending_advances") == 0
    resolved_in_review(world, orch, wf)


def test_R18_a_signal_that_fails_the_same_way_a_third_time_opens_a_review_on_the_instance(world, orch):
    world.publish(signal_flow(before_timer_ms=60_000))
    wf = world.start("approval-flow", {"order_id": "o-1"})
    orch.drain()
    send(world, wf, queued=True)  # early: its step is not active yet
    error = "INVALID_STATE: the signal could not be applied"
    for attempt in range(1, 4):
        sig = world.db.row("SELECT id, version FROM weave_signals WHERE status = 'PENDING'")
        (row,) = dbmod.call(world.db.conn, "weave_candidate_fail", "SIGNAL", sig["id"], sig["version"], error)[0]
        assert row == {"recorded": 1, "review": 1 if attempt == 3 else 0}
    (reason,) = world.instance(wf)["review_reasons"]
    assert reason["code"] == "CANDIDATE_FAILING" and reason["step_key"] is None
