"""The Pulse worker in-process (K-2, K-3, K-8, K-9) with the example handlers and the built-in http handler,
against the real database and its test clock. Waiting is for effects (``wait_for``), never for a due time."""

from __future__ import annotations

import json
import logging
import socket
import sys
import threading
import time
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pymysql
import pytest

import orchestrator.example_handlers  # noqa: F401 - registers example.*
from orchestrator import Retryable, handler
from orchestrator import http_handler as http
from orchestrator.handlers import HandlerModuleError, Registry, TaskContext, load_modules, registry
from orchestrator.worker import EXPECTED_LATE_S, Worker, run_worker
from procedures import db as dbmod
from procedures import errors, installer, pulse
from procedures.connections import Connections
from tests.support.waiting import wait_for

HOUR = 3_600_000


def task_flow(name="job", handler="example.echo", version="1", input=None, **fields) -> dict:
    step = {"key": "work", "type": "TASK", "queue": "payments", "handler": handler, "handler_version": version,
            "input": input if input is not None else {"order_id": "$.input.order_id"}}
    step.update(fields)
    return {"name": name, "steps": [step]}


def make_worker(database, **kw) -> Worker:
    kw.setdefault("concurrency", 2)
    kw.setdefault("lease_ms", 30_000)
    kw.setdefault("heartbeat_ms", 10_000)
    kw.setdefault("idle_probe_ms", 10)
    kw.setdefault("grace_ms", 10_000)
    return Worker(database, ["payments"], **kw)


def queue_jobs(world, orch, n: int) -> None:
    """n instances of the one-task flow, each with its task QUEUED."""
    world.publish(task_flow())
    for i in range(n):
        world.start("job", {"order_id": f"o-{i}"})
    orch.drain()


def task_row(world, wf: str) -> dict:
    return world.db.row("SELECT * FROM pulse_tasks WHERE instance_id = %s", world.internal_id(wf))


def attempts(world, wf: str) -> list[dict]:
    return world.db.rows("SELECT a.* FROM pulse_attempts a JOIN pulse_tasks t ON t.id = a.task_id "
                         "WHERE t.instance_id = %s ORDER BY a.attempt_no", world.internal_id(wf))


def in_thread(worker: Worker, **run_kw) -> threading.Thread:
    thread = threading.Thread(target=worker.run, kwargs=run_kw, daemon=True)
    thread.start()
    return thread


def test_K8_worker_runs_the_registered_handler_and_the_step_gets_its_output(world, orch, database):
    world.publish(task_flow(input={"order_id": "$.input.order_id", "n": [1, 2]}))
    wf = world.start("job", {"order_id": "o-1"})
    orch.drain()
    stats = make_worker(database).run(max_claims=1)
    assert stats["SUCCEEDED"] == 1
    orch.drain()
    inst = world.instance(wf)
    assert inst["status"] == "SUCCEEDED" and inst["steps"][0]["output"] == {"order_id": "o-1", "n": [1, 2]}


@pytest.mark.parametrize("name,version", [("nobody.here", "1"), ("example.echo", "2")])
def test_K8_unknown_handler_or_version_fails_non_retryable_with_HANDLER_NOT_FOUND(world, orch, database, name,
                                                                                   version):
    world.publish(task_flow(handler=name, version=version, retry={"max_attempts": 3, "initial_backoff_ms": 0}))
    wf = world.start("job", {"order_id": "o"})
    orch.drain()
    assert make_worker(database).run(max_claims=1)["FAILED"] == 1
    task = task_row(world, wf)
    assert task["status"] == "FAILED" and task["attempts_used"] == 1
    assert task["error"].startswith("HANDLER_NOT_FOUND")
    # What this worker has instead: another version of the handler, or none.
    held = "in version '1' only" if name == "example.echo" else "has no 'nobody.here' in any version"
    assert held in task["error"], task["error"]
    orch.drain()
    reason, = world.instance(wf)["review_reasons"]
    assert reason["code"] == "TASK_FAILED" and reason["detail"]["last_error"].startswith("HANDLER_NOT_FOUND")


def test_K8_retryable_failure_is_retried_by_the_frozen_policy(world, orch, database):
    world.publish(task_flow(handler="example.flaky", input={"succeed_on_attempt": 3, "value": "v"},
                            retry={"max_attempts": 3, "initial_backoff_ms": 2_000, "backoff_coefficient": 2.0},
                            task_timeout_ms=HOUR))
    wf = world.start("job", {})
    orch.drain()
    worker = make_worker(database)
    assert worker.run(max_claims=1)["RETRY_SCHEDULED"] == 1
    assert worker.run(exit_when_idle=True)["claimed"] == 1  # nothing before the backoff has passed
    world.db.advance(2_000)
    worker.run(max_claims=1)
    world.db.advance(4_000)
    stats = worker.run(max_claims=1)
    assert stats["RETRY_SCHEDULED"] == 2 and stats["SUCCEEDED"] == 1
    assert [a["status"] for a in attempts(world, wf)] == ["FAILED", "FAILED", "SUCCEEDED"]
    assert attempts(world, wf)[0]["error"].startswith("flaky: attempt 1")
    orch.drain()
    assert world.step(wf, "work")["output"] == {"attempt": 3, "value": "v"}


def test_K8_any_other_exception_is_a_non_retryable_failure(world, orch, database, caplog):
    world.publish(task_flow(handler="example.fail", input={"message": "card declined"},
                            retry={"max_attempts": 5, "initial_backoff_ms": 0}))
    wf = world.start("job", {})
    orch.drain()
    with caplog.at_level(logging.INFO, logger="weave.worker"):
        assert make_worker(database).run(max_claims=1)["FAILED"] == 1
    task = task_row(world, wf)
    assert task["attempts_used"] == 1 and task["error"] == "RuntimeError: card declined"
    # The step goes to review: its line is a warning (WEAVE_LOG_LEVEL=WARNING keeps it) and carries the traceback,
    # which the task's one-line error does not.
    ended, = [r for r in caplog.records if r.getMessage() == "attempt ended"]
    assert ended.levelno == logging.WARNING and ended.fields["task_status"] == "FAILED"
    assert "Traceback (most recent call last)" in ended.fields["traceback"]
    assert "RuntimeError: card declined" in ended.fields["traceback"]


def test_K8_an_attempt_that_succeeds_or_is_retried_ends_on_an_info_line_without_a_traceback(world, orch, database,
                                                                                          caplog):
    world.publish(task_flow(handler="example.echo"))
    world.start("job", {"order_id": "o-1"})
    orch.drain()
    with caplog.at_level(logging.INFO, logger="weave.worker"):
        assert make_worker(database).run(max_claims=1)["SUCCEEDED"] == 1
    ended, = [r for r in caplog.records if r.getMessage() == "attempt ended"]
    assert ended.levelno == logging.INFO and "traceback" not in ended.fields


def test_K8_handlers_get_a_context_and_results_must_be_json(world, orch, database):
    private = Registry()
    seen: list[TaskContext] = []

    @handler("ctx.probe", version="7", into=private)
    def probe(input, ctx):
        seen.append(ctx)
        return {"got": input}

    @handler("ctx.bad", version="1", into=private)
    def bad(input):
        return {"not json": object()}

    world.publish(task_flow("probe", handler="ctx.probe", version="7"))
    world.publish(task_flow("bad", handler="ctx.bad"))
    wf = world.start("probe", {"order_id": "o"})
    bad_wf = world.start("bad", {"order_id": "o"})
    orch.drain()
    make_worker(database, handlers=private).run(max_claims=2)
    ctx, = seen
    assert (ctx.workflow_id, ctx.step_key, ctx.attempt_no, ctx.round_no, ctx.namespace) == (wf, "work", 1, 0, "acme")
    assert ctx.task_id == f"tsk_{task_row(world, wf)['id']}" and not ctx.cancel_requested
    assert task_row(world, wf)["status"] == "SUCCEEDED"
    bad_task = task_row(world, bad_wf)
    assert bad_task["status"] == "FAILED" and bad_task["error"].startswith("RESULT_INVALID")


@pytest.mark.parametrize("amount", ["1e400", "-1e400", "1.5e309"])
def test_K8_R18_an_input_number_past_a_double_fails_the_task_for_review_never_reaches_a_handler_as_infinity(
        world, orch, database, amount):
    """An instance started from SQL kept its input as the JSON text it was given, and a number past the range of a
    double (which the API refuses) passed there: the worker parsed it as infinity and ran the handler with that, an
    amount no payment can have. The engine now refuses such a number where it comes in; a task input frozen before
    it did is still refused by the worker: the attempt fails, not retryable, saying why, and the step goes to
    review."""
    private = Registry()
    seen: list = []

    @handler("pay.charge", version="1", into=private)
    def charge(input):
        seen.append(input)
        return {"charged": True}

    world.publish(task_flow("charge", handler="pay.charge", input={"amount": "$.input.amount"}))
    with pytest.raises(errors.ValidationFailed) as refused:
        dbmod.call(world.db.conn, "weave_instance_start", world.token, "acme", "charge", None, "billing",
                   f'{{"amount": {amount}}}', None, HOUR, None, f"start-{amount}")
    assert refused.value.field_code == "INPUT_INVALID"
    wf = world.start("charge", {"amount": 1})
    orch.drain()
    world.db.execute("UPDATE pulse_tasks SET input = %s WHERE instance_id = %s",  # frozen before the refusal
                     f'{{"amount": {amount}}}', world.internal_id(wf))
    make_worker(database, handlers=private).run(max_claims=1)
    orch.drain()
    assert seen == []
    task = task_row(world, wf)
    assert task["status"] == "FAILED" and task["error"].startswith("INPUT_INVALID") and amount in task["error"]
    instance = world.instance(wf)
    assert instance["status"] == "NEEDS_REVIEW" and [r["code"] for r in instance["review_reasons"]] == ["TASK_FAILED"]


def each_fails_once(world, orch, database, private: Registry, *handlers: str) -> list[str]:
    """Runs one single-attempt task for each handler of ``private``; each must end its attempt FAILED, reported
    (never left to its lease). Answers the instances, in the handlers' order."""
    for name in handlers:
        world.publish(task_flow(name.replace(".", "-"), handler=name, retry={"max_attempts": 1}))
    started = [world.start(name.replace(".", "-"), {"order_id": "o"}) for name in handlers]
    orch.drain()
    stats = make_worker(database, handlers=private).run(max_claims=len(handlers))
    assert stats["FAILED"] == len(handlers) and not stats["report_failed"], stats
    return started


def test_K8_a_result_or_an_error_holding_a_lone_surrogate_fails_its_attempt_and_is_reported(world, orch, database):
    """Python holds a string with a lone surrogate ("\\ud800", as json.loads makes of that escape in a response);
    no report can carry one. Its report used to fail each time, and the attempt ran out its lease (UNKNOWN,
    review) although the handler had ended: the result is now a non-retryable RESULT_INVALID, and such an error
    text is reported escaped."""
    private = Registry()

    @handler("lone.result", version="1", into=private)
    def lone_result(input):
        return json.loads('{"status": "DONE", "note": "\\ud800"}')

    @handler("lone.error", version="1", into=private)
    def lone_error(input):
        raise RuntimeError("declined \ud800")

    result_wf, error_wf = each_fails_once(world, orch, database, private, "lone.result", "lone.error")
    assert task_row(world, result_wf)["error"].startswith("RESULT_INVALID")
    assert task_row(world, error_wf)["error"] == "RuntimeError: declined \\ud800"


