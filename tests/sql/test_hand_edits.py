"""Rows changed behind the engine's back (a DBA's fix by hand, a table restored alone, a script deleting rows): what
would leave an instance waiting for ever, with nothing to say so, is named by an invariant that ``weave status
--check`` runs, and what a decision meets is refused with a reason, never taken for a busy row."""

from __future__ import annotations

import pytest

from procedures import errors, invariants, pulse
from tests.sql.test_polls import advance_checkpoint, poll_flow, started
from tests.sql.test_timers import task_flow, timer_flow


def broken(world) -> dict[str, list]:
    return invariants.violations(world.db.conn)


@pytest.mark.breaks_invariants("M-4.21")
def test_R5_M4_21_an_open_timer_whose_checkpoint_was_deleted_is_caught(world):
    world.publish(timer_flow())
    wf = world.start("cool-off", {})
    assert "M-4.21" not in broken(world)
    world.db.execute("DELETE FROM weave_pending_advances WHERE instance_id = %s", world.internal_id(wf))
    step = world.db.scalar("SELECT id FROM weave_steps WHERE instance_id = %s", world.internal_id(wf))
    assert broken(world) == {"M-4.21": [step]}


@pytest.mark.breaks_invariants("M-4.22")
def test_K7_M4_22_a_task_outcome_deleted_before_it_was_applied_is_caught(world):
    world.publish(task_flow())
    wf = world.start("charge", {"order_id": "o-1"})
    [claimed] = pulse.task_claim(world.db.conn, "w1", "payments")
    with world.held(wf):  # the report meets a busy instance: its outcome waits in the inbox
        pulse.attempt_complete(world.db.conn, claimed["attempt_id"], "w1", {"charged": 100})
    assert "M-4.22" not in broken(world)
    world.db.execute("DELETE FROM pulse_inbox WHERE instance_id = %s", world.internal_id(wf))
    step = world.db.scalar("SELECT id FROM weave_steps WHERE instance_id = %s", world.internal_id(wf))
    assert broken(world) == {"M-4.22": [step]}


@pytest.mark.breaks_invariants("M-4.4")
def test_P4_M4_4_a_poll_whose_every_round_was_deleted_is_caught(world, orch):
    world.publish(poll_flow())
    wf = started(world, orch)
    iid = world.internal_id(wf)
    assert "M-4.4" not in broken(world)
    world.db.execute("DELETE FROM weave_poll_rounds WHERE instance_id = %s", iid)
    activation = world.db.scalar("SELECT activation_id FROM weave_poll_states")
    assert broken(world) == {"M-4.4": [activation]}
    assert advance_checkpoint(world, wf) in {"NOT_DUE", "WAITING"}  # nothing is guessed from what is gone


@pytest.mark.breaks_invariants("M-4.7b", "M-4.22")
def test_K4_a_running_attempt_whose_task_was_deleted_is_refused_not_taken_for_busy(world):
    """Before, the lease's recovery read the missing task as one another transaction held, answered BUSY, and the
    loop scanned again at once, for ever (1,459 tries in 5 s)."""
    world.publish(task_flow())
    world.start("charge", {"order_id": "o-1"})
    [claimed] = pulse.task_claim(world.db.conn, "w1", "payments", lease_ms=1_000)
    world.db.execute("DELETE FROM pulse_tasks")
    world.db.advance(2_000)
    with pytest.raises(errors.InvalidState):
        pulse.lease_recover(world.db.conn, claimed["attempt_id"])
    assert set(broken(world)) == {"M-4.7b", "M-4.22"}  # and `weave status --check` names it


@pytest.mark.breaks_invariants("M-4.13b")
def test_M4_13b_an_instance_whose_app_was_deleted_is_named_and_its_read_says_why(world):
    """Before, the read of the instance failed inside the API (a 500), and no invariant saw the missing app."""
    world.publish(timer_flow())
    wf = world.start("cool-off", {})
    assert "M-4.13b" not in broken(world)
    world.db.execute("DELETE FROM weave_apps")
    assert set(broken(world)) == {"M-4.13b"}
    with pytest.raises(errors.InvalidState):
        world.instance(wf)


@pytest.mark.breaks_invariants("M-4.13c")
def test_M4_13c_an_attempt_or_an_outcome_naming_another_instance_than_its_task_s_is_named(world):
    """What orders an instance's decisions reads its running attempts and waiting outcomes by the instance they
    name (R-13, F-9): a row naming another instance would be read among that instance's facts instead."""
    world.publish(task_flow())
    wf = world.start("charge", {"order_id": "o-1"})
    [claimed] = pulse.task_claim(world.db.conn, "w1", "payments")
    assert world.db.scalar("SELECT instance_id FROM pulse_attempts WHERE id = %s", claimed["attempt_id"]) == \
        world.internal_id(wf)  # the claim names it
    assert "M-4.13c" not in broken(world)
    world.db.execute("UPDATE pulse_attempts SET instance_id = instance_id + 1000")
    assert set(broken(world)) == {"M-4.13c"}
    world.db.execute("UPDATE pulse_attempts SET instance_id = instance_id - 1000")
    with world.held(wf):
        pulse.attempt_complete(world.db.conn, claimed["attempt_id"], "w1", {"shipped": True})
    world.db.execute("UPDATE pulse_inbox SET instance_id = instance_id + 1000")
    assert set(broken(world)) == {"M-4.13c"}
