"""Signals against real `weave orchestrator` processes (Q-2): accepted while every runner is down, consumed
after one starts; a deadline passed while it was down does not beat an on-time signal. Effects are
awaited by polling the database; no test sleeps for a due time."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.signals import send, signal_flow
from tests.support.waiting import wait_for

pytestmark = pytest.mark.process
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def orchestrators(db, database, tmp_path):
    """Starts `python -m orchestrator.cli orchestrator` processes on the test database; stops them all."""
    procs: list[subprocess.Popen] = []

    def start() -> subprocess.Popen:
        log = open(tmp_path / f"orchestrator-{len(procs)}.log", "wb")
        proc = subprocess.Popen([sys.executable, "-m", "orchestrator.cli", "orchestrator", "--idle-probe-ms", "10"],
                                cwd=REPO, env={**os.environ, "WEAVE_DSN": database.url()}, stdout=log,
                                stderr=subprocess.STDOUT)
        log.close()
        procs.append(proc)
        return proc

    def stop(proc: subprocess.Popen, how: int = signal.SIGTERM) -> None:
        if proc.poll() is None:
            proc.send_signal(how)
            proc.wait(timeout=20)

    start.stop = stop  # type: ignore[attr-defined]
    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=20)


def test_S10_S11_signals_accepted_while_every_runner_is_down_are_consumed_in_acceptance_order(world, orchestrators):
    world.publish(signal_flow(then_timer=True, before_timer_ms=1_000))  # the SIGNAL step waits for a runner
    instances = [world.start("approval-flow", {"order_id": f"o-{i}"}) for i in range(5)]
    receipts: dict[str, list] = {wf: [] for wf in instances}
    for round_no in range(3):  # interleaved, so acceptance order differs from instance order
        for i, wf in enumerate(instances):
            receipts[wf].append(send(world, wf, f"{wf}-{round_no}", correlation_key=f"o-{i}",
                                     payload=f'{{"round": {round_no}}}'))
        send(world, instances[0], f"miss-{round_no}", correlation_key="nobody")
    assert world.db.scalar("SELECT COUNT(*) FROM weave_signals WHERE status = 'PENDING'") == 18

    world.db.advance(1_001)
    orch = orchestrators()
    assert wait_for(lambda: world.db.scalar(
        "SELECT COUNT(*) FROM weave_waits WHERE kind = 'SIGNAL' AND status = 'SATISFIED'") == 5, timeout=60)
    orchestrators.stop(orch, signal.SIGKILL)
    for wf in instances:
        step = world.step(wf, "approval")
        assert step["wait"]["winner_signal_id"] == receipts[wf][0]["signal_id"]  # the first accepted wins
        assert step["output"] == {"round": 0}
        assert world.step(wf, "after_approval")["status"] == "ACTIVE"
    dispositions = world.db.rows("SELECT disposition, COUNT(*) AS n FROM weave_signals WHERE status = 'REJECTED' "
                                 "GROUP BY disposition ORDER BY disposition")
    assert {r["disposition"]: r["n"] for r in dispositions} == {"CORRELATION_MISMATCH": 3, "WAIT_SETTLED": 10}
    assert world.db.scalar("SELECT COUNT(*) FROM weave_signals WHERE status = 'PENDING'") == 0


def test_S13_deadline_passed_while_runners_were_down_does_not_expire_a_wait_an_on_time_signal_wins(
        world, orchestrators):
    world.publish(signal_flow(timeout_ms=60_000, before_timer_ms=1_000))  # a runner opens the wait
    wf = world.start("approval-flow", {"order_id": "o-1"})
    world.db.advance(1_001)
    first = orchestrators()
    assert wait_for(lambda: world.db.scalar("SELECT status FROM weave_waits WHERE step_key = 'approval'")
                    == "WAITING", timeout=60)
    orchestrators.stop(first)  # SIGTERM: a clean stop
    assert first.returncode == 0

    sig = send(world, wf)  # accepted on time, with nobody running
    world.db.advance(5 * 60_000)  # the wait deadline passes while every runner is down
    orchestrators()
    assert wait_for(lambda: world.db.scalar("SELECT status FROM weave_waits WHERE step_key = 'approval'")
                    != "WAITING", timeout=60)
    inst = world.instance(wf)
    approval = world.step(wf, "approval")
    assert approval["wait"]["status"] == "SATISFIED"
    assert approval["wait"]["winner_signal_id"] == sig["signal_id"]
    assert inst["status"] == "SUCCEEDED" and inst["review_reasons"] == []
    assert "SIGNAL_TIMEOUT" not in [e["type"] for e in world.events(wf)]


def test_S5_cli_sends_with_the_payload_as_given_and_gets_the_current_state(world, database, orchestrators):
    import json

    world.publish(signal_flow())
    wf = world.start("approval-flow", {"order_id": "o-1"})
    env = {**os.environ, "WEAVE_DSN": database.url(), "WEAVE_TOKEN": world.token, "WEAVE_NAMESPACE": "acme"}

    def weave(*argv: str) -> dict:
        out = subprocess.run([sys.executable, "-m", "orchestrator.cli", *argv, "--json"], cwd=REPO, env=env,
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    raw = '{"approved":true, "amount": 12345678901234567890}'
    argv = ["signals", "send", wf, "--step", "approval", "--name", "approval.decided", "--payload-version", "1",
            "--activation", "1", "--correlation-key", "o-1", "--payload", raw, "--reason", "desk approved",
            "--idempotency-key", "cli-1"]
    receipt = weave(*argv)
    assert receipt["status"] == "PENDING" and receipt["replayed"] is False
    assert weave(*argv)["replayed"] is True
    orchestrators()
    assert wait_for(lambda: weave("signals", "get", wf, receipt["signal_id"])["status"] == "CONSUMED", timeout=60)
    got = weave("signals", "get", wf, receipt["signal_id"])
    assert got["payload"]["amount"] == 12345678901234567890 and got["actor"] == "ops"
    assert weave("signals", "explain", wf, "approval")["signals"][0]["why"] == "WON"
    bad = subprocess.run([sys.executable, "-m", "orchestrator.cli", *argv[:-2], "--idempotency-key", "cli-2",
                          "--payload", "{oops"], cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 6 and "PAYLOAD_INVALID" in bad.stderr  # 6: an invalid request