def test_K8_an_exception_whose_text_ends_the_thread_fails_its_attempt_and_the_next_task_still_runs(
        world, orch, database, caplog):
    """An exception whose own __str__ raised SystemExit escaped the failure's description: the thread that ran the
    attempt ended without a line in the log (Python's thread hook says nothing of SystemExit), and the worker,
    with one thread, went on claiming tasks that nothing ran, their leases kept alive by its heartbeats, until it
    was stopped and they ended UNKNOWN. The failure is described, reported, and the thread goes on."""
    private = Registry()

    class Odd(Exception):
        def __str__(self):
            raise SystemExit(3)

    @handler("odd.exc", version="1", into=private)
    def odd(input):
        raise Odd()

    @handler("pay.charge", version="1", into=private)
    def charge(input):
        return {"charged": True}

    world.publish(task_flow("odd", handler="odd.exc", retry={"max_attempts": 1}))
    world.publish(task_flow("charge", handler="pay.charge"))
    odd_wf = world.start("odd", {"order_id": "o-1"})
    orch.drain()
    charge_wf = world.start("charge", {"order_id": "o-2"})
    orch.drain()
    with caplog.at_level(logging.INFO, logger="weave.worker"):
        stats = make_worker(database, handlers=private, concurrency=1).run(max_claims=2)
    orch.drain()
    assert stats["FAILED"] == 1 and stats["SUCCEEDED"] == 1, stats
    assert task_row(world, odd_wf)["error"] == "Odd (its text could not be read: SystemExit)"
    assert world.step(charge_wf, "work")["output"] == {"charged": True}
    ended = [r for r in caplog.records if r.getMessage() == "attempt ended"]
    assert {r.fields["workflow_id"] for r in ended} == {odd_wf, charge_wf}  # each line names its instance
    assert {r.fields["step"] for r in ended} == {"work"} and {r.fields["namespace"] for r in ended} == {"acme"}


def test_K8_a_result_whose_own_code_fails_as_it_is_written_is_result_invalid_at_once(world, orch, database):
    """A mapping whose items() raises, or a dict changed while it is written, failed outside the errors caught:
    the attempt was left to its lease and ended UNKNOWN ("effect unknown"), although the handler had ended and
    its value would never be JSON. It fails RESULT_INVALID at once, naming what broke."""
    private = Registry()

    class Broken(dict):
        def items(self):
            raise KeyError("amount")

    class Growing(dict):
        def items(self):
            for key, value in list(super().items()):
                self[f"{key}-again"] = value
                yield key, value
            raise RuntimeError("dictionary changed size during iteration")

    @handler("broken.result", version="1", into=private)
    def broken(input):
        return Broken(amount=1)

    @handler("growing.result", version="1", into=private)
    def growing(input):
        return Growing(amount=1)

    broken_wf, growing_wf = each_fails_once(world, orch, database, private, "broken.result", "growing.result")
    assert task_row(world, broken_wf)["error"] == \
        "RESULT_INVALID: the handler returned a value that is not JSON: KeyError: 'amount'"
    assert task_row(world, growing_wf)["error"].startswith("RESULT_INVALID: the handler returned a value that is "
                                                           "not JSON: RuntimeError")


def test_K1_a_worker_for_a_queue_no_queue_can_be_named_refuses_to_be_built(database):
    # Every claim it made would be refused QUEUES_INVALID: it says so where it is made, naming the name.
    for queues in (["payments", "pay ments"], ['pay"ments'], ["payments,"]):
        with pytest.raises(ValueError, match="not a queue name"):
            Worker(database, queues=queues)
    Worker(database, queues=["payments", "mail,reports"])  # names, and comma lists of them


@pytest.mark.parametrize("settings, refusal", [
    ({"concurrency": 1001}, "concurrency must be 1-1000"), ({"concurrency": 0}, "concurrency must be 1-1000"),
    ({"lease_ms": 86_400_001}, r"lease_ms \(--lease-ms\) must be at most"),
    ({"worker_id": "w" * 129}, r"worker_id \(--worker-id\) must be 1-128"),
    ({"worker_id": ""}, "worker_id .* must be 1-128"), ({"grace_ms": -1}, "grace_ms must not be negative"),
    ({"lease_ms": 0}, r"lease_ms \(--lease-ms\) must be positive, not 0"),
    ({"heartbeat_ms": 0}, r"heartbeat_ms \(--heartbeat-ms\) must be positive"),
    ({"lease_ms": 5_000, "heartbeat_ms": 5_000}, r"heartbeat_ms \(--heartbeat-ms, 5000\) must be shorter")])
def test_K1_a_worker_whose_claims_would_be_refused_refuses_to_be_built(database, settings, refusal):
    """Each of these would pass the command line and then stop the worker at its first claim, which the claim
    routine refuses (LIMIT_INVALID, LEASE_INVALID, WORKER_ID_INVALID); a negative grace would end every stop at
    once. Refused where they are set, naming the setting."""
    with pytest.raises(ValueError, match=refusal):
        Worker(database, ["payments"], **settings)
    Worker(database, ["payments"], concurrency=1000, lease_ms=86_400_000, worker_id="w" * 128, grace_ms=0)


def test_K1_an_empty_worker_id_from_the_command_line_is_refused_not_replaced(database, capsys):
    """`--worker-id ''` named no worker and was quietly replaced by a generated id; it is refused as any id the
    claims would refuse, naming the flag."""
    assert run_worker(database, queues=["payments"], worker_id="") == 2
    assert "worker_id (--worker-id) must be 1-128 characters, not 0" in capsys.readouterr().err


@pytest.mark.parametrize("given", ["./handlers_here.py", "myapp/handlers"])
def test_K8_a_handler_module_given_as_a_file_path_is_told_to_give_its_name(database, tmp_path, monkeypatch, capsys,
                                                                            given):
    monkeypatch.chdir(tmp_path)
    assert run_worker(database, queues=["payments"], handler_modules=[given]) == 1
    line, = capsys.readouterr().err.strip().splitlines()
    assert f"cannot import handler module {given}" in line and "give the module's name, not a file path" in line


def test_K8_decorator_and_Retryable_are_exported_for_handler_modules():
    assert Retryable.__module__ == "orchestrator.handlers"
    assert "example.echo@1" in registry.names() and "http@1" in registry.names()


def test_K4_a_report_that_meets_its_routine_being_installed_again_is_tried_again_within_the_lease(world, orch,
                                                                                                  database):
    """`weave migrate` installs a routine again by dropping and creating it (a new build, another definer): a report
    made in between met "PROCEDURE does not exist" (1305), which was not tried again, so the attempt, whose handler
    had succeeded, ran out its lease and went to review as TASK_UNKNOWN. It is tried again for the lease, as a lost
    connection is, and lands once the routine is back."""
    private = Registry()
    dropped = threading.Event()

    @handler("charge.during.migrate", version="1", into=private)
    def charge(input):
        with dbmod.connect(database) as conn, conn.cursor() as cur:
            cur.execute("DROP PROCEDURE pulse_attempt_complete")  # the migrate's DROP, before its CREATE
        dropped.set()
        return {"charged": True}

    world.publish(task_flow("migrating", handler="charge.during.migrate", retry={"max_attempts": 1}))
    wf = world.start("migrating", {"order_id": "o"})
    orch.drain()
    worker = make_worker(database, handlers=private)
    retried = threading.Event()
    discard = worker._connections.discard

    def discarded() -> None:  # the report's retry drops its connection first
        retried.set()
        discard()

    worker._connections.discard = discarded  # type: ignore[method-assign]
    stats: dict = {}
    thread = threading.Thread(target=lambda: stats.update(worker.run(max_claims=1)))
    thread.start()
    try:
        assert dropped.wait(30) and retried.wait(10)
        installer.migrate(database, test_clock=True)  # the migrate's CREATE
    finally:
        thread.join(60)
        installer.migrate(database, test_clock=True)
    assert stats["SUCCEEDED"] == 1 and not stats.get("report_failed"), stats
    orch.drain()
    assert world.instance(wf)["status"] == "SUCCEEDED"


def test_K2_heartbeats_keep_the_lease_and_bring_the_cancel_request(world, orch, database):
    world.publish(task_flow(handler="example.sleep", input={"ms": 10_000, "honour_cancel": True},
                            task_timeout_ms=HOUR))
    wf = world.start("job", {})
    orch.drain()
    worker = make_worker(database, lease_ms=2_000, heartbeat_ms=50)
    thread = in_thread(worker, max_claims=1)
    assert wait_for(lambda: task_row(world, wf)["status"] == "RUNNING", timeout=10)
    first_lease = attempts(world, wf)[0]["lease_expires_at"]
    assert wait_for(lambda: attempts(world, wf)[0]["lease_expires_at"] > first_lease, timeout=10)
    world.db.execute("CALL _pulse_task_cancel(%s, %s, @o)", task_row(world, wf)["id"], world.db.now())
    thread.join(timeout=10)
    assert not thread.is_alive()
    assert task_row(world, wf)["status"] == "CANCELLED"  # the handler stopped early; no retry after a cancel
    assert worker.stats["CANCELLED"] == 1


def test_K2_a_heartbeat_refused_after_the_attempts_own_report_is_no_lost_lease(world, orch, database):
    """The heartbeat thread takes its list of running attempts, then beats each; an attempt whose report commits
    in between is refused (it is no longer RUNNING). That refusal is the report's doing: the attempt is not marked
    lost and no "lease lost" warning is written (a busy worker wrote several such false warnings per heartbeat).
    A refusal of an attempt the worker has not reported is a lost lease, as before."""
    from orchestrator.worker import _context

    queue_jobs(world, orch, 2)
    worker = make_worker(database)
    try:
        reported, other = (_context(c) for c in pulse.task_claim(world.db.conn, worker.worker_id, "payments", limit=2))
        for ctx in (reported, other):
            pulse.attempt_complete(world.db.conn, ctx.attempt_id, worker.worker_id, {"n": 1})
        reported._reporting.set()  # what the worker sets as it reports
        worker._heartbeat(reported)
        assert not reported.lease_lost and worker.stats["lease_lost"] == 0
        worker._heartbeat(other)  # refused, and this worker never reported it: the lease is gone
        assert other.lease_lost and worker.stats["lease_lost"] == 1
    finally:
        worker.close()


def test_K2_a_heartbeat_that_fails_unexpectedly_loses_no_lease_and_the_next_one_beats(world, orch, database):
    """A beat that fails with an error no retry cures (here: its connection's current database holds no routine,
    1305) is logged and the next beat, on a new connection, renews the lease. The heartbeat thread used to end on
    such an error while the worker went on claiming: every running attempt's lease then ran out."""
    from orchestrator.worker import _context

    queue_jobs(world, orch, 1)
    worker = make_worker(database)
    empty = f"{database.database}_empty"
    world.db.execute(f"CREATE DATABASE `{empty}`")
    try:
        ctx = _context(pulse.task_claim(world.db.conn, worker.worker_id, "payments", limit=1)[0])
        lease = world.db.scalar("SELECT lease_expires_at FROM pulse_attempts WHERE id = %s", ctx.attempt_id)
        worker._beats.get().select_db(empty)
        worker._heartbeat(ctx)  # raised nothing
        assert not ctx.lease_lost and worker.stats["lease_lost"] == 0
        world.db.advance(1000)
        worker._heartbeat(ctx)
        renewed = world.db.scalar("SELECT lease_expires_at FROM pulse_attempts WHERE id = %s", ctx.attempt_id)
        assert renewed > lease and ctx.lease_expires_at == renewed
    finally:
        worker.close()
        world.db.execute(f"DROP DATABASE `{empty}`")


def test_K2_a_heartbeat_on_a_hung_node_fails_within_its_interval_and_the_next_goes_to_a_node_that_answers(
        world, orch, database):
    """Two nodes in front of the server; the one the heartbeats use hangs (connections stay open, nothing is
    answered). With the DSN's read timeout (120 s) the beat would wait that long, and every other attempt's beat
    behind it, past their leases. The heartbeat connections answer within a heartbeat interval or fail: the beat
    fails after about a second, and the next one renews the lease through the other node."""
    from orchestrator.worker import _context
    from tests.support.proxy import two_nodes

    queue_jobs(world, orch, 1)
    with two_nodes(database, connect_timeout=1) as (nodes, dsn):
        worker = make_worker(dsn, heartbeat_ms=1_000)
        try:
            ctx = _context(pulse.task_claim(world.db.conn, worker.worker_id, "payments", limit=1)[0])
            worker._heartbeat(ctx)
            first = ctx.lease_expires_at
            used = next(n for n in nodes if n.port == worker._beats.get().port)
            used.hang()
            began = time.monotonic()
            world.db.advance(1000)
            worker._heartbeat(ctx)  # fails on the hung node
            assert time.monotonic() - began < 10 and ctx.lease_expires_at == first and not ctx.lease_lost
            worker._heartbeat(ctx)
            assert ctx.lease_expires_at > first
        finally:
            worker.close()


def one_counted_task(world, orch) -> tuple[Registry, list[dict], str]:
    """An instance whose one task, queued, runs handler ``counted``: (its registry, the inputs it ran with, the
    instance)."""
    private = Registry()
    ran: list[dict] = []

    @handler("counted", version="1", into=private)
    def counted(input):
        ran.append(input)
        return {"done": True}

    world.publish(task_flow("counted", handler="counted"))
    wf = world.start("counted", {"order_id": "o-1"})
    orch.drain()
    return private, ran, wf


def test_K1_a_claim_whose_answer_was_lost_with_its_connection_still_runs_its_attempt(world, orch, database):
    """The node the worker claims through commits the claim and loses its answer (answers stop on the way back).
    The claim fails as a lost connection; the worker asks for its running attempts through the other node and runs
    the one it did not hear of. It used to claim again, find nothing queued, and leave the attempt RUNNING unrun
    until its lease ran out and it went to review as UNKNOWN."""
    from tests.support.proxy import two_nodes

    private, ran, wf = one_counted_task(world, orch)
    with two_nodes(database, connect_timeout=1, read_timeout=1) as (nodes, dsn):
        worker = make_worker(dsn, concurrency=1, handlers=private)
        try:
            used = next(n for n in nodes if n.port == worker._conn().port)  # the claim loop's connection
            worker._since = world.db.now()  # read by the loop before its first claim, here before the node hangs
            used.hang(answers_only=True)
            give_up = time.monotonic() + 20
            stats = worker.run(max_claims=1, until=lambda: time.monotonic() > give_up)
        finally:
            worker.close()
    assert len(ran) == 1 and stats["unanswered_claims_taken"] == 1 and stats["SUCCEEDED"] == 1
    assert task_row(world, wf)["status"] == "SUCCEEDED" and len(attempts(world, wf)) == 1


def test_K1_a_claim_interrupted_after_its_commit_still_runs_its_attempt(world, orch, database, monkeypatch):
    """A KILL QUERY (or max_statement_time) that lands after the claim's commit, while it answers, fails the call
    with 1317 though its attempts are RUNNING for this worker. The worker took that for a claim that did nothing:
    each attempt ran out its lease unrun and went to review as LEASE_LOST (74 of 114 such kills under load). It
    now reads back its running attempts, as after a lost connection, and runs them."""
    private, ran, wf = one_counted_task(world, orch)
    real_claim = pulse.task_claim
    calls = []

    def interrupted_after_commit(*args, **kwargs):  # the real claim commits; its answer is lost to the interrupt
        calls.append(real_claim(*args, **kwargs))
        if len(calls) == 1:
            raise errors.TransientDatabaseError("1317: Query execution was interrupted") from \
                pymysql.err.OperationalError(1317, "Query execution was interrupted")
        return calls[-1]

    monkeypatch.setattr(pulse, "task_claim", interrupted_after_commit)
    worker = make_worker(database, concurrency=1, handlers=private)
    try:
        give_up = time.monotonic() + 20
        stats = worker.run(max_claims=1, until=lambda: time.monotonic() > give_up)
    finally:
        worker.close()
    assert len(calls[0]) == 1  # the interrupted claim had taken the task
    assert len(ran) == 1 and stats["unanswered_claims_taken"] == 1 and stats["SUCCEEDED"] == 1
    assert task_row(world, wf)["status"] == "SUCCEEDED" and len(attempts(world, wf)) == 1


def test_K1_reading_back_a_lost_claim_leaves_a_process_sharing_the_worker_id_its_earlier_claims(world, orch, database,
                                                                                               caplog):
    """Two running workers must never share an id, but a service manager's fixed name can make them. The other one
    claimed a task after this worker began and runs it; then this worker's claim loses its answer. The read-back
    takes the attempts started since that claim began, on the engine's clock: the lost claim's, never the other
    process's (its handler would run twice). And a worker that starts while attempts of its id hold live leases
    says so."""
    queue_jobs(world, orch, 2)
    worker = make_worker(database)
    try:
        worker._since = world.db.now()  # this worker began
        theirs = pulse.task_claim(world.db.conn, worker.worker_id, "payments", limit=1)[0]  # the namesake's claim
        world.db.advance(2_000)  # two seconds later, this worker claims, and the answer is lost
        began = time.monotonic()
        unheard = pulse.task_claim(world.db.conn, worker.worker_id, "payments", limit=1)[0]
        with caplog.at_level(logging.WARNING, logger="weave.worker"):
            worker._take_unanswered(began)
        assert list(worker._inflight) == [unheard["attempt_id"]] and theirs["attempt_id"] not in worker._inflight
        left, = [r for r in caplog.records if "are left to their leases" in r.getMessage()]
        assert left.fields["attempts"] == [theirs["attempt_id"]]  # said, for the person who will see it UNKNOWN
    finally:
        worker.close()
    caplog.clear()
    namesake = make_worker(database, worker_id=worker.worker_id)
    try:
        with caplog.at_level(logging.WARNING, logger="weave.worker"):
            namesake._warn_of_namesakes(world.db.now())
        warned, = [r for r in caplog.records if "another process may be using the same id" in r.getMessage()]
        assert sorted(warned.fields["attempts"]) == sorted([theirs["attempt_id"], unheard["attempt_id"]])
    finally:
        namesake.close()


def test_K1_reading_back_a_lost_claim_never_runs_again_an_attempt_whose_report_was_lost(world, orch, database):
    """Three attempts are RUNNING under the worker's id: one an earlier process with the same id started (a service
    manager's fixed name) before it died, one this worker ran and whose report it could not write (left to its lease:
    its effect may have happened), one a lost claim took. Only the last is run."""
    from orchestrator.worker import _context

    queue_jobs(world, orch, 3)
    worker = make_worker(database)
    try:
        earlier = pulse.task_claim(world.db.conn, worker.worker_id, "payments", limit=1)[0]  # a process that died
        world.db.advance(1000)
        worker._since = world.db.now()  # this worker began
        ran = _context(pulse.task_claim(world.db.conn, worker.worker_id, "payments", limit=1)[0])
        worker._report_lost(ran, errors.TransientDatabaseError("2013: Lost connection"), outcome="SUCCEEDED",
                            result="{}")
        unheard = pulse.task_claim(world.db.conn, worker.worker_id, "payments", limit=1)[0]
        worker._take_unanswered()
        assert list(worker._inflight) == [unheard["attempt_id"]] and worker.stats["unanswered_claims_taken"] == 1
        assert earlier["attempt_id"] not in worker._inflight
    finally:
        worker.close()


def test_K8_a_handler_that_exits_fails_its_attempt_and_the_worker_runs_on(world, orch, database):
    """sys.exit() in a handler raises SystemExit, which is no Exception: it used to end the thread that ran the
    attempt, and once every thread had ended the worker claimed tasks it never ran."""
    private = Registry()

    @handler("exits", version="1", into=private)
    def exits(input):
        sys.exit(3)

    @handler("echoes", version="1", into=private)
    def echoes(input):
        return input

    world.publish(task_flow("exits", handler="exits"))
    world.publish(task_flow("echo", handler="echoes"))
    first = world.start("exits", {"order_id": "o-1"})
    orch.drain()
    worker = make_worker(database, concurrency=1, handlers=private)
    assert worker.run(max_claims=1)["FAILED"] == 1
    task = task_row(world, first)
    assert task["status"] == "FAILED" and task["error"] == "SystemExit: 3"
    later = world.start("echo", {"order_id": "o-2"})
    orch.drain()
    assert worker.run(max_claims=1)["SUCCEEDED"] == 1  # the same worker: its thread did not end
    assert task_row(world, later)["status"] == "SUCCEEDED"


def test_K3_a_report_outlasts_an_outage_of_more_than_a_few_tries(world, orch, database):
    """While the handler runs, the database stops taking connections (here: the next seven connects meet a closed
    port, refused at once, as during a restart). The report is tried again, with backoff, for as long as the lease
    lasts, and lands once the database answers. It used to be tried five times over about 0.3 s, after which the
    finished attempt was left to its lease, and then to review as UNKNOWN."""
    private = Registry()
    refused = {"left": 0}
    closed_port = dbmod.Dsn.parse("mysql://root@127.0.0.1:1/weave")

    def connect() -> dbmod.Connection:
        if refused["left"]:
            refused["left"] -= 1
            return dbmod.connect(closed_port)
        return dbmod.connect(database)

    @handler("outlasts", version="1", into=private)
    def outlasts(input):
        refused["left"] = 7
        return {"done": True}

    world.publish(task_flow("outlasts", handler="outlasts"))
    wf = world.start("outlasts", {"order_id": "o-1"})
    orch.drain()
    worker = make_worker(database, concurrency=1, handlers=private, lease_ms=10_000, heartbeat_ms=5_000)
    worker._connections = Connections(database, open=connect)
    stats = worker.run(max_claims=1)
    assert refused["left"] == 0 and stats["report_failed"] == 0 and stats["SUCCEEDED"] == 1
    assert task_row(world, wf)["status"] == "SUCCEEDED"


def test_K3_a_report_that_outlasts_its_lease_is_logged_with_what_the_handler_did(world, orch, database, caplog):
    """The database stays away past the attempt's lease: the report gives up, the attempt will end UNKNOWN and go to
    review, and the engine holds nothing of what the handler did. Its log line says it: the outcome, and the size
    and SHA-256 of the result, to compare with the external system."""
    import hashlib

    private = Registry()
    away = {"on": False}
    closed_port = dbmod.Dsn.parse("mysql://root@127.0.0.1:1/weave")

    def connect() -> dbmod.Connection:
        return dbmod.connect(closed_port if away["on"] else database)

    @handler("lost", version="1", into=private)
    def lost(input):
        away["on"] = True
        return {"charged": 12.5}

    world.publish(task_flow("lost", handler="lost"))
    world.start("lost", {"order_id": "o-1"})
    orch.drain()
    worker = make_worker(database, concurrency=1, handlers=private, lease_ms=600, heartbeat_ms=300)
    worker._connections = Connections(database, open=connect)
    with caplog.at_level(logging.ERROR, logger="weave.worker"):
        stats = worker.run(max_claims=1)
    assert stats["report_failed"] == 1
    failed, = [r for r in caplog.records if r.getMessage() == "report failed; the lease will decide"]
    text = '{"charged":12.5}'
    assert (failed.fields["outcome"], failed.fields["result_bytes"]) == ("SUCCEEDED", len(text))
    assert failed.fields["result_sha256"] == hashlib.sha256(text.encode()).hexdigest()


def test_K3_a_report_whose_answer_was_lost_says_it_may_have_been_written(world, orch, database, caplog, monkeypatch):
    """The report committed and its answer was lost, and the database stayed away past the lease: the worker logged
    an error that the attempt would end UNKNOWN for review, while the task had SUCCEEDED and no review came. It says
    now that the report may have been written, at a warning."""
    from tests.support.proxy import Proxy

    private = Registry()
    proxy = Proxy(database.host, database.port)
    through = database.single("127.0.0.1", proxy.port).with_options(read_timeout=1)
    away = {"on": False}
    closed_port = dbmod.Dsn.parse("mysql://root@127.0.0.1:1/weave")
    complete = pulse.attempt_complete

    def connect() -> dbmod.Connection:
        return dbmod.connect(closed_port if away["on"] else through)

    def answer_lost(conn, *args, **kwargs):  # on the report's open connection: sent, committed, its answer lost
        proxy.hang(answers_only=True)
        away["on"] = True  # and no new connection is had until the lease is over
        return complete(conn, *args, **kwargs)

    @handler("answered", version="1", into=private)
    def answered(input):
        return {"charged": 12.5}

    world.publish(task_flow("answered", handler="answered"))
    wf = world.start("answered", {"order_id": "o-1"})
    orch.drain()
    worker = make_worker(database, concurrency=1, handlers=private, lease_ms=600, heartbeat_ms=300)
    worker._connections = Connections(database, open=connect)
    monkeypatch.setattr(pulse, "attempt_complete", answer_lost)
    try:
        with caplog.at_level(logging.WARNING, logger="weave.worker"):
            stats = worker.run(max_claims=1)
    finally:
        proxy.kill()
    assert stats["report_failed"] == 1
    said = [r for r in caplog.records if r.getMessage().startswith("report")]
    assert [(r.levelname, r.getMessage()) for r in said] == [
        ("WARNING", "report's answer was lost; it may have been written, else the lease will decide")]
    assert said[0].fields["outcome"] == "SUCCEEDED"
    assert task_row(world, wf)["status"] == "SUCCEEDED"  # it was


def test_K3_reports_that_cannot_get_a_connection_stop_the_claims_until_one_can(world, orch, database, caplog):
    """The server's max_connections reached by all its clients together: the claim loop, on its own open connection,
    went on claiming, and every report, which needs a connection of its own, was refused until its lease ran out,
    so every task the worker ran went to review UNKNOWN (73 of 73 in a worker's run). Now the first report that
    cannot be written stops the claims, and they go on once a connection can be had again: the tasks claimed before
    are lost to their leases, no other."""
    private = Registry()
    refused = {"on": False, "runs": 0}
    closed_port = dbmod.Dsn.parse("mysql://root@127.0.0.1:1/weave")

    def connect() -> dbmod.Connection:
        return dbmod.connect(closed_port if refused["on"] else database)

    @handler("crowded", version="1", into=private)
    def crowded(input):
        refused["runs"] += 1
        if refused["runs"] <= 2:  # the first claim's two: no new connection from now, for their reports
            refused["on"] = True
        return {"done": True}

    world.publish(task_flow("crowded", handler="crowded"))
    started = [world.start("crowded", {"order_id": f"o-{n}"}) for n in range(6)]
    orch.drain()
    worker = make_worker(database, concurrency=2, handlers=private, lease_ms=600, heartbeat_ms=300)
    worker._connections = Connections(database, open=connect)
    with caplog.at_level(logging.INFO, logger="weave.worker"):
        thread = in_thread(worker, max_claims=6)
        assert wait_for(lambda: worker.stats["report_failed"] == 2 and worker.stats["claims_held"] > 0, timeout=20)
        assert worker.stats["claimed"] == 2  # nothing claimed while the reports could not be written
        refused["on"] = False
        thread.join(30)
    assert not thread.is_alive() and worker.stats["claimed"] == 6
    assert (worker.stats["report_failed"], worker.stats["SUCCEEDED"]) == (2, 4)
    said = [r.getMessage() for r in caplog.records]
    assert "a report cannot be written: claiming stops until one is" in said
    assert "a connection for reports can be had again: claiming goes on" in said
    assert sorted(task_row(world, wf)["status"] for wf in started).count("SUCCEEDED") == 4


def test_K1_a_worker_for_every_namespace_says_so_when_several_have_its_queues(world, database, caplog):
    """A worker given no --namespace serves its queues in every namespace. On an install shared by tenants queue
    names repeat, and one tenant's handlers ran another's tasks, saw their inputs and decided their results, with
    nothing said. It warns as it starts; a worker for one namespace does not."""
    from tests.support.world import World

    World.create(world.db, "beta")  # a second namespace with a queue named payments too
    with caplog.at_level(logging.WARNING, logger="weave.worker"):
        make_worker(database).run(exit_when_idle=True)
        make_worker(database, namespace="acme").run(exit_when_idle=True)
    warned = [r for r in caplog.records if r.getMessage().startswith("this worker serves its queues in every")]
    assert len(warned) == 1 and warned[0].fields["namespaces"] == ["acme", "beta"]


def test_K9_graceful_stop_stops_claiming_and_lets_running_attempts_finish(world, orch, database):
    world.publish(task_flow(handler="example.sleep", input={"ms": 400}, task_timeout_ms=HOUR))
    first = world.start("job", {})
    orch.drain()
    worker = make_worker(database, concurrency=1)
    thread = in_thread(worker)
    assert wait_for(lambda: task_row(world, first)["status"] == "RUNNING", timeout=10)
    second = world.start("job", {})
    orch.drain()
    worker.stop()
    thread.join(timeout=10)
    assert not thread.is_alive()
    assert task_row(world, first)["status"] == "SUCCEEDED"
    assert task_row(world, second)["status"] == "QUEUED" and attempts(world, second) == []


def test_K9_a_handler_told_the_worker_is_stopping_stops_early_and_its_task_is_retried_not_reviewed(world, orch,
                                                                                                    database):
    """On stop, a long handler that waits with ctx.wait_stop wakes at once (ctx.worker_stopping) and can hand its
    task back with Retryable: the task is queued for its next attempt, where one left to the grace period would
    end UNKNOWN and go to review. Cancellation still wakes it too, and then ends the task CANCELLED."""
    world.publish(task_flow(handler="example.sleep", input={"ms": 60_000, "honour_stop": True},
                            task_timeout_ms=HOUR, retry={"max_attempts": 3, "initial_backoff_ms": 1_000,
                                                         "backoff_coefficient": 2.0, "max_backoff_ms": 60_000}))
    wf = world.start("job", {})
    orch.drain()
    worker = make_worker(database, concurrency=1, grace_ms=30_000)
    thread = in_thread(worker)
    assert wait_for(lambda: task_row(world, wf)["status"] == "RUNNING", timeout=10)
    worker.stop()
    thread.join(timeout=10)  # well within the grace period: the handler woke at the stop
    assert not thread.is_alive()
    assert task_row(world, wf)["status"] == "QUEUED" and attempts(world, wf)[0]["status"] == "FAILED"
    assert worker.stats["RETRY_SCHEDULED"] == 1
    world.db.advance(1_001)
    again = make_worker(database, concurrency=1, lease_ms=2_000, heartbeat_ms=50)
    thread = in_thread(again, max_claims=1)
    assert wait_for(lambda: task_row(world, wf)["status"] == "RUNNING", timeout=10)
    world.db.execute("CALL _pulse_task_cancel(%s, %s, @o)", task_row(world, wf)["id"], world.db.now())
    thread.join(timeout=10)
    assert not thread.is_alive() and task_row(world, wf)["status"] == "CANCELLED"


def test_K9_a_stopping_worker_says_so_at_once_and_a_second_stop_leaves_its_attempts_to_the_lease(
        world, orch, database, caplog):
    """On SIGINT or SIGTERM a worker said nothing until its grace period was over, and a second Ctrl-C did not make
    it go: whoever stopped it could not tell a drain from a hang. It says at once that it stops and how many
    attempts may still finish; asked again, it waits no longer, and what still runs is left to lease recovery. A
    later run of the same worker has its grace period again."""
    private = Registry()
    release = threading.Event()

    @handler("hold", version="1", into=private)
    def hold(input):
        release.wait(60)
        return {"held": True}

    world.publish(task_flow(handler="hold", task_timeout_ms=HOUR))
    wf = world.start("job", {})
    orch.drain()
    worker = make_worker(database, handlers=private, concurrency=1, grace_ms=600_000)
    try:
        with caplog.at_level(logging.INFO, logger="weave.worker"):
            thread = in_thread(worker)
            assert wait_for(lambda: worker.in_flight == 1, timeout=10)
            worker.stop()
            said = [r for r in caplog.records if r.getMessage().startswith("stopping:")]
            assert len(said) == 1 and said[0].fields["running"] == 1 and said[0].fields["grace_ms"] == 600_000
            assert thread.is_alive()  # the grace period is ten minutes
            worker.stop()
            thread.join(timeout=10)
        assert not thread.is_alive()
        assert [r.getMessage() for r in caplog.records if "lease recovery" in r.getMessage()] == [
            "asked again to stop; leaving running attempts to lease recovery"]
        assert task_row(world, wf)["status"] == "RUNNING"  # its lease decides (K-4)
    finally:
        release.set()
    assert wait_for(lambda: task_row(world, wf)["status"] == "SUCCEEDED", timeout=10)  # the held one still reports
    # Run again and stopped once: it waits for its attempt as ever, however it was stopped before.
    release.clear()
    second = world.start("job", {})
    orch.drain()
    with caplog.at_level(logging.INFO, logger="weave.worker"):
        thread = in_thread(worker)
        assert wait_for(lambda: worker.in_flight == 1, timeout=10)
        worker.stop()
        release.set()
        thread.join(timeout=10)
    assert not thread.is_alive() and task_row(world, second)["status"] == "SUCCEEDED"
    assert len([r for r in caplog.records if "lease recovery" in r.getMessage()]) == 1  # the first run's only


def test_K9_a_second_stop_ends_a_worker_whose_claim_waits_on_a_silent_network(world, database, caplog):
    """A worker whose network went silent (no reset, nothing answered) waited in its claim for the DSN's read
    timeout, two minutes by default, however often it was stopped: a second SIGTERM said it would wait no longer,
    and systemd's stop timeout killed it. A second stop now cuts the claim's connection, and the worker goes."""
    from tests.support.proxy import Proxy

    proxy = Proxy(database.host, database.port)
    worker = Worker(database.single("127.0.0.1", proxy.port), ["payments"], concurrency=1, idle_probe_ms=10,
                    idle_max_ms=10, grace_ms=600_000)
    try:
        thread = in_thread(worker)
        assert wait_for(lambda: worker._since is not None, timeout=10)  # it claims, a claim every 10 ms
        proxy.hang()
        assert wait_for(proxy.holding.is_set, timeout=10)  # a claim is sent and waits on the silent network
        worker.stop()
        worker.stop()
        thread.join(timeout=10)
        assert not thread.is_alive()
    finally:
        proxy.kill()
        worker.close()


def test_K9_attempts_unfinished_after_the_grace_period_end_unknown_through_lease_recovery(world, orch, database):
    world.publish(task_flow(handler="example.sleep", input={"ms": 1_500}, task_timeout_ms=HOUR))
    wf = world.start("job", {})
    orch.drain()
    worker = make_worker(database, lease_ms=5_000, heartbeat_ms=1_000, grace_ms=50)
    thread = in_thread(worker)
    assert wait_for(lambda: task_row(world, wf)["status"] == "RUNNING", timeout=10)
    worker.stop()
    thread.join(timeout=5)
    assert not thread.is_alive() and task_row(world, wf)["status"] == "RUNNING"
    world.db.advance(60_000)
    assert orch.drain()["LEASE:UNKNOWN"] == 1
    assert task_row(world, wf)["status"] == "UNKNOWN"
    # The abandoned handler still finishes; its report comes too late and is kept without effect.
    assert wait_for(lambda: world.db.scalar("SELECT COUNT(*) FROM pulse_late_reports") == 1, timeout=10)
    assert task_row(world, wf)["status"] == "UNKNOWN"


def test_R16_worker_refuses_to_start_on_another_level(db, database, capsys):
    db.execute("UPDATE weave_routines SET digest = REPEAT('0', 64) WHERE name = 'pulse_task_claim'")
    try:
        assert run_worker(database, queues=["payments"], handler_modules=["orchestrator.example_handlers"]) == 1
        assert "SCHEMA_MISMATCH" in capsys.readouterr().err
    finally:
        installer.migrate(database, test_clock=True)
    installer.check_level(db.conn)


# --- the built-in http handler ----------------------------------------------------------------------------------
_POSTS: list[str] = []  # the paths that requests with a body (POST, PATCH, PUT) reached on the test server


class _Api(BaseHTTPRequestHandler):
    def log_message(self, *args):  # keep test output quiet
        pass

    def _send(self, code: int, body: bytes, ctype: str = "application/json", headers: dict | None = None) -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def _drip(self) -> None:
        """A byte of the answer, then nothing until the test ends."""
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "100")
        self.end_headers()
        self.wfile.write(b" ")
        self.wfile.flush()
        self.server.released.wait()  # type: ignore[attr-defined]
        self.close_connection = True

    def _drip_head(self) -> None:
        """The status line and the headers a byte every 50 ms (each read well within its timeout, the whole far
        beyond timeout_ms), then a body; ``cut_in_head`` is set if the client closes before the head is out."""
        head = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Pad: " + b"p" * 200
                + b"\r\nContent-Length: 2\r\n\r\n")
        try:
            for i in range(len(head)):
                self.wfile.write(head[i:i + 1])
                if self.server.released.wait(0.05):  # type: ignore[attr-defined]  # the server's pace, not a test's
                    return
        except OSError:  # the client closed the connection
            self.server.cut_in_head.set()  # type: ignore[attr-defined]
            return
        self.wfile.write(b"{}")
        self.close_connection = True

    def _cut(self) -> None:
        """Promises 12345678, sends 123, and closes."""
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "8")
        self.end_headers()
        self.wfile.write(b"123")
        self.close_connection = True

    def do_GET(self):
        if self.path == "/ok":
            self._send(200, json.dumps({"status": "DONE", "seen": self.headers.get("X-Probe")}).encode())
        elif self.path == "/boom":
            self._send(503, b'{"error": "busy"}')
        elif self.path == "/missing":
            self._send(404, b'{"error": "no"}')
        elif self.path == "/text":
            self._send(200, b"hello", "text/plain")
        elif self.path == "/drip":
            self._drip()
        elif self.path == "/cut":
            self._cut()
        elif self.path == "/drip-head":
            self._drip_head()
        elif self.path == "/moved-drip-head":  # a redirect on this origin to the same slow head
            self._send(301, b"", headers={"Location": "/drip-head"})
        elif self.path.startswith("/away-closed?to="):
            self._send(302, b"", headers={"Location": self.path.split("?to=", 1)[1]})
        elif self.path == "/away":
            self._send(302, b"", headers={"Location": f"http://localhost:{self.server.server_port}/ok"})
        elif self.path == "/headers":  # the headers that reached this server
            self._send(200, json.dumps({"authorization": self.headers.get("Authorization"),
                                        "key": self.headers.get("X-Api-Key"),
                                        "accept": self.headers.get("Accept")}).encode())
        elif self.path == "/host":  # the host the request named
            self._send(200, json.dumps({"host": self.headers.get("Host")}).encode())
        elif self.path == "/moved":  # the same answer, elsewhere on this origin
            self._send(301, b"", headers={"Location": "/headers"})
        elif self.path == "/elsewhere":  # the same answer on another origin (the same server under another name)
            self._send(302, b"", headers={"Location": f"http://localhost:{self.server.server_port}/headers"})
        else:
            self._send(404, b"{}")

    def do_POST(self):
        length = int(self.headers.get("Content-Length", 0))
        body = self.rfile.read(length)
        _POSTS.append(self.path)
        if self.path.startswith("/charge-see-other?to="):  # made: see the result elsewhere (a POST's usual answer)
            self._send(303, b"", headers={"Location": self.path.split("?to=", 1)[1]})
        elif self.path == "/charge-lost":  # the request is read (and acted on), then the connection closes unanswered
            self.close_connection = True
        elif self.path == "/charge-502":
            self._send(502, b'{"error": "bad gateway"}')
        elif self.path == "/charge-503":
            self._send(503, b'{"error": "busy"}')
        elif self.path == "/charge-drip":
            self._drip()
        elif self.path == "/charge-cut":
            self._cut()
        elif self.path == "/charge-drip-head":
            self._drip_head()
        else:
            self._send(200, json.dumps({"echo": json.loads(body)}).encode())

    do_PATCH = do_PUT = do_POST


@pytest.fixture
def api_server(monkeypatch):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Api)
    server.released = threading.Event()  # type: ignore[attr-defined]  # lets a stalled answer end
    server.cut_in_head = threading.Event()  # type: ignore[attr-defined]  # a client left a slow head unread
    _POSTS.clear()
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)  # quick to shut down
    thread.start()
    monkeypatch.setenv(http.ALLOWLIST_ENV, "127.0.0.1")
    yield server
    server.released.set()  # type: ignore[attr-defined]
    server.shutdown()
    server.server_close()


@pytest.fixture
def api(api_server):
    return f"http://127.0.0.1:{api_server.server_port}"


def test_K8_http_handler_returns_the_json_response(api):
    assert http.request({"method": "GET", "url": f"{api}/ok", "headers": {"X-Probe": "p"}}) == \
        {"status": "DONE", "seen": "p"}
    assert http.request({"method": "POST", "url": f"{api}/echo", "body": {"a": [1, None]}}) == \
        {"echo": {"a": [1, None]}}


def test_K8_http_handler_classifies_failures(api):
    with pytest.raises(Retryable):
        http.request({"url": f"{api}/boom"})
    with pytest.raises(http.HttpRefused, match="HTTP_404"):
        http.request({"url": f"{api}/missing"})
    with pytest.raises(http.HttpRefused, match="HTTP_RESPONSE_NOT_JSON"):
        http.request({"url": f"{api}/text"})
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    closed_port = probe.getsockname()[1]
    probe.close()  # nothing listens there now
    with pytest.raises(Retryable, match="HTTP_UNREACHABLE"):
        http.request({"url": f"http://127.0.0.1:{closed_port}/closed", "timeout_ms": 2000})


def test_K8_http_handler_errors_never_carry_a_urls_query_or_credentials(api):
    """A task's error is stored, shown in the console and logged: a query string often carries an API key, and a
    URL's user part a password. Errors name the method, scheme, host, port and path only."""
    secret = "api_key=s3cr3t&token=t0k"
    for url, kind in ((f"{api}/missing?{secret}", http.HttpRefused),
                      (f"http://user:pa55@127.0.0.1:1/closed?{secret}#t0k", Retryable),
                      (f"ftp://user:pa55@127.0.0.1/x?{secret}", http.HttpRefused)):
        with pytest.raises(kind) as info:
            http.request({"url": url, "timeout_ms": 2000})
        text = str(info.value)
        assert "s3cr3t" not in text and "t0k" not in text and "pa55" not in text, text
    assert str(info.value).endswith("'ftp://127.0.0.1/x?…'"), info.value  # what was called, its secrets left out


def test_K8_http_handler_bounds_the_whole_response_by_timeout_ms_and_retries_a_broken_one(api):
    """timeout_ms bounded each wait on the socket, not the answer: a server sending a byte at a time held the
    attempt for as long as it liked. Here the body's first byte comes and the rest never does: the handler gives
    up at timeout_ms (300). A body cut short of its Content-Length was read as the whole body: a final
    HTTP_RESPONSE_NOT_JSON, or a wrong result when the part that came parses (a number cut short)."""
    with pytest.raises(Retryable, match="HTTP_TIMEOUT"):
        http.request({"url": f"{api}/drip", "timeout_ms": 300})
    with pytest.raises(Retryable, match="HTTP_RESPONSE_BROKEN"):
        http.request({"url": f"{api}/cut"})


@pytest.mark.parametrize("path", ["/charge-lost", "/charge-502", "/charge-cut"])
def test_K8_http_handler_never_sends_a_post_twice_once_it_may_have_taken_effect(api, path):
    """A POST that timed out after it was sent was retried as any timeout was: a slow payment provider charged the
    order once per attempt, three times. A POST or PATCH that reached the server and got no whole answer (the
    connection lost, a 502, a response cut short) may have taken effect: it fails for good, HTTP_EFFECT_UNKNOWN,
    and its step goes to review. With an Idempotency-Key header, or by a method a repeat changes nothing more by,
    the server can tell a repeat, and it is retried as before; a 503 or 429 says it was not acted on."""
    for method in ("POST", "PATCH"):
        with pytest.raises(http.HttpRefused, match="HTTP_EFFECT_UNKNOWN") as info:
            http.request({"method": method, "url": f"{api}{path}", "body": {"amount": 4200}})
        assert "Idempotency-Key" in str(info.value) and not isinstance(info.value, Retryable)
    for spec in ({"method": "POST", "headers": {"Idempotency-Key": "o-78"}},
                 {"method": "post", "headers": {"idempotency-key": "o-78"}}, {"method": "PUT"}):
        with pytest.raises(Retryable):
            http.request({**spec, "url": f"{api}{path}", "body": {"amount": 4200}})
    with pytest.raises(Retryable, match="HTTP_503"):
        http.request({"method": "POST", "url": f"{api}/charge-503", "body": {"amount": 4200}})


def test_K8_http_handler_retries_a_post_it_could_not_send(api):
    """A connection never made is a request never processed: retried, whatever the method."""
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    closed_port = probe.getsockname()[1]
    probe.close()
    with pytest.raises(Retryable, match="HTTP_UNREACHABLE"):
        http.request({"method": "POST", "url": f"http://127.0.0.1:{closed_port}/charge", "body": {},
                      "timeout_ms": 2000})


def test_K8_http_handler_never_sends_a_post_again_that_a_redirect_answered(api):
    """A POST answered "303 See Other" has taken effect; urllib follows with a GET, and when that failed (its host
    unreachable, a 503) the POST was retried as a request never processed, and made twice."""
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    closed_port = probe.getsockname()[1]
    probe.close()
    for to in (f"http://127.0.0.1:{closed_port}/made", "/boom"):
        with pytest.raises(http.HttpRefused, match="HTTP_EFFECT_UNKNOWN"):
            http.request({"method": "POST", "url": f"{api}/charge-see-other?to={to}", "body": {}, "timeout_ms": 2000})
    with pytest.raises(Retryable):  # a GET redirected to the same failures is still retried
        http.request({"url": f"{api}/away-closed?to=http://127.0.0.1:{closed_port}/made", "timeout_ms": 2000})


def test_K8_http_handler_a_post_answered_too_slowly_is_not_sent_again(api):
    """The answer began within timeout_ms and did not end: the charge may have been made."""
    for path in ("/charge-drip", "/charge-drip-head"):
        with pytest.raises(http.HttpRefused, match="HTTP_EFFECT_UNKNOWN: HTTP_TIMEOUT"):
            http.request({"method": "POST", "url": f"{api}{path}", "body": {}, "timeout_ms": 300})


@pytest.mark.parametrize("path", ["/drip-head", "/moved-drip-head"])
def test_K8_http_handler_bounds_the_status_line_and_headers_by_timeout_ms(api, api_server, path):
    """timeout_ms was checked only once urllib had the status line and the headers, until then each read had the
    whole timeout_ms to itself: a server sending its headers a byte every 0.5 s held a task with timeout_ms 2000
    for as long as it sent them, past the attempt's lease. The head here comes a byte every 50 ms, each read in
    time, the whole 11 s: the handler fails as a timeout does, a redirect's connection alike, and the server sees
    its connection closed before its head is out."""
    with pytest.raises(Retryable, match="HTTP_TIMEOUT"):  # 2 s: time enough for a redirect on a busy machine
        http.request({"url": f"{api}{path}", "timeout_ms": 2_000})
    assert api_server.cut_in_head.wait(10)


@pytest.mark.parametrize("fields", [
    {"method": "TRACE"}, {"method": "GET\r\nX-Injected: 1"}, {"method": 7},
    {"headers": {"X-Note": "a\r\nX-Injected: 1"}}, {"headers": {"X Note": "v"}}, {"headers": {"X-Note": None}},
    {"headers": {"X-Note": {"nested": 1}}}, {"headers": {"X-Note": "caf\u00e9 \u263a"}},
    {"timeout_ms": 0}, {"timeout_ms": -5}, {"timeout_ms": True}, {"timeout_ms": "10"}, {"timeout_ms": 1e12}])
def test_K8_http_handler_refuses_input_that_is_no_request_and_sends_nothing(api, fields):
    """Each of these failed inside http.client or the socket with a message of theirs (or, for a zero timeout,
    as a retryable HTTP_UNREACHABLE, every attempt alike): a non-retryable HTTP_INPUT_INVALID naming the field."""
    with pytest.raises(http.HttpRefused, match="HTTP_INPUT_INVALID"):
        http.request({"url": f"{api}/ok", **fields})


def test_K8_http_handler_refuses_a_url_http_cannot_send(api):
    with pytest.raises(http.HttpRefused, match="HTTP_URL_INVALID"):
        http.request({"url": f"{api}/ok now"})

def test_K8_http_handler_honours_the_host_allowlist(api, monkeypatch):
    with pytest.raises(http.HttpRefused, match="HTTP_HOST_NOT_ALLOWED"):
        http.request({"url": api.replace("127.0.0.1", "localhost") + "/ok"})
    with pytest.raises(http.HttpRefused, match="HTTP_HOST_NOT_ALLOWED"):
        http.request({"url": f"{api}/away"})  # a redirect to a host that is not listed
    monkeypatch.setenv(http.ALLOWLIST_ENV, "")
    with pytest.raises(http.HttpRefused, match="HTTP_HOST_NOT_ALLOWED"):
        http.request({"url": f"{api}/ok"})
    monkeypatch.setenv(http.ALLOWLIST_ENV, "example.org, " + api.removeprefix("http://"))
    assert http.request({"url": f"{api}/ok"})["status"] == "DONE"  # host:port entries work too


def test_K8_http_handler_sends_the_inputs_headers_to_the_origin_it_names_only(api, monkeypatch):
    """A redirect to another allowed origin (another host or port, or http after https) was followed with every
    header of the input: the API key or bearer token meant for the payment provider went to whatever host it
    redirected to. The input's headers now follow a redirect on the same origin only."""
    monkeypatch.setenv(http.ALLOWLIST_ENV, "127.0.0.1,localhost")
    secrets = {"Authorization": "Bearer s3cr3t", "X-Api-Key": "k3y"}
    here = http.request({"url": f"{api}/moved", "headers": secrets})
    assert here == {"authorization": "Bearer s3cr3t", "key": "k3y", "accept": "application/json"}
    away = http.request({"url": f"{api}/elsewhere", "headers": secrets})
    assert away == {"authorization": None, "key": None, "accept": "application/json"}


@pytest.mark.parametrize("header", [("Host", "admin.internal"), ("host", "admin.internal"), ("Content-Length", "2"),
                                    ("Transfer-Encoding", "chunked")], ids=lambda h: h[0])
def test_K8_http_handler_takes_the_host_from_the_url_and_the_framing_from_the_body(api, header):
    """The input's headers could name the Host: a definition reached any virtual host of an allowed address (an
    internal gateway's admin site, another tenant of a shared load balancer) while the allowlist named only the
    address. A Content-Length or Transfer-Encoding of the input framed the body otherwise than the body sent.
    These are the URL's and the body's to say: an input naming one is refused, and nothing is sent."""
    port = api.rsplit(":", 1)[1]
    assert http.request({"url": f"{api}/host"}) == {"host": f"127.0.0.1:{port}"}
    name, value = header
    with pytest.raises(http.HttpRefused, match="HTTP_INPUT_INVALID"):
        http.request({"method": "POST", "url": f"{api}/host", "headers": {name: value}, "body": {"a": 1}})


def test_K8_http_handler_through_the_worker(world, orch, database, api):
    world.publish(task_flow("fetch", handler="http", input={"method": "GET", "url": f"{api}/ok"}))
    world.publish(task_flow("refused", handler="http", input={"method": "GET", "url": "http://example.org/ok"},
                            retry={"max_attempts": 3, "initial_backoff_ms": 0}))
    ok = world.start("fetch", {})
    refused = world.start("refused", {})
    orch.drain()
    make_worker(database).run(max_claims=2)
    orch.drain()
    assert world.step(ok, "work")["output"] == {"status": "DONE", "seen": None}
    task = task_row(world, refused)
    assert task["status"] == "FAILED" and task["attempts_used"] == 1
    assert task["error"].startswith("HttpRefused: HTTP_HOST_NOT_ALLOWED")
    assert world.instance(refused)["review_reasons"][0]["code"] == "TASK_FAILED"


def test_K8_a_charge_whose_answer_was_lost_is_made_once_and_goes_to_review(world, orch, database, api):
    """Three attempts of a POST whose answer never came made three charges. It is made once, and a person looks."""
    charge = {"method": "POST", "url": f"{api}/charge-lost", "body": {"order": "o-78", "amount": 4200}}
    world.publish(task_flow("charge", handler="http", input=charge,
                            retry={"max_attempts": 3, "initial_backoff_ms": 0}))
    wf = world.start("charge", {})
    orch.drain()
    make_worker(database).run(exit_when_idle=True)  # a retry, due at once, would be claimed before it is idle
    orch.drain()
    assert _POSTS == ["/charge-lost"]
    task = task_row(world, wf)
    assert task["status"] == "FAILED" and task["attempts_used"] == 1
    assert task["error"].startswith("HttpRefused: HTTP_EFFECT_UNKNOWN: HTTP_NO_ANSWER: POST")
    assert world.instance(wf)["review_reasons"][0]["code"] == "TASK_FAILED"


def test_K8_claiming_with_an_unknown_queue_is_no_error(world, database):
    assert Worker(database, ["nowhere"], idle_probe_ms=5).run(exit_when_idle=True)["claimed"] == 0
    with pytest.raises(ValueError):
        Worker(database, ["payments"], lease_ms=1_000, heartbeat_ms=1_000)
    assert isinstance(errors.AttemptNotCurrent("x"), errors.WeaveError)


class PausesRecorded(Worker):
    """A worker whose idle sleeps are recorded instead of slept (an ended attempt still cuts one short), and
    that runs ``on_pause(n)`` at the n-th one; it stops after ``pauses`` of them."""

    def __init__(self, *args, pauses: int, on_pause=None, **kw):
        super().__init__(*args, **kw)
        self.pauses: list[float] = []
        self.limit, self.on_pause = pauses, on_pause or (lambda n: None)

    def _idle_wait(self, seconds: float) -> bool:
        self.pauses.append(seconds)
        self.on_pause(len(self.pauses))
        if len(self.pauses) >= self.limit:
            self.stop()
        with self._cond:  # wait until the attempts claimed so far have ended, then report it as the real one does
            self._cond.wait_for(lambda: not self._inflight, timeout=10)
        return super()._idle_wait(0)


def test_K1_an_idle_worker_claims_ever_less_often_up_to_idle_max_ms(database):
    worker = PausesRecorded(database, ["payments"], concurrency=1, idle_probe_ms=50, idle_max_ms=800, pauses=7)
    worker.run()
    assert worker.pauses == [0.05, 0.1, 0.2, 0.4, 0.8, 0.8, 0.8]
    assert worker.stats["claimed"] == 0


def test_K1_work_found_or_an_attempt_ended_brings_the_idle_worker_back_to_idle_probe_ms(world, orch, database):
    world.publish(task_flow())

    def arrive(n: int) -> None:
        if n == 3:  # after three empty claims a task is queued
            world.start("job", {"order_id": "o-late"})
            orch.drain()

    worker = PausesRecorded(database, ["payments"], concurrency=1, idle_probe_ms=50, idle_max_ms=800, pauses=6,
                            on_pause=arrive)
    worker.run()
    assert worker.stats["claimed"] == 1 and worker.stats["SUCCEEDED"] == 1
    # 50, 100, 200 ms; the task is claimed at once; as soon as its attempt ends the worker claims again, and
    # the sleeps start over from idle_probe_ms.
    assert worker.pauses == [0.05, 0.1, 0.2, 0.05, 0.1, 0.2]


def test_K1_a_short_claim_is_not_followed_by_a_claim_at_once_but_by_the_next_attempt_that_ends(
        world, orch, database, monkeypatch):
    world.publish(task_flow())
    world.start("job", {"order_id": "o-1"})
    orch.drain()
    claims: list[int] = []
    real_claim = pulse.task_claim

    def counted(*args, **kw):
        claims.append(len(real := real_claim(*args, **kw)))
        return real

    monkeypatch.setattr(pulse, "task_claim", counted)
    worker = PausesRecorded(database, ["payments"], concurrency=4, idle_probe_ms=50, idle_max_ms=800, pauses=2)
    worker.run()
    assert worker.stats["claimed"] == 1 and worker.stats["SUCCEEDED"] == 1
    # One task of four asked for: the worker waits (for its attempt to end) before it claims again, which finds
    # nothing; a claim at once after the short one would have found nothing too.
    assert claims == [1, 0]
    assert worker.pauses == [0.05, 0.05]


def poll_flow(interval_ms: int) -> dict:
    return {"name": "polled", "steps": [{
        "key": "check", "type": "POLL", "queue": "payments", "handler": "example.poll", "handler_version": "1",
        "input": {"done_at": 3}, "interval_ms": interval_ms, "max_rounds": 3, "timeout_ms": HOUR,
        "task_timeout_ms": HOUR, "result": {"pending": ["PENDING"], "success": ["DONE"]}}]}


def test_P8_a_poll_answer_its_step_cannot_take_is_a_warning_though_its_task_succeeded(world, orch, database, caplog):
    """A POLL handler that answered a status the poll does not know (\"paid\" for PAID) sent its step to review,
    while the worker logged the attempt as a plain success: at WEAVE_LOG_LEVEL=WARNING nothing was said at all.
    The line says the round's outcome, and is a warning when the step goes to review."""
    private = Registry()

    @handler("psp.check", version="1", into=private)
    def check(input):
        return {"status": input["answer"]}

    for name, answer in (("invalid", "paid"), ("pending", "PENDING")):
        world.publish({"name": name, "steps": [{
            "key": "check", "type": "POLL", "queue": "payments", "handler": "psp.check", "handler_version": "1",
            "input": {"answer": answer}, "interval_ms": 60_000, "max_rounds": 3, "timeout_ms": HOUR,
            "task_timeout_ms": HOUR, "result": {"pending": ["PENDING"], "success": ["PAID"]}}]})
        world.start(name, {})
    orch.drain()
    with caplog.at_level(logging.INFO, logger="weave.worker"):
        assert make_worker(database, handlers=private).run(max_claims=2)["SUCCEEDED"] == 2
    ended = {r.fields["round_outcome"]: r for r in caplog.records if r.getMessage() == "attempt ended"}
    assert set(ended) == {"INVALID", "POLL_PENDING"}
    assert ended["INVALID"].levelno == logging.WARNING and ended["POLL_PENDING"].levelno == logging.INFO


def test_K1_an_idle_worker_claims_when_the_next_round_its_report_left_waiting_is_due(world, orch, database):
    world.publish(poll_flow(2_000))
    world.start("polled", {})
    orch.drain()
    worker = PausesRecorded(database, ["payments"], concurrency=1, idle_probe_ms=50, idle_max_ms=4_000, pauses=8)
    worker.run()
    assert worker.stats["SUCCEEDED"] == 1  # round 1 answered PENDING: the next round is due in 2 s
    # The sleeps double as claims find nothing, until the next one would outlast the round's due time: that one
    # ends when the round is due (plus EXPECTED_LATE_S), and the sleeps start over from idle_probe_ms. (The
    # recorded worker does not sleep, so the round's 2 s have hardly begun to run.)
    assert worker.pauses[:6] == [0.05, 0.1, 0.2, 0.4, 0.8, 1.6]
    assert 1.6 < worker.pauses[6] <= 2.0 + EXPECTED_LATE_S
    assert worker.pauses[7] == 0.05


def test_K1_an_idle_worker_claims_when_the_retry_its_report_scheduled_is_due(world, orch, database):
    world.publish(task_flow(handler="example.flaky", task_timeout_ms=HOUR,
                            retry={"max_attempts": 3, "initial_backoff_ms": 2_000, "backoff_coefficient": 2.0}))
    world.start("job", {"order_id": "o-1"})
    orch.drain()
    worker = PausesRecorded(database, ["payments"], concurrency=1, idle_probe_ms=50, idle_max_ms=4_000, pauses=7)
    worker.run()
    assert worker.stats["RETRY_SCHEDULED"] == 1
    assert worker.pauses[:6] == [0.05, 0.1, 0.2, 0.4, 0.8, 1.6]
    assert 1.6 < worker.pauses[6] <= 2.0 + EXPECTED_LATE_S


def test_K3_a_report_answers_when_the_task_it_scheduled_becomes_claimable(world, orch, database):
    world.publish(poll_flow(2_000))
    world.start("polled", {})
    orch.drain()
    conn = world.db.conn
    claim = pulse.task_claim(conn, "w-1", ["payments"])[0]
    answer = pulse.attempt_complete(conn, claim["attempt_id"], "w-1", {"status": "PENDING"})
    assert answer["outcome"] == "SUCCEEDED" and answer["next_task_in_ms"] == 2_000
    world.db.advance(2_000)
    orch.drain()  # round 2 starts
    claim = pulse.task_claim(conn, "w-1", ["payments"])[0]
    answer = pulse.attempt_complete(conn, claim["attempt_id"], "w-1", {"status": "DONE"})
    assert answer["outcome"] == "SUCCEEDED" and answer["next_task_in_ms"] is None  # the step settled
    world.publish(task_flow(task_timeout_ms=HOUR,
                            retry={"max_attempts": 2, "initial_backoff_ms": 1_500, "backoff_coefficient": 2.0}))
    world.start("job", {"order_id": "o-1"})
    orch.drain()
    claim = pulse.task_claim(conn, "w-1", ["payments"])[0]
    answer = pulse.attempt_fail(conn, claim["attempt_id"], "w-1", "flaky", retryable=True)
    assert answer["outcome"] == "RETRY_SCHEDULED" and answer["next_task_in_ms"] == 1_500
    world.db.advance(1_500)
    claim = pulse.task_claim(conn, "w-1", ["payments"])[0]
    answer = pulse.attempt_fail(conn, claim["attempt_id"], "w-1", "flaky", retryable=True)
    assert answer["outcome"] == "FAILED" and answer["next_task_in_ms"] is None  # no attempt left


def test_K1_an_attempt_that_ends_wakes_an_idle_sleeping_worker_at_once(world, orch, database):
    private = Registry()
    release = threading.Event()

    @handler("held.until.released", version="1", into=private)
    def held(input):
        assert release.wait(30)
        return {"done": True}

    world.publish(task_flow("held", handler="held.until.released"))
    first = world.start("held", {"order_id": "o-1"})
    orch.drain()
    sleeping = threading.Event()

    class Watched(Worker):
        def _idle_wait(self, seconds: float) -> bool:
            sleeping.set()
            return super()._idle_wait(seconds)

    # Sleeps of a minute: only the attempt's end can bring the next claim within the wait below.
    worker = Watched(database, ["payments"], concurrency=2, handlers=private, idle_probe_ms=60_000,
                     idle_max_ms=60_000)
    thread = in_thread(worker)
    try:
        assert wait_for(lambda: task_row(world, first)["status"] == "RUNNING" and sleeping.is_set(), timeout=10)
        second = world.start("held", {"order_id": "o-2"})
        orch.drain()
        assert worker.stats["claimed"] == 1
        release.set()
        assert wait_for(lambda: task_row(world, second)["status"] == "SUCCEEDED", timeout=10)
    finally:
        release.set()
        worker.stop()
        thread.join(timeout=20)
    assert worker.stats["claimed"] == 2 and worker.stats["SUCCEEDED"] == 2


@pytest.mark.parametrize("source, said", [
    ("def broken(:\n    pass\n", "SyntaxError: invalid syntax"),
    ("import os\nraise RuntimeError('PAYMENTS_URL is not set')\n", "RuntimeError: PAYMENTS_URL is not set"),
    ("import os\nimport payments_sdk_not_installed\n", "ModuleNotFoundError: No module named 'payments_sdk_not"),
    ("import os\nimport handlers\n", "ModuleNotFoundError: No module named 'handlers'"),  # a prefix of its name
    (None, "ModuleNotFoundError")])
def test_K8_a_handler_module_that_cannot_be_imported_stops_the_worker_in_one_line(database, tmp_path, monkeypatch,
                                                                                  capsys, source, said):
    """The worker's own command line never ends in a traceback: a handler module that is missing, does not parse
    or fails as it runs its import is named, with where its code failed, on stderr, and the worker exits 1."""
    name = f"handlers_{tmp_path.name.replace('-', '_')}"
    if source is not None:
        (tmp_path / f"{name}.py").write_text(source)
    monkeypatch.chdir(tmp_path)  # the worker imports from its working directory
    assert run_worker(database, queues=["payments"], handler_modules=[name]) == 1
    out = capsys.readouterr()
    line, = out.err.strip().splitlines()
    assert line.startswith(f"weave worker: cannot import handler module {name}: {said}") and "Traceback" not in out.err
    if source is not None:
        assert f"{name}.py" in line and "line " in line


@pytest.mark.process
@pytest.mark.parametrize("handlers", [[], ["--handlers", "orchestrator.example_handlers"]])
def test_K8_a_worker_started_without_handlers_of_its_own_warns_as_it_starts(database, tmp_path, handlers):
    """Every task for a handler the worker does not know fails HANDLER_NOT_FOUND at once and goes to review, so
    a worker started without --handlers (the usual slip) says so in its first lines; with them it does not."""
    from tests.support.processes import WeaveProcess

    log = tmp_path / "worker.log"
    proc = WeaveProcess(database, "worker", "--queue", "payments", *handlers, log=log)
    try:
        assert wait_for(lambda: "worker started" in log.read_text(), timeout=30), log.read_text()
    finally:
        proc.terminate()
        proc.close()
    warnings = [json.loads(line) for line in log.read_text().splitlines()
                if line.startswith("{") and json.loads(line)["level"] == "warning"]
    if handlers:
        assert warnings == []
    else:
        warning, = warnings
        assert "HANDLER_NOT_FOUND" in warning["msg"] and warning["handlers"] == ["http@1"]


def test_a_worker_run_again_reports_on_the_sessions_of_its_last_run(world, orch, database):
    """A run's task threads end with it; the next run's threads take over their sessions (routines parsed)."""
    world.publish(task_flow())
    worker = make_worker(database, concurrency=1)
    try:
        sessions = []
        for n in range(2):
            world.start("job", {"order_id": f"o-{n}"})
            orch.drain()
            assert worker.run(max_claims=1)["SUCCEEDED"] == n + 1  # the counts add up over runs
            sessions.append({conn.thread_id() for conn in worker._connections._all})
        assert sessions[0] == sessions[1] and len(sessions[0]) >= 2  # the claim loop's and the task thread's
    finally:
        worker.close()
    assert not worker._connections._all


def test_K8_a_result_nested_too_deep_to_encode_fails_its_attempt_and_is_reported(world, orch, database):
    """A value nested past Python's recursion limit cannot be written as JSON: the handler ended, so its attempt
    fails as RESULT_INVALID at once rather than running out its lease as an unknown effect."""
    private = Registry()

    @handler("deep.result", version="1", into=private)
    def deep_result(input):
        value: list = []
        for _ in range(100_000):
            value = [value]
        return {"status": "DONE", "output": value}

    world.publish(task_flow("deep", handler="deep.result", retry={"max_attempts": 1}))
    wf = world.start("deep", {"order_id": "o"})
    orch.drain()
    stats = make_worker(database, handlers=private).run(max_claims=1)
    assert stats["FAILED"] == 1 and not stats["report_failed"], stats
    task = task_row(world, wf)
    assert task["status"] == "FAILED" and task["error"].startswith("RESULT_INVALID")


def test_K8_a_result_larger_than_any_report_can_carry_fails_its_attempt_at_once(world, orch, database):
    """A result is at most 1 MiB of JSON. One larger than the server takes in one packet (16 MiB by default) never
    reached the routine that refuses it: the connection was cut, the report was tried again and again until the
    lease ran out, and the attempt went to review as an unknown effect although the handler had ended. It now fails
    as RESULT_INVALID at once, without being sent."""
    private = Registry()

    @handler("huge.result", version="1", into=private)
    def huge_result(input):
        return {"status": "DONE", "output": "x" * (20 * 1024 * 1024)}

    world.publish(task_flow("huge", handler="huge.result", retry={"max_attempts": 3, "initial_backoff_ms": 0}))
    wf = world.start("huge", {"order_id": "o"})
    orch.drain()
    stats = make_worker(database, handlers=private, lease_ms=2_000, heartbeat_ms=1_000).run(max_claims=1)
    assert stats["FAILED"] == 1 and not stats["report_failed"], stats
    task = task_row(world, wf)
    assert task["status"] == "FAILED" and task["attempts_used"] == 1
    assert task["error"].startswith("RESULT_INVALID") and "1 MiB" in task["error"]


def test_K8_an_exception_that_cannot_be_written_as_text_still_fails_its_attempt(world, orch, database):
    """An exception whose str() raises (a library's, built with arguments its __str__ does not expect) made the
    worker itself fail while describing it: the attempt was left to its lease and went to review as an unknown
    effect, although the handler had ended with a failure. The failure is now reported, described by its type."""
    private = Registry()

    class Unprintable(Exception):
        def __str__(self):
            raise ValueError("no text")

    class UnprintableRetryable(Retryable):
        def __str__(self):
            raise ValueError("no text")

    @handler("unprintable.fails", version="1", into=private)
    def fails(input):
        raise Unprintable("declined")

    @handler("unprintable.retries", version="1", into=private)
    def retries(input):
        raise UnprintableRetryable("timeout")

    failing, retrying = each_fails_once(world, orch, database, private, "unprintable.fails", "unprintable.retries")
    assert task_row(world, failing)["error"].startswith("Unprintable")
    assert task_row(world, retrying)["error"].startswith("UnprintableRetryable")


@pytest.mark.parametrize("source", [
    "async def check(input):\n    return {'status': 'DONE'}\n",
    "async def check(input):\n    yield {'status': 'DONE'}\n",
    "def check(input):\n    yield {'status': 'DONE'}\n"])
def test_K8_a_handler_the_worker_would_never_run_is_refused_as_its_module_is_imported(database, tmp_path, monkeypatch,
                                                                                     capsys, source):
    """A worker calls a handler and takes what it returns as the result. An ``async def`` handler (or a generator)
    returned a coroutine (or a generator) whose code never ran: every task for it failed RESULT_INVALID ("Object of
    type coroutine is not JSON serializable") and went to review, once deployed. Registering one is refused, so the
    worker does not start with it and says where."""
    with pytest.raises(ValueError, match="plain function"):
        scope: dict = {}
        exec(source, scope)
        handler("never.run", version="1", into=Registry())(scope["check"])
    name = f"handlers_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text("from orchestrator import handler\n\n"
                                         "@handler('never.run', version='1')\n" + source)
    monkeypatch.chdir(tmp_path)
    assert run_worker(database, queues=["payments"], handler_modules=[name]) == 1
    line, = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"weave worker: cannot import handler module {name}: ValueError: handler never.run")
    assert "plain function" in line and f"{name}.py" in line
    assert "never.run@1" not in registry.names()


@pytest.mark.parametrize("source", [
    "def check():\n    return {}\n",
    "def check(input, ctx, order):\n    return {}\n",
    "def check(*, input):\n    return {}\n"])
def test_K8_a_handler_that_cannot_take_its_input_is_refused_as_it_is_registered(source):
    """The worker calls a handler with the input, and the context too when it takes two positional arguments. One
    that can be called neither way (no parameter, a third required one, a keyword-only input) failed every task
    with a TypeError of the worker's call, non-retryable, sending each step to review once deployed. Registering
    one is refused, naming it, so its worker does not start."""
    scope: dict = {}
    exec(source, scope)
    with pytest.raises(ValueError, match="handler check.me version 1 cannot be called with"):
        handler("check.me", version="1", into=Registry())(scope["check"])


def test_K8_handlers_called_with_the_input_or_with_the_input_and_the_context_are_registered():
    private = Registry()

    class Callable:
        def __call__(self, input, ctx):
            return input

    for n, fn in enumerate([lambda input: input, lambda input, ctx=None: input, lambda *args, **kw: args[0],
                            lambda input, *, flag=False: input, Callable(), json.dumps]):
        handler(f"fine.{n}", version="1", into=private)(fn)
    assert len(private.names()) == 6


def test_K8_two_functions_of_one_module_registered_under_one_name_and_version_stop_the_worker(tmp_path, monkeypatch):
    """A handler copied to make its next version, with the name and the version left as they were (and, as Python
    allows, the function's name too), replaced the first without a word: the worker ran only the later one for every
    task of that version. Registering a second function under a pair already taken is refused, as it is for a
    function of another module; the same function registered again (a module imported again) is not."""
    name = f"handlers_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(
        "from orchestrator import handler\n\n"
        "@handler('twice.named', version='1')\ndef check(input):\n    return {'status': 'PAID'}\n\n"
        "@handler('twice.named', version='1')\ndef check(input):\n    return {'status': 'PAID', 'v': 2}\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(HandlerModuleError) as refused:  # what stops the worker at start
        load_modules([name])
    assert f"cannot import handler module {name}: ValueError: handler twice.named version 1 is already registered" \
        in str(refused.value) and f"{name}.py, line 7" in str(refused.value)

    private = Registry()

    def again(input):
        return input

    handler("again", version="1", into=private)(again)
    handler("again", version="1", into=private)(again)
    assert private.names() == ["again@1"]


def test_K8_a_result_whose_keys_json_writes_alike_fails_its_attempt(world, orch, database):
    """json writes the keys 1 and "1" (True and "true", None and "null") alike, so a dict holding both became an
    object with a duplicate key: the server's JSON functions read the first of them, Python the last, and a
    successor step's expression and the API showed the step output with different values. Such a result now fails
    as RESULT_INVALID, naming the key; non-text keys that collide with nothing are written as before."""
    private = Registry()

    @handler("keys.collide", version="1", into=private)
    def collide(input):
        return {"status": "DONE", "by_id": [{1: "first", "1": "second"}]}

    @handler("keys.apart", version="1", into=private)
    def apart(input):
        return {"by_id": {2: "two", 2.5: "two and a half", True: "yes", None: "none"}}

    world.publish(task_flow("collide", handler="keys.collide", retry={"max_attempts": 1}))
    world.publish(task_flow("apart", handler="keys.apart", retry={"max_attempts": 1}))
    colliding, fine = world.start("collide", {"order_id": "o"}), world.start("apart", {"order_id": "o"})
    orch.drain()
    stats = make_worker(database, handlers=private).run(max_claims=2)
    assert stats["FAILED"] == 1 and stats["SUCCEEDED"] == 1, stats
    task = task_row(world, colliding)
    assert task["status"] == "FAILED" and task["error"].startswith("RESULT_INVALID") and "'1'" in task["error"]
    orch.drain()
    assert world.step(fine, "work")["output"] == {
        "by_id": {"2": "two", "2.5": "two and a half", "true": "yes", "null": "none"}}


def test_K8_decimals_reach_a_handler_and_its_result_with_every_digit(world, orch, database):
    """Payment code holds amounts as Decimal, which json writes none of: such a result failed as RESULT_INVALID, and
    converting to float would have kept 17 significant digits. Each Decimal is written with its own digits, and a
    handler registered with decimals=True gets its input's numbers with a fraction as Decimals."""
    private = Registry()
    given = []

    @handler("charge.exact", version="1", into=private, decimals=True)
    def charge(input):
        given.append(input)
        return {"charged": input["amount"], "fees": [Decimal("0.30"), Decimal("-0.00")]}

    @handler("charge.nan", version="1", into=private)
    def charge_nan(input):
        return {"charged": Decimal("NaN")}

    amounts = {"order_id": "$.input.order_id", "amount": "$.input.amount", "items": "$.input.items"}
    world.publish(task_flow("exact", handler="charge.exact", retry={"max_attempts": 1}, input=amounts))
    world.publish(task_flow("nan", handler="charge.nan", retry={"max_attempts": 1}))
    exact = world.start("exact", input_json='{"order_id": "o", "amount": 12345678901234567890.10, "items": 2}')
    nan = world.start("nan", {"order_id": "o"})
    orch.drain()
    stats = make_worker(database, handlers=private).run(max_claims=2)
    assert stats["SUCCEEDED"] == 1 and stats["FAILED"] == 1, stats
    assert given == [{"order_id": "o", "amount": Decimal("12345678901234567890.10"), "items": 2}]
    assert task_row(world, nan)["error"].startswith("RESULT_INVALID") and "NaN" in task_row(world, nan)["error"]
    orch.drain()
    output = world.db.scalar("SELECT output FROM weave_steps WHERE instance_id = %s AND step_key = 'work'",
                             world.internal_id(exact))
    assert json.loads(output, parse_float=Decimal) == {
        "charged": Decimal("12345678901234567890.10"), "fees": [Decimal("0.30"), Decimal("-0.00")]}


def test_K8_a_handler_with_an_optional_second_parameter_keeps_its_default(world, orch, database):
    """The worker passed the context to any handler with a second positional parameter, so one written as
    ``def check(input, timeout_s=5.0)`` got the TaskContext as its timeout, and failed every task. The context goes
    to a second parameter that has no default, or that is named ctx or context; another keeps its default."""
    private = Registry()

    @handler("optional.timeout", version="1", into=private)
    def with_default(input, timeout_s=5.0):
        return {"timeout_s": timeout_s}

    @handler("optional.ctx", version="1", into=private)
    def with_ctx(input, ctx=None):
        return {"attempt": ctx.attempt_no}

    @handler("optional.context", version="1", into=private)
    def with_context(input, context=None):
        return {"attempt": context.attempt_no}

    world.publish(task_flow("timeout", handler="optional.timeout"))
    world.publish(task_flow("ctx", handler="optional.ctx"))
    world.publish(task_flow("context", handler="optional.context"))
    wfs = [world.start(name, {"order_id": "o"}) for name in ("timeout", "ctx", "context")]
    orch.drain()
    assert make_worker(database, handlers=private).run(max_claims=3)["SUCCEEDED"] == 3
    orch.drain()
    assert [world.step(wf, "work")["output"] for wf in wfs] == [{"timeout_s": 5.0}, {"attempt": 1}, {"attempt": 1}]


@pytest.mark.parametrize("name,version,said", [
    ("payments check", "1", "name"), ("payments/check", "1", "name"), ("x" * 129, "1", "name"),
    ("payments.check", "", "version"), ("payments.check", None, "version"), ("payments.check", 1.10, "version"),
    ("payments.check", "v" * 33, "version"), ("payments.check", "é", "version")])
def test_K8_a_handler_name_or_version_no_task_can_carry_is_refused_as_it_is_registered(name, version, said):
    """A task names its handler and version as a definition may (1-128 of A-Z a-z 0-9 _ . : -, and 1-32 printable
    ASCII characters). A handler registered under another name or version (a space, a slash, None, or the float
    1.10, registered as "1.1") was taken without a word and never ran: tasks for the name meant failed
    HANDLER_NOT_FOUND. It is refused as it is registered, so its worker does not start."""
    with pytest.raises(ValueError, match=f"handler {said}"):
        handler(name, version=version, into=Registry())(lambda input: input)


def test_K8_a_whole_number_version_is_registered_as_its_digits():
    private = Registry()
    handler("payments.check", version=2, into=private)(lambda input: input)
    assert private.names() == ["payments.check@2"]


def test_K1_a_worker_whose_threads_need_more_connections_than_the_server_takes_warns_as_it_starts(db, database):
    """Each attempt thread reports on a connection of its own (--concurrency + 2 in all). A worker with more
    threads than the server's max_connections claimed tasks whose reports then met "too many connections" until
    their leases ran out, and they went to review as UNKNOWN; it started without a word (the API warns in that
    case). It now warns as it starts, with the numbers."""
    import logging

    limit = db.scalar("SELECT @@max_connections")
    if limit + 1 > 1000:
        pytest.skip("the server takes more connections than a worker can have threads")
    said: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            said.append(record)

    keep = Keep()
    logging.getLogger("weave.worker").addHandler(keep)
    try:
        for concurrency, warned in ((limit - 2, False), (limit - 1, True)):
            said.clear()
            worker = make_worker(database, concurrency=concurrency)
            try:
                worker.check_level()
            finally:
                worker.close()
            warnings = [r for r in said if r.levelno == logging.WARNING and "max_connections" in r.getMessage()]
            assert bool(warnings) == warned, (concurrency, [r.getMessage() for r in said])
        assert warnings[0].fields == {  # type: ignore[attr-defined]
            "concurrency": limit - 1, "connections": limit + 1, "max_connections": limit}
    finally:
        logging.getLogger("weave.worker").removeHandler(keep)
