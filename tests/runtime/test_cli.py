"""The complete CLI (07-api): operator actions with reasons (C-1, C-2, C-4), listings that never show a token,
`--json` on results and errors, exit codes by error class, and one-line errors instead of tracebacks."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import re
import tempfile
from pathlib import Path

import pytest

from orchestrator.cli import EXIT_CODES, EXIT_TIMED_OUT, EXIT_USAGE, main
from orchestrator.loop import Orchestrator
from procedures import db as dbmod
from procedures import installer, pulse, routines, settings
from tests.sql.test_instance_retry import early_signal_in_review
from tests.support import json_only
from tests.support.signals import resolved_over_sql, send

TIMER = {"name": "cool-off", "steps": [{"key": "wait", "type": "TIMER", "delay_ms": 60_000}]}
POLL = {"name": "poll-flow", "steps": [{"key": "check", "type": "POLL", "queue": "payments",
                                        "handler": "payments.check", "handler_version": "1", "interval_ms": 1000,
                                        "max_rounds": 3, "timeout_ms": 60_000,
                                        "result": {"pending": ["PENDING"], "success": ["DONE"]}}]}


@pytest.fixture
def weave(database, world, capsys):
    def run(*argv: str, token: str | None = None) -> tuple[int, str, str]:
        code = main([*argv, "--dsn", database.url(), "--namespace", "acme", "--token", token or world.token])
        out = capsys.readouterr()
        return code, out.out, out.err

    return run


def test_C1_C2_workflow_actions_take_a_reason_and_print_the_instance(weave, world):
    world.publish(TIMER)
    wf = world.start("cool-off")
    code, out, _ = weave("workflows", "pause", wf, "--reason", "audit", "--idempotency-key", "p1", "--json")
    assert code == 0 and json.loads(out)["control"] == "PAUSED" and json.loads(out)["replayed"] is False
    code, out, _ = weave("workflows", "pause", wf, "--reason", "audit", "--idempotency-key", "p1", "--json")
    assert code == 0 and json.loads(out)["replayed"] is True
    assert weave("workflows", "resume", wf, "--reason", "done")[0] == 0
    code, out, _ = weave("workflows", "deadline", wf, "--reason", "more time", "--extend-ms", "60000")
    assert code == 0 and wf in out
    code, out, _ = weave("workflows", "explain", wf, "wait", "--json")
    assert code == 0 and json.loads(out)["step_key"] == "wait"
    code, out, _ = weave("workflows", "cancel", wf, "--reason", "not needed", "--json")
    assert code == 0 and json.loads(out)["status"] in ("CANCELLING", "CANCELLED")


def test_C4_workflows_retry_ends_the_instance_s_own_review_and_says_why_it_cannot_elsewhere(weave, world, orch):
    wf = early_signal_in_review(world, orch)
    code, out, _ = weave("workflows", "show", wf)
    assert code == 0 and "then retry the instance" in out  # the reason's help names the action
    code, out, _ = weave("workflows", "retry", wf, "--reason", "routines reinstalled", "--json")
    assert code == 0 and json.loads(out)["status"] == "RUNNING" and json.loads(out)["review_reasons"] == []
    code, _, err = weave("workflows", "retry", wf, "--reason", "again", "--json")
    assert code == EXIT_CODES[409] and json.loads(err)["code"] == "INVALID_STATE"


def test_S17_explain_says_why_any_step_is_where_it_is(weave, world, orch):
    """`workflows explain` answered only a signal wait's pins: for a TASK or POLL step it printed "wait not created
    yet" and None, and never the task or what holds the step back, which its JSON and the API give."""
    world.publish({"name": "charge", "steps": [{"key": "t", "type": "TASK", "queue": "payments",
                                                 "handler": "payments.charge", "handler_version": "1",
                                                 "retry": {"max_attempts": 1}}]})
    wf = world.start("charge")
    (task,) = pulse.task_claim(world.db.conn, "w1", "payments", limit=1)
    pulse.attempt_fail(world.db.conn, task["attempt_id"], "w1", "card declined")
    orch.drain()
    code, out, err = weave("workflows", "explain", wf, "t")
    assert code == 0, err
    assert out.startswith("t TASK NEEDS_REVIEW  (instance NEEDS_REVIEW, ACTIVE, deadline ")
    assert f"  task {task['task_id']} FAILED  attempts 1/1" in out
    assert "blocked by" in out and "TASK_FAILED" in out and "  last error card declined" in out
    assert "None" not in out and "wait" not in out
    pulse.attempt_complete(world.db.conn, task["attempt_id"], "w1", {"charged": True})  # too late: kept, no effect
    code, out, err = weave("workflows", "explain", wf, "t")
    assert code == 0 and '(changed nothing): SUCCEEDED {"charged": true}' in out, err
    world.publish(TIMER)
    code, out, err = weave("workflows", "explain", world.start("cool-off"), "wait")
    assert code == 0 and "  timer due " in out and "None" not in out, err


@pytest.mark.parametrize("at", ["2099-12-31T00:00:00", "2099-12-31", "tomorrow"])
def test_C4_a_deadline_at_without_a_zone_is_refused_not_read_in_the_hosts_zone(weave, world, at):
    """--at is RFC 3339 with a zone. A time without one was read in the zone of the host the command ran on, so the
    same command set different deadlines from different hosts."""
    world.publish(TIMER)
    wf = world.start("cool-off")
    before = world.instance(wf)["deadline_at"]
    code, _, err = weave("workflows", "deadline", wf, "--reason", "more time", "--at", at, "--json")
    assert code == 2 and json.loads(err)["code"] == "DEADLINE_INVALID"
    assert world.instance(wf)["deadline_at"] == before
    code, out, err = weave("workflows", "deadline", wf, "--reason", "more time", "--at", "2099-12-31T01:00:00+01:00",
                           "--json")
    assert code == 0 and json.loads(out)["deadline_at"].startswith("2099-12-31T00:00:00"), err


@pytest.mark.parametrize("argv", [
    ["workflows", "deadline", "{wf}", "--reason", "more time", "--at", "9999-12-31T23:00:00-05:00"],
    ["workflows", "deadline", "{wf}", "--reason", "more time", "--at", "0001-01-01T00:00:00+05:00"],
    ["credentials", "create", "--actor", "contractor", "--scopes", "workflows:read", "--expires-in", "3000000d"],
    ["credentials", "create", "--actor", "contractor", "--scopes", "workflows:read", "--expires-in", "9" * 20 + "d"],
    ["workflows", "purge", "--reason", "tidy", "--older-than", "3000000d"],
])
def test_C4_a_time_or_age_outside_the_calendar_is_a_one_line_error_not_a_traceback(weave, world, capsys, argv):
    """A zone that moves --at past 9999-12-31 (or before year 1) in UTC, or an age that reaches outside the calendar
    from the engine clock, ended the command with an OverflowError traceback; each is a usage or validation error
    with its code, and nothing is written."""
    world.publish(TIMER)
    wf = world.start("cool-off")
    before = world.db.table_counts()
    try:
        code, out, err = weave(*[arg.replace("{wf}", wf) for arg in argv], "--json",
                               token=world.admin if argv[0] == "credentials" else None)
    except SystemExit as exited:  # refused by the argument parser itself
        out, err = capsys.readouterr()
        code = exited.code
    assert code == 2 and out == "" and "Traceback" not in err, err
    assert json.loads(err)["code"] in ("DEADLINE_INVALID", "INVALID_ARGUMENT", "USAGE_INVALID")
    assert world.db.table_counts() == before


def test_C1_an_action_prints_the_instance_with_its_own_scope_alone(weave, world):
    """A token that may act but not read pauses an instance: the command prints the instance the action answered
    (it used to read it back with the token, and failed FORBIDDEN after the pause had happened)."""
    world.publish(TIMER)
    wf = world.start("cool-off")
    operator = world.credential(["workflows:control"], actor="operator")["token"]
    code, out, err = weave("workflows", "pause", wf, "--reason", "audit", "--idempotency-key", "p1", "--json",
                           token=operator)
    assert code == 0, err
    assert json.loads(out) == {**world.instance(wf), "replayed": False}


def test_C4_step_recovery_commands_answer_with_the_state_rule(weave, world):
    world.publish(TIMER)
    wf = world.start("cool-off")
    for argv in (["reactivate", wf, "wait"], ["continue", wf, "wait", "--extra-rounds", "1"],
                 ["resolve", wf, "wait", "--output", "{}"]):
        code, _, err = weave("steps", *argv, "--reason", "try", "--json")
        assert code == EXIT_CODES[409] and json.loads(err)["code"] == "INVALID_STATE", (argv, err)


def test_C4_steps_resolve_with_activation_acts_only_on_that_activation(weave, world, orch):
    world.publish({"name": "approval", "steps": [{"key": "approval", "type": "SIGNAL",
                                                  "signal": {"name": "approval.decided", "payload_version": "1"},
                                                  "correlation": "$.input.request_id", "timeout_ms": 60_000}]})
    wf = world.start("approval", {"request_id": "r-1"})
    world.db.advance(60_001)
    orch.drain()
    code, out, err = weave("steps", "resolve", wf, "approval", "--output", "{}", "--reason", "by phone",
                           "--activation", "2", "--json")
    assert code == EXIT_CODES[409] and "is at activation 1, not 2" in json.loads(err)["detail"], err
    assert world.step(wf, "approval")["status"] == "NEEDS_REVIEW"
    code, out, err = weave("steps", "resolve", wf, "approval", "--output", "{}", "--reason", "by phone",
                           "--activation", "1", "--json")
    assert code == 0 and json.loads(out)["steps"][0]["status"] == "SUCCEEDED", err


def test_workflows_wait_shows_the_instance_once_it_settles_and_says_when_time_ran_out(weave, world, orch,
                                                                                       monkeypatch):
    """A script waits for its instance: the command reads it until a status asked for (by default settled, or in
    review), reading again after a pause that the test spends moving the engine's clock, never sleeping."""
    from types import SimpleNamespace

    from orchestrator import cli

    world.publish(TIMER)
    wf = world.start("cool-off")
    pauses: list[float] = []

    def pause(seconds: float) -> None:  # a pause on a clock of the test's own: the sum of the pauses so far
        pauses.append(seconds)
        if len(pauses) == 2:  # the timer falls due after the second pause
            world.db.advance(60_001)
            orch.drain()

    monkeypatch.setattr(cli, "time", SimpleNamespace(monotonic=lambda: sum(pauses), sleep=pause))
    code, out, err = weave("workflows", "wait", wf, "--json")
    assert code == 0 and json.loads(out)["status"] == "SUCCEEDED", err
    assert pauses == [0.05, 0.1]  # the reads slow down as they go
    pauses.clear()
    code, out, err = weave("workflows", "wait", wf, "--until", "RUNNING,CANCELLING", "--timeout", "1s", "--json")
    assert sum(pauses) == pytest.approx(1) and pauses[-1] < 0.4  # the last pause ends at the timeout
    assert code == EXIT_TIMED_OUT and json.loads(err) == {"code": "TIMED_OUT",
                                                          "detail": f"{wf} is still SUCCEEDED after 1 s"}, err
    code, out, err = weave("workflows", "wait", wf)
    assert code == 0 and out.startswith(f"{wf}  cool-off v1  SUCCEEDED"), err


def test_workflows_wait_refuses_a_status_it_does_not_know(weave, world, capsys):
    with pytest.raises(SystemExit) as exited:
        weave("workflows", "wait", "wf_1", "--until", "DONE", "--json")
    assert exited.value.code == 2 and json.loads(capsys.readouterr().err)["code"] == "USAGE_INVALID"


def test_listings_show_what_exists_and_never_a_token(weave, world):
    world.publish(TIMER)
    world.publish({**TIMER, "steps": [{**TIMER["steps"][0], "delay_ms": 1000}]})
    code, out, _ = weave("definitions", "list", "--json")
    assert code == 0 and json.loads(out) == [{**json.loads(out)[0], "name": "cool-off", "latest_version": 2,
                                              "versions": 2}]
    code, out, _ = weave("definitions", "show", "cool-off", "--version", "1", "--json")
    assert code == 0 and json.loads(out)["steps"][0]["delay_ms"] == 60_000
    assert [a["name"] for a in json.loads(weave("apps", "list", "--json", token=world.admin)[1])] == ["billing"]
    assert [q["name"] for q in json.loads(weave("queues", "list", "--json", token=world.admin)[1])] == ["payments"]
    code, out, _ = weave("credentials", "list", token=world.admin)
    assert code == 0 and "ops" in out and world.token not in out and world.admin not in out
    listed = json.loads(weave("credentials", "list", "--json", token=world.admin)[1])
    assert {c["actor"] for c in listed} >= {"ops"} and all("token" not in c for c in listed)


def test_S2_credentials_create_with_an_expiry_on_the_engine_clock_and_list_shows_it(weave, world, database, capsys):
    def status() -> str:  # `weave status` takes no namespace or token: it reads across namespaces
        assert main(["status", "--dsn", database.url()]) == 0
        return capsys.readouterr().out

    now = world.db.now()
    code, out, err = weave("credentials", "create", "--actor", "contractor", "--scopes", "workflows:read",
                           "--expires-in", "36h", "--json", token=world.admin)
    assert code == 0, err
    made = json.loads(out)
    expires = dt.datetime.fromisoformat(made["expires_at"].replace("Z", "+00:00")).replace(tzinfo=None)
    assert dt.timedelta(hours=36) <= expires - now < dt.timedelta(hours=36, seconds=5)  # from the engine's clock
    code, out, err = weave("credentials", "create", "--actor", "late", "--scopes", "workflows:read",
                           "--expires-at", "2000-01-01T00:00:00Z", "--json", token=world.admin)
    assert code == EXIT_CODES[422] and "expires_at must be later" in json.loads(err)["detail"], err
    code, out, _ = weave("credentials", "list", token=world.admin)
    assert code == 0 and made["expires_at"] in out and "None" not in out  # one that never expires shows -
    assert (f"credentials expiring within 7 days: {made['credential_id']} contractor (acme) at "
            f"{made['expires_at']}") in status()
    world.db.advance(36 * 3_600_000)
    code, out, err = weave("workflows", "list", "--json", token=made["token"])
    assert code == EXIT_CODES[401] and "expired" in json.loads(err)["detail"], err
    listed = {c["actor"]: c["status"] for c in json.loads(weave("credentials", "list", "--json",
                                                                token=world.admin)[1])}
    assert listed["contractor"] == "EXPIRED"
    assert f"{made['credential_id']} contractor (acme) EXPIRED" in status()


def test_S2_credentials_disable_and_enable_from_the_command_line(weave, world):
    made = world.credential(["workflows:read"], actor="contractor")
    for action, status in (("disable", "DISABLED"), ("enable", "ACTIVE")):
        code, out, err = weave("credentials", action, made["credential_id"], token=world.admin)
        assert (code, out.strip()) == (0, f"credential {made['credential_id']} is {status}"), err
    code, out, err = weave("workflows", "list", "--json", token=made["token"])
    assert code == 0, err
    code, _, err = weave("credentials", "enable", "cred_999999", "--json", token=world.admin)
    assert code == EXIT_CODES[404] and json.loads(err)["code"] == "NOT_FOUND"


def test_errors_are_json_on_stderr_with_an_exit_code_per_class(weave, world):
    code, out, err = weave("workflows", "show", "wf_999999", "--json")
    assert (code, out) == (EXIT_CODES[404], "") and json.loads(err) == {"code": "NOT_FOUND",
                                                                         "detail": json.loads(err)["detail"]}
    code, _, err = weave("workflows", "list", "--json", token="wv_nobody")
    assert code == EXIT_CODES[401] and json.loads(err)["code"] == "UNAUTHENTICATED"
    code, _, err = weave("workflows", "list", "--cursor", "garbage", "--json")
    assert code == EXIT_CODES[422] and json.loads(err)["errors"][0]["code"] == "CURSOR_INVALID"
    code, _, err = weave("apps", "list", "--json")
    assert code == EXIT_CODES[403] and json.loads(err)["code"] == "FORBIDDEN"
    code, _, err = weave("workflows", "list")
    assert code == 0


def test_a_malformed_dsn_is_one_line_not_a_traceback(capsys):
    code = main(["status", "--dsn", "mysq://root@127.0.0.1/weave"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err and "mysql://" in err
    assert main(["status", "--dsn", "mysq://x", "--json"]) == 2
    assert json.loads(capsys.readouterr().err)["code"] == "DSN_INVALID"


def test_dev_refuses_a_malformed_dsn_as_every_command_does(capsys, tmp_path):
    """Before a server starts or its data folder is locked: a usage error (exit 2), as JSON with --json."""
    data = tmp_path / "dev"
    assert main(["dev", "--data-dir", str(data), "--dsn", "mysq://root@127.0.0.1/weave", "--json"]) == 2
    assert json.loads(capsys.readouterr().err)["code"] == "DSN_INVALID"
    assert main(["dev", "--data-dir", str(data), "--dsn", "mysq://root@127.0.0.1/weave"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "mysql://" in err
    assert not data.exists()


@pytest.mark.parametrize("argv", [
    ["api", "--workers", "0"], ["api", "--threads", "0"], ["orchestrator", "--batch", "0"],
    ["orchestrator", "--concurrency", "-1"], ["orchestrator", "--idle-probe-ms", "0"],
    ["orchestrator", "--idle-max-ms", "0"],
    ["worker", "--queue", "q", "--concurrency", "0"], ["worker", "--queue", "q", "--idle-max-ms", "x"],
    ["api", "--bind", "127.0.0.1:80808"], ["api", "--bind", "nonsense"], ["dev", "--bind", ":8080"]])
def test_a_count_below_one_is_a_usage_error_before_anything_starts(capsys, argv):
    """A batch of 0 would scan and advance nothing while every instance stalled; no API workers would serve
    nothing. Each is refused as the command line is read, naming the option."""
    with pytest.raises(SystemExit) as exited:
        main([*argv, "--dsn", "mysql://root@127.0.0.1:1/weave"])  # never reached: nothing connects
    err = capsys.readouterr().err
    assert exited.value.code == 2 and f"argument {argv[-2]}" in err
    assert "must be at least 1" in err or "is not a whole number" in err or "is not HOST:PORT" in err


@pytest.mark.parametrize("argv", [
    ["workflows", "cancel", "wf_1"],  # --reason missing
    ["orchestrator", "--batch", "0"], ["api", "--bind", "nonsense"], ["worker"],
    ["credentials", "create", "--actor", "x"], ["credentials"], ["apps", "create", "a", "--max-in-flight", "many"]])
def test_a_usage_error_with_json_is_json_on_stderr_like_every_other_error(capsys, argv):
    """The manual promises errors as {"code", "detail"} on stderr under --json, and --json on a daemon for what is
    refused before it starts: a script got argparse's usage text instead, and could not read why."""
    with pytest.raises(SystemExit) as exited:
        main([*argv, "--json", "--dsn", "mysql://root@127.0.0.1:1/weave"])  # never reached: nothing connects
    out = capsys.readouterr()
    assert exited.value.code == 2 and out.out == ""
    err = json.loads(out.err)
    assert err["code"] == "USAGE_INVALID" and err["detail"].startswith("weave ")
    with pytest.raises(SystemExit):  # without --json, the usage for a person as before
        main([*argv, "--dsn", "mysql://root@127.0.0.1:1/weave"])
    assert capsys.readouterr().err.startswith("usage: weave")


@pytest.mark.parametrize("argv, code, exit_code", [
    (["orchestrator", "--batch", "10001"], "USAGE_INVALID", 2),
    (["worker", "--queue", "q", "--lease-ms", "1000", "--heartbeat-ms", "1000"], "USAGE_INVALID", 2),
    (["worker", "--queue", "q", "--handlers", "no_such_module_here"], "HANDLER_MODULE_INVALID", 1)])
def test_a_daemon_refused_before_it_starts_says_why_as_json_under_json(capsys, argv, code, exit_code):
    """--json on a daemon covers what is refused before it starts: these refusals were plain text whatever it
    said."""
    assert main([*argv, "--dsn", "mysql://root@127.0.0.1:1/weave", "--json"]) == exit_code  # nothing connects
    out = capsys.readouterr()
    err = json.loads(out.err.splitlines()[-1])
    assert err["code"] == code and err["detail"] and out.out == ""


@pytest.mark.parametrize("daemon", [["orchestrator"], ["worker", "--queue", "q"], ["api"]])
def test_R16_a_daemon_refusing_another_level_says_so_on_stderr_and_as_json_under_json(database, db, capsys, daemon):
    """The refusal went to stdout from the orchestrator and the worker (the manual: errors on stderr), and was
    plain text under --json."""
    db.execute("UPDATE weave_routines SET digest = REPEAT('0', 64) WHERE name = 'weave_scan'")
    try:
        assert main([*daemon, "--dsn", database.url()]) == 1
        out = capsys.readouterr()
        assert "SCHEMA_MISMATCH" not in out.out
        assert out.err.splitlines()[-1].startswith(f"weave {daemon[0]}: SCHEMA_MISMATCH: database is at level ")
        assert main([*daemon, "--dsn", database.url(), "--json"]) == 1
        out = capsys.readouterr()
        err = json.loads(out.err.splitlines()[-1])
        assert err["code"] == "SCHEMA_MISMATCH" and "weave migrate" in err["detail"] and out.out == ""
    finally:
        installer.migrate(database, test_clock=True)


@pytest.mark.parametrize("namespace", ["acme prod", "n" * 65, "", "acme/"])
def test_a_worker_namespace_no_namespace_can_be_named_is_a_usage_error(capsys, namespace):
    """Such a worker started and served nothing, silently, for as long as it ran (an empty one served every
    namespace instead); the command line now refuses it, as it refuses a queue no queue can be named."""
    with pytest.raises(SystemExit) as exited:
        main(["worker", "--queue", "q", "--namespace", namespace, "--dsn", "mysql://root@127.0.0.1:1/weave"])
    err = capsys.readouterr().err
    assert exited.value.code == 2 and "argument --namespace" in err and "is not a namespace name" in err


@pytest.mark.parametrize("queue", ["pay ments", 'pay"ments', "payments,", "x" * 65])
def test_a_worker_queue_no_queue_can_be_named_is_a_usage_error(capsys, queue):
    """Every claim of such a worker would be refused QUEUES_INVALID; the command line says so at once."""
    with pytest.raises(SystemExit) as exited:
        main(["worker", "--queue", queue, "--dsn", "mysql://root@127.0.0.1:1/weave"])  # never reached
    err = capsys.readouterr().err
    assert exited.value.code == 2 and "argument --queue" in err and "is not a queue name" in err


def test_an_orchestrator_batch_beyond_the_scan_cap_is_refused_in_one_line(capsys):
    """weave_scan brings at most 10000 candidates of a class: a larger batch would be cut without a word."""
    assert main(["orchestrator", "--batch", "10001", "--dsn", "mysql://root@127.0.0.1:1/weave"]) == 2  # no connect
    err = capsys.readouterr().err
    assert err == "weave orchestrator: batch must be at most 10000: a scan brings at most 10000 candidates of a class\n"


def test_an_orchestrator_built_with_a_batch_or_concurrency_below_one_refuses(database):
    for bad in ({"batch": 0}, {"concurrency": 0}, {"chunk": 0}, {"idle_probe_ms": 0}, {"idle_max_ms": 0}):
        with pytest.raises(ValueError, match="must be at least 1"):
            Orchestrator(database, **bad)
    with pytest.raises(ValueError, match="batch must be at most 10000"):
        Orchestrator(database, batch=10_001)
    Orchestrator(database, batch=10_000).close()


def test_an_idle_sleep_beyond_a_day_is_refused_before_the_daemon_starts(database, capsys):
    """An orchestrator's first idle sleep of 10^11 s (--idle-probe-ms 99999999999999) passed the command line and
    the orchestrator died with a traceback (OverflowError) at its first idle probe; a worker's longest idle sleep
    had no bound either. Each is at most a day (86400000 ms), refused in one line otherwise."""
    from orchestrator.worker import Worker

    for name in ("idle_probe_ms", "idle_max_ms"):
        with pytest.raises(ValueError, match=f"{name} must be at most 86400000"):
            Orchestrator(database, **{name: 86_400_001})
    with pytest.raises(ValueError, match="idle_max_ms must be at most 86400000"):
        Worker(database, ["q"], idle_max_ms=86_400_001)
    Orchestrator(database, idle_probe_ms=86_400_000, idle_max_ms=86_400_000).close()
    for argv in (["orchestrator", "--idle-probe-ms", "99999999999999"], ["worker", "--queue", "q", "--idle-max-ms",
                                                                          "99999999999999"]):
        assert main([*argv, "--dsn", "mysql://root@127.0.0.1:1/weave", "--json"]) == 2  # nothing connects
        assert json.loads(capsys.readouterr().err.splitlines()[-1])["code"] == "USAGE_INVALID"


@pytest.mark.parametrize("variable, value, argv", [
    ("WEAVE_LOG_LEVEL", "loud", ["orchestrator"]),
    ("WEAVE_API_DB_TIMEOUT_S", "0", ["api"]),
    ("WEAVE_API_DB_TIMEOUT_S", "nan", ["api"]),
    ("WEAVE_API_DB_TIMEOUT_S", "soon", ["api"]),
    ("WEAVE_API_DB_TIMEOUT_S", "1e300", ["api"]),
    ("WEAVE_API_DB_TIMEOUT_S", "31536001", ["api"]),
    ("WEAVE_CONSOLE_SESSION_TTL_S", "59", ["api"]),
    ("WEAVE_CONSOLE_SESSION_TTL_S", "604801", ["api"]),
    ("WEAVE_CONSOLE_SESSION_TTL_S", "8h", ["api"]),
    ("WEAVE_API_CLIENT_TIMEOUT_S", "0", ["api"]),
    ("WEAVE_API_REQUEST_READ_TIMEOUT_S", "0", ["api"])])
def test_a_setting_the_engine_cannot_run_with_is_one_line_naming_it(capsys, monkeypatch, variable, value, argv):
    """Read before anything starts or connects: a log level logging does not know would be a traceback, an API
    timeout of 0 a worker that fails every call (or fails to boot)."""
    monkeypatch.setenv(variable, value)
    assert main([*argv, "--dsn", "mysql://root@127.0.0.1:1/weave", "--json"]) == 2
    err = json.loads(capsys.readouterr().err)
    assert err["code"] == "CONFIG_INVALID" and variable in err["detail"] and repr(value) in err["detail"]


@pytest.mark.parametrize("value", ["https://psp.example.com", "psp.example.com/pay", "psp.example.com:", "a:b:c",
                                   "psp.example.com:99999", "psp example.com", "[::1", "[::1]x"])
def test_an_http_allowlist_entry_that_names_no_host_is_refused_naming_the_variable(monkeypatch, value):
    """An entry written as a URL (or with a path, a bad port) never matched a host: the worker started, and every
    task of the built-in http handler failed HTTP_HOST_NOT_ALLOWED, with no word about the setting."""
    monkeypatch.setenv("WEAVE_HTTP_ALLOWLIST", f"api.partner.example:8443, {value}")
    with pytest.raises(settings.SettingInvalid, match="WEAVE_HTTP_ALLOWLIST") as info:
        settings.http_allowlist()
    assert repr(value) in str(info.value)


def test_an_http_allowlist_takes_hosts_ports_and_bracketed_ipv6_in_any_case(monkeypatch):
    from orchestrator import http_handler

    monkeypatch.setenv("WEAVE_HTTP_ALLOWLIST", " PSP.example.com, api.partner.example:8443,[::1]:8443, [fd00::2], ,")
    allowed = settings.http_allowlist()
    for url in ("https://psp.example.com/x", "http://api.partner.example:8443/", "https://[::1]:8443/",
                "http://[fd00::2]/"):
        http_handler._check_allowed(url, allowed)
    with pytest.raises(http_handler.HttpRefused):
        http_handler._check_allowed("https://[::1]/", allowed)


def test_an_ipv6_allowlist_entry_with_a_port_allows_that_address_on_that_port_only(monkeypatch):
    """``[fd00::5]:8443`` was kept as ``fd00::5:8443``, which is an IPv6 address of its own: the http handler took
    that other host, fd00::5:8443, as listed, on every port. An address is compared as the address it is, however
    it is written."""
    from orchestrator import http_handler

    monkeypatch.setenv("WEAVE_HTTP_ALLOWLIST", "[fd00::5]:8443, [::1]:8080, [FD00:0::7]")
    allowed = settings.http_allowlist()
    for url in ("https://[fd00::5]:8443/", "http://[0:0:0:0:0:0:0:1]:8080/", "http://[fd00::7]:9/"):
        http_handler._check_allowed(url, allowed)
    for url in ("http://[fd00::5:8443]/", "http://[fd00::5:8443]:22/", "http://[::1:8080]:6379/", "https://[fd00::5]/",
                "http://[::1]:8443/"):
        with pytest.raises(http_handler.HttpRefused, match="HTTP_HOST_NOT_ALLOWED"):
            http_handler._check_allowed(url, allowed)


def test_a_worker_with_such_an_allowlist_refuses_to_start_in_one_line(monkeypatch, capsys):
    monkeypatch.setenv("WEAVE_HTTP_ALLOWLIST", "https://psp.example.com")
    assert main(["worker", "--queue", "q", "--dsn", "mysql://root@127.0.0.1:1/weave", "--json"]) == 2  # no connect
    err = json.loads(capsys.readouterr().err)
    assert err["code"] == "CONFIG_INVALID" and "WEAVE_HTTP_ALLOWLIST" in err["detail"]


@pytest.mark.parametrize("value", ["1e300", "31536001"])
def test_an_api_timeout_beyond_what_a_connection_can_take_is_refused_as_it_is_read(monkeypatch, value):
    """The driver takes timeouts up to a year: a longer one passed the check, and every API worker failed to boot
    with a traceback at its first connect."""
    monkeypatch.setenv("WEAVE_API_DB_TIMEOUT_S", value)
    with pytest.raises(settings.SettingInvalid, match="WEAVE_API_DB_TIMEOUT_S"):
        settings.api_db_timeout()


@pytest.mark.parametrize("variable, value", [("WEAVE_CONSOLE_SESSION_TTL_S", "59"), ("WEAVE_API_DB_TIMEOUT_S", "0"),
                                             ("WEAVE_API_CLIENT_TIMEOUT_S", "nan"),
                                             ("WEAVE_API_REQUEST_READ_TIMEOUT_S", "soon")])
def test_the_api_app_served_by_gunicorn_directly_refuses_such_a_setting_as_it_boots(monkeypatch, variable, value):
    """``gunicorn 'api.app:get_app()'`` skips `weave api`'s checks: the app itself refuses before it serves."""
    from api.app import get_app

    monkeypatch.setenv(variable, value)
    with pytest.raises(settings.SettingInvalid, match=variable):
        get_app("mysql://root@127.0.0.1:1/weave")


@pytest.mark.parametrize("option", ["connect_timeout=1e300", "read_timeout=nan", "write_timeout=inf",
                                    "read_timeout=31536001"])
def test_a_dsn_timeout_no_connection_can_take_is_a_usage_error_not_a_traceback(capsys, option):
    """A timeout the driver refuses (above a year), or one that is not a number at all (nan, inf), passed the
    DSN's check and failed each connect with a traceback: the API's workers failed to boot with one."""
    assert main(["status", "--dsn", f"mysql://root@127.0.0.1:1/weave?{option}", "--json"]) == 2
    err = json.loads(capsys.readouterr().err)
    assert err["code"] == "DSN_INVALID" and option.split("=")[0] in err["detail"]


def test_version_names_the_package_and_the_level_it_ships(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    out = capsys.readouterr().out.strip()
    assert exited.value.code == 0
    assert out.startswith("weave ") and f"(ships level {installer.shipped_level()})" in out


def test_an_unreachable_database_is_exit_code_7(capsys):
    assert main(["status", "--dsn", "mysql://root@127.0.0.1:1/weave", "--json"]) == EXIT_CODES[503]
    assert json.loads(capsys.readouterr().err)["code"] == "UNAVAILABLE"


def test_a_database_that_refuses_the_login_is_exit_code_7_as_the_api_answers_it(database, capsys):
    """A password changed in place: the server refuses the login (1045). The API answers it 503; the CLI said exit 1
    (DATABASE_ERROR), which a script reads as a failure of its own, not as a database to wait for or fix."""
    refused = dataclasses.replace(database, password="not-its-password")
    assert main(["status", "--dsn", refused.url(), "--json"]) == EXIT_CODES[503]
    err = json.loads(capsys.readouterr().err)
    assert err["code"] == "UNAVAILABLE" and "refused the login" in err["detail"]
    assert "not-its-password" not in err["detail"]


def test_show_gives_no_next_round_for_a_poll_that_stopped(weave, world, orch):
    """A POLL stopped on its rounds keeps the time its next round would have had; `show` printed it as the next
    round's, though none will come (P-9)."""
    world.publish({**POLL, "steps": [{**POLL["steps"][0], "max_rounds": 1}]})
    wf = world.start("poll-flow")
    (task,) = pulse.task_claim(world.db.conn, "w1", "payments", limit=1)
    pulse.attempt_complete(world.db.conn, task["attempt_id"], "w1", {"status": "PENDING"})
    orch.drain()
    assert world.step(wf, "check")["poll"]["state"] == "STOPPED"
    code, out, _ = weave("workflows", "show", wf)
    assert code == 0 and "rounds 1/1 (stopped)" in out and " next " not in out


def test_show_says_what_usually_helps_with_each_open_review_reason(weave, world, orch):
    """The remedy for a review reason was on the console's page only: an operator on a shell read the code and its
    raw detail, and went looking for the guide."""
    from procedures.reviews import REVIEW_HELP

    world.publish({**POLL, "steps": [{**POLL["steps"][0], "max_rounds": 1}]})
    wf = world.start("poll-flow")
    (task,) = pulse.task_claim(world.db.conn, "w1", "payments", limit=1)
    pulse.attempt_complete(world.db.conn, task["attempt_id"], "w1", {"status": "PENDING"})
    orch.drain()
    (reason,) = world.instance(wf)["review_reasons"]
    code, out, _ = weave("workflows", "show", wf)
    assert code == 0 and f"    what usually helps: {REVIEW_HELP[reason['code']]}" in out.splitlines()


def test_C3_review_lists_the_instances_waiting_longest_with_their_reasons_and_how_many_there_are(weave, world, orch):
    """From a shell as on the console: the instances in review, the one waiting longest first, each with its open
    reasons; past the limit, how many are in review."""
    world.publish({**POLL, "steps": [{**POLL["steps"][0], "max_rounds": 1}]})
    code, out, _ = weave("workflows", "review")
    assert (code, out.strip()) == (0, "no instance is in review")
    waiting = []
    for _ in range(3):
        waiting.append(world.start("poll-flow"))
        (task,) = pulse.task_claim(world.db.conn, "w1", "payments", limit=1)
        pulse.attempt_complete(world.db.conn, task["attempt_id"], "w1", {"status": "PENDING"})
        orch.drain()
        world.db.advance(1_000)
    code, out, _ = weave("workflows", "review", "--limit", "2")
    lines = out.splitlines()
    assert code == 0 and lines[0].split() == ["WORKFLOW_ID", "DEFINITION", "WAITING_SINCE", "REASONS"]
    assert [line.split()[0] for line in lines[1:3]] == waiting[:2]
    assert lines[1].endswith("POLL_ROUNDS_EXHAUSTED on check #1")
    assert lines[3] == "3 instances are in review: the 2 waiting longest are shown (--limit, up to 500)"
    code, out, _ = weave("workflows", "review", "--json")
    queue = json.loads(out)
    assert [i["workflow_id"] for i in queue["items"]] == waiting and queue["in_review"] == 3
    code, _, err = weave("workflows", "review", "--limit", "0", "--json")
    assert code == EXIT_CODES[422] and "LIMIT_INVALID" in err


def test_show_never_prints_next_none(weave, world, orch):
    world.publish(POLL)
    wf = world.start("poll-flow")
    orch.drain()  # the first round is in flight: no next poll time yet
    assert world.step(wf, "check")["poll"]["next_poll_at"] is None
    code, out, _ = weave("workflows", "show", wf)
    assert code == 0 and "rounds 1/3 (in flight)" in out and "None" not in out


def test_show_keeps_its_columns_for_the_longest_step_key(weave, world):
    long_key = "k" * 64  # the longest a step key may be
    world.publish({"name": "keys", "steps": [{"key": "a", "type": "TIMER", "delay_ms": 60_000},
                                             {"key": long_key, "type": "TIMER", "delay_ms": 60_000}]})
    code, out, _ = weave("workflows", "show", world.start("keys"))
    rows = [line for line in out.splitlines() if " TIMER " in line]
    assert code == 0 and len(rows) == 2 and len({row.index(" TIMER ") for row in rows}) == 1  # one column


def test_R18_show_says_why_an_instance_waits_when_its_work_is_deferred(weave, world, orch):
    """An instance whose starting identity was disabled stays RUNNING with its next round deferred: `workflows show`
    says so, with the reason, as its JSON and `weave status` do, instead of a step that only looks idle."""
    world.publish(POLL)
    starter = world.credential(["workflows:start", "workflows:read"], actor="starter")
    wf = world.start("poll-flow", token=starter["token"])
    orch.drain()
    routines.credential_disable(world.db.conn, world.admin, "acme", starter["credential_id"])
    (task,) = pulse.task_claim(world.db.conn, "w1", "payments", limit=1)
    pulse.attempt_complete(world.db.conn, task["attempt_id"], "w1", {"status": "PENDING"})
    orch.drain()
    world.db.advance(1_000)  # the next round is due, and its start is deferred
    orch.drain()
    code, out, err = weave("workflows", "show", wf)
    assert code == 0, err
    assert "deferred: IDENTITY_DISABLED" in out


def test_the_instance_listing_keeps_its_columns_across_definitions_of_any_name_length(weave, world):
    world.publish(TIMER)
    world.publish({**TIMER, "name": "a-much-longer-definition-name"})
    world.start("cool-off")
    world.start("a-much-longer-definition-name")
    code, out, _ = weave("workflows", "list")
    lines = out.splitlines()
    assert code == 0 and lines[0].split() == ["WORKFLOW_ID", "DEFINITION", "STATUS", "CONTROL", "DEADLINE_AT"]
    assert len(lines) == 3 and len({line.index("RUNNING") for line in lines[1:]} | {lines[0].index("STATUS")}) == 1


def test_the_instance_listing_filters_as_the_api_does(weave, world, orch):
    """An operator told "order o-2 is stuck" could not find it by its business key from the CLI, nor list the
    instances in review for one code, the paused ones or the deferred ones: the API and the console could."""
    world.publish({"name": "two-waits", "steps": [{"key": "first", "type": "TIMER", "delay_ms": 1_000},
                                                   {"key": "then", "type": "TIMER", "delay_ms": 1_000,
                                                    "after": ["first"]}]})
    plain = world.start("two-waits", business_key="o-1")
    paused = world.start("two-waits", business_key="o-2")
    routines.instance_pause(world.db.conn, world.token, world.namespace, paused, "hold", "p-1")
    world.db.advance(1_001)
    orch.drain()  # the first timers settle; the paused instance's next step waits for resume (deferred: PAUSED)

    def listed(*flags: str) -> list[str]:
        code, out, err = weave("workflows", "list", *flags, "--json")
        assert code == 0, err
        return [i["workflow_id"] for i in json.loads(out)["items"]]

    assert listed("--business-key", "o-1") == [plain]
    assert listed("--control", "PAUSED") == [paused] and listed("--control", "ACTIVE") == [plain]
    assert listed("--deferred") == [paused]
    assert listed("--review-code", "TASK_FAILED") == []
    assert sorted(listed()) == sorted([plain, paused])


APPROVAL = {"name": "approval", "steps": [{"key": "approval", "type": "SIGNAL",
                                           "signal": {"name": "approval.decided", "payload_version": "1",
                                                      "payload_type": "object"},
                                           "correlation": "$.input.request_id", "timeout_ms": 60_000}]}


def test_workflows_start_takes_a_deadline_as_a_time_as_the_api_does(weave, world):
    """A start's deadline may be a time (the API's deadline_at) as well as a span from now; a time without a zone, or
    one already past, is refused at its flag and nothing starts."""
    world.publish(APPROVAL)
    at = (world.db.now() + dt.timedelta(days=2)).replace(microsecond=0)
    code, out, err = weave("workflows", "start", "approval", "--app", "billing", "--input", '{"request_id": "r-1"}',
                           "--deadline-at", at.isoformat() + "Z", "--json")
    assert code == 0, err
    assert world.instance(json.loads(out)["workflow_id"])["deadline_at"] == at.isoformat() + ".000000Z"
    code, _, err = weave("workflows", "start", "approval", "--app", "billing", "--deadline-at", at.isoformat(),
                         "--json")
    assert code == 2 and "RFC 3339 time with a zone" in json.loads(err)["detail"], err  # as `workflows deadline --at`
    code, _, err = weave("workflows", "start", "approval", "--app", "billing", "--deadline-at",
                         "2000-01-01T00:00:00Z", "--json")
    assert code == EXIT_CODES[422] and "has not passed" in json.loads(err)["detail"], err
    with pytest.raises(SystemExit) as usage:  # one of the two, as the API takes one
        weave("workflows", "start", "approval", "--app", "billing", "--deadline-ms", "60000",
              "--deadline-at", at.isoformat() + "Z")
    assert usage.value.code == 2
    assert len(json.loads(weave("workflows", "list", "--json")[1])["items"]) == 1


def test_definitions_show_of_a_version_that_is_not_there_names_the_latest(weave, world):
    world.publish(APPROVAL)
    code, _, err = weave("definitions", "show", "approval", "--version", "9", "--json")
    assert code == EXIT_CODES[404]
    assert json.loads(err)["detail"].startswith("definition approval has no version 9; its latest is version 1")
    code, _, err = weave("definitions", "show", "approvals", "--json")
    assert code == EXIT_CODES[404]
    assert json.loads(err)["detail"] == ("no definition approvals in this namespace (looked in namespace acme, which "
                                         "--namespace or WEAVE_NAMESPACE chooses)")


@pytest.mark.parametrize(("flag", "text", "field", "code"), [
    ("--input", '{"request_id": "r-1", "request_id": "r-2"}', "input.request_id", "DUPLICATE_JSON_KEY"),
    ("--input", '{"note": "\\ud800"}', "input.note", "INVALID_TEXT"),
    ("--input", '{"n": 1e400}', "input", "INPUT_INVALID"),
    ("--input", '{"n": 1', "input", "INPUT_INVALID"),
])
def test_workflows_start_refuses_input_json_the_http_api_refuses(weave, world, flag, text, field, code):
    """`--input` is held to the rules of a request body: an object naming one key twice would be read as the first
    value by the engine's expressions and as the last by every Python reader, so it is refused, at the field, and
    nothing starts."""
    world.publish(APPROVAL)
    code_, out, err = weave("workflows", "start", "approval", "--app", "billing", flag, text,
                            "--deadline-ms", "60000", "--json")
    assert (code_, out) == (EXIT_CODES[422], ""), err
    problem = json.loads(err)
    assert problem["code"] == "VALIDATION_FAILED" and problem["errors"][0]["code"] == code
    assert problem["errors"][0]["field"] == field
    assert json.loads(weave("workflows", "list", "--json")[1])["items"] == []


def test_S4_signals_send_refuses_a_payload_with_a_key_named_twice(weave, world):
    """The payload {"approved": true, "approved": false} was stored as sent: the step's output read false in every
    answer while an expression reading it in the engine got true. The command refuses it as the HTTP API does, and
    nothing is stored."""
    world.publish(APPROVAL)
    wf = world.start("approval", {"request_id": "r-1"})
    code, out, err = weave("signals", "send", wf, "--step", "approval", "--name", "approval.decided",
                           "--payload-version", "1", "--activation", "1", "--correlation-key", "r-1",
                           "--payload", '{"approved": true, "approved": false}', "--reason", "desk", "--json")
    assert (code, out) == (EXIT_CODES[422], ""), err
    problem = json.loads(err)
    assert problem["errors"] == [{"field": "payload.approved", "code": "DUPLICATE_JSON_KEY",
                                  "message": problem["errors"][0]["message"]}]
    assert world.step(wf, "approval")["wait"]["status"] == "WAITING"
    code, out, _ = weave("workflows", "events", wf, "--json")
    assert "SIGNAL_ACCEPTED" not in out


def test_S4_signals_get_prints_the_payload_as_the_bytes_accepted(weave, world):
    world.publish(APPROVAL)
    wf = world.start("approval", {"request_id": "r-1"})
    payload = '{"amount": 12345678901234567890.10, "rate": 1.10}'
    code, out, err = weave("signals", "send", wf, "--step", "approval", "--name", "approval.decided",
                           "--payload-version", "1", "--activation", "1", "--correlation-key", "r-1",
                           "--payload", payload, "--reason", "desk", "--json")
    assert code == 0, err
    signal_id = json.loads(out)["signal_id"]
    code, out, _ = weave("signals", "get", wf, signal_id, "--json")
    assert code == 0 and f'"payload": {payload}' in out and json.loads(out)["signal_id"] == signal_id
    code, out, _ = weave("signals", "get", wf, signal_id)
    assert code == 0 and f"payload {payload}" in out
    code, out, _ = weave("workflows", "show", wf, "--json")  # the step's output is that payload, as sent
    assert code == 0 and f'"output": {payload}' in out and json.loads(out) == world.instance(wf)


def test_a_database_that_does_not_exist_says_to_migrate_or_set_the_dsn(database, capsys):
    """A user who forgot WEAVE_DSN (the default names a database `weave`) or mistyped its name got only "the
    database answered 1049: Unknown database". The command says what is missing and what to do, as it does for a
    database that exists but was never migrated."""
    missing = database.with_database(f"{database.database}_none").url()
    assert main(["workflows", "list", "--dsn", missing, "--token", "wv_x", "--json"]) == 1
    problem = json.loads(capsys.readouterr().err)
    assert problem["code"] == "SCHEMA_MISMATCH"
    assert f"{database.database}_none" in problem["detail"] and "weave migrate" in problem["detail"]
    assert "WEAVE_DSN" in problem["detail"]
    assert main(["orchestrator", "--dsn", missing, "--json"]) == 1  # a daemon refuses it alike, before it starts
    logged, refused = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    assert refused["code"] == "SCHEMA_MISMATCH" and "WEAVE_DSN" in refused["detail"]
    assert logged["msg"] == "refusing to start" and f"{database.database}_none" in logged["error"]


def test_status_gives_the_engine_time_as_every_other_time_is_given(database, db, capsys):
    """`weave status --json` gave `now` as "2026-12-05 12:05:51.952327", the only time of the CLI and the API not
    in RFC 3339 UTC (07-api): a script reading it with the parser it uses for every other time failed."""
    assert main(["status", "--dsn", database.url(), "--json"]) == 0
    now = json.loads(capsys.readouterr().out)["now"]
    rfc3339 = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z"
    assert re.fullmatch(rfc3339, now), now
    assert main(["status", "--dsn", database.url()]) == 0
    assert re.match(rf"engine time {rfc3339}\n", capsys.readouterr().out)


def test_R18_status_counts_the_open_review_reasons_by_code(database, world, orch, capsys):
    from tests.sql.test_pulse import claim, task_flow

    world.publish(task_flow(retry={"max_attempts": 1}))
    for order in ("o-1", "o-2"):
        world.start("pay", {"order_id": order})
    orch.drain()
    for task in claim(world, limit=2):
        pulse.attempt_fail(world.db.conn, task["attempt_id"], "w1", "card declined")
    orch.drain()
    assert main(["status", "--dsn", database.url()]) == 0
    assert "in review: 2 instance(s), 2 open reason(s): TASK_FAILED 2\n" in capsys.readouterr().out
    assert main(["status", "--dsn", database.url(), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["review_by_code"] == {
        "TASK_FAILED": {"open_review_reasons": 2, "instances_in_review": 2}}


def test_R16_status_on_a_database_at_another_level_shows_its_figures_under_a_warning(database, db, capsys):
    """A migrate from another build while the nodes run: in that incident above all the operator needs the backlog.
    `weave status` shows it under a warning naming both levels, and exits 1 as before."""
    from procedures import installer

    db.execute("UPDATE weave_routines SET digest = REPEAT('0', 64) WHERE name = 'weave_scan'")
    try:
        assert main(["status", "--dsn", database.url()]) == 1
        out = capsys.readouterr().out
        assert "WARNING: database is at level" in out and "weave_scan" in out
        assert "due now (per candidate class):" in out
        assert main(["status", "--dsn", database.url(), "--json"]) == 1
        assert "weave migrate" in json.loads(capsys.readouterr().out)["database"]["schema_mismatch"]
    finally:
        installer.migrate(database, test_clock=True)
    assert main(["status", "--dsn", database.url()]) == 0 and "WARNING" not in capsys.readouterr().out
    # A build whose weave_status answers in another shape: refused as a mismatch, as before, never a traceback.
    db.execute("DROP PROCEDURE weave_status")
    db.execute("CREATE PROCEDURE weave_status() BEGIN SELECT 1 AS one; SELECT 2 AS two; END")
    db.execute("UPDATE weave_routines SET digest = REPEAT('0', 64) WHERE name = 'weave_status'")
    try:
        assert main(["status", "--dsn", database.url(), "--json"]) == 1
        assert json.loads(capsys.readouterr().err)["code"] == "SCHEMA_MISMATCH"
    finally:
        installer.migrate(database, test_clock=True)


def test_not_found_names_the_namespace_it_looked_in(database, world, capsys, monkeypatch):
    """Without WEAVE_NAMESPACE a command looks in the namespace `default`: a user who forgot it was told only "no such
    object in this namespace" while listing, with no word of which namespace that was."""
    monkeypatch.delenv("WEAVE_NAMESPACE", raising=False)
    assert main(["workflows", "list", "--dsn", database.url(), "--token", world.token]) == EXIT_CODES[404]
    err = capsys.readouterr().err
    assert err.startswith("weave: NOT_FOUND: ") and "namespace default" in err and "WEAVE_NAMESPACE" in err
    assert main(["workflows", "show", "wf_999999", "--dsn", database.url(), "--token", world.token,
                 "--namespace", "acme", "--json"]) == EXIT_CODES[404]
    assert "namespace acme" in json.loads(capsys.readouterr().err)["detail"]


def test_workflows_events_says_where_the_next_page_starts(weave, world):
    """`workflows events` prints at most --limit events; when it printed that many it said nothing of the rest, where
    `workflows list` prints the cursor of its next page. After a full page it now prints the --after that reads
    on."""
    world.publish(APPROVAL)
    wf = world.start("approval", {"request_id": "r-1"})
    code, out, _ = weave("workflows", "events", wf, "--json")
    page = json.loads(out)
    seqs = [e["seq"] for e in page["events"]]
    assert code == 0 and len(seqs) >= 2 and page["next_after"] == seqs[-1]  # as the API answers a page
    code, out, _ = weave("workflows", "events", wf, "--after", str(seqs[-1]), "--json")
    assert json.loads(out) == {"events": [], "next_after": seqs[-1]}
    code, out, _ = weave("workflows", "events", wf, "--limit", "1")
    assert code == 0 and out.rstrip().endswith(f"next page (if any): --after {seqs[0]}")
    code, out, _ = weave("workflows", "events", wf, "--after", str(seqs[0]), "--limit", str(len(seqs)))
    assert code == 0 and "next page" not in out


def test_P5_workflows_rounds_prints_a_polls_rounds_a_page_at_a_time(weave, world, orch):
    """`workflows show` gives the latest 50 rounds of a POLL; `workflows rounds` reads every one, with each result as
    kept under --json and the --after that reads on after a full page."""
    world.publish(POLL)
    wf = world.start("poll-flow")
    orch.drain()
    (task,) = pulse.task_claim(world.db.conn, "w1", "payments", limit=1)
    pulse.attempt_complete(world.db.conn, task["attempt_id"], "w1",
                           result_json='{"status": "PENDING", "amount": 12345678901234567890.10}')
    world.db.advance(1_000)
    orch.drain()
    code, out, err = weave("workflows", "rounds", wf, "check", "--json")
    assert code == 0, err
    page = json_only(out)
    assert [r["number"] for r in page["rounds"]] == [1, 2] and page["next_after"] == 2
    assert '"result": {"status": "PENDING", "amount": 12345678901234567890.10}' in out
    code, out, _ = weave("workflows", "rounds", wf, "check", "--limit", "1")
    lines = out.splitlines()
    assert code == 0 and lines[0].startswith("check #1  poll IN_FLIGHT  rounds 2/")
    assert "POLL_PENDING" in lines[1] and lines[-1] == "next page: --activation 1 --after 1"
    code, out, _ = weave("workflows", "rounds", wf, "check", "--after", "2")
    assert code == 0 and "no rounds after 2" in out and "next page" not in out
    code, _, err = weave("workflows", "rounds", wf, "check", "--activation", "7")
    assert code == EXIT_CODES[404] and "no activation 7" in err


def test_S17_signals_list_pages_an_instances_signals_and_explain_says_when_it_shows_the_latest_only(weave, world):
    """Explain shows the latest 100 signals that targeted a step; past that it says how many there are and where
    to read them all, which `weave signals list` now does, a page at a time as the API."""
    world.publish(APPROVAL)
    wf = world.start("approval", {"request_id": "r-1"})
    for i in range(101):
        send(world, wf, f"k-{i}", correlation_key=f"x-{i}", payload='{"n": 12345678901234567890.10}')
    code, out, err = weave("signals", "list", wf, "--limit", "2")
    assert code == 0, err
    lines = out.splitlines()
    assert len(lines) == 3 and "REJECTED" in lines[0] and "key k-0" in lines[0] and "key k-1" in lines[1]
    cursor = lines[2].removeprefix("next page: --cursor ")
    code, out, _ = weave("signals", "list", wf, "--cursor", cursor, "--limit", "1", "--json")
    page = json_only(out)
    assert [s["idempotency_key"] for s in page["items"]] == ["k-2"] and "payload_text" not in page["items"][0]
    assert '"payload": {"n": 12345678901234567890.10}' in out
    code, out, _ = weave("signals", "list", wf, "--status", "PENDING")
    assert code == 0 and out.strip() == "no signals"
    code, out, _ = weave("signals", "explain", wf, "approval")
    assert code == 0 and "signals: the latest 100 of 101 (`weave signals list` lists them all)" in out
    assert out.count("CORRELATION_MISMATCH") == 100


def test_M2_workflows_events_json_gives_a_resolved_output_as_kept_as_the_api_does(weave, world, orch):
    """`workflows events --json` parsed each event's data and wrote it again: the output of a resolve in its
    STEP_RESOLVED event came back as 1.2345678901234567e+19 where the step holds 12345678901234567890.10, and 1e300
    as 1e+300 (a number no double holds, which came back as Infinity, is now refused where it comes in)."""
    output = '{"n": 1e300, "m": 12345678901234567890.10}'
    wf = resolved_over_sql(world, orch, output)
    code, out, err = weave("workflows", "events", wf, "--json")
    assert code == 0, err
    page = json_only(out)
    assert [e["type"] for e in page["events"]].count("STEP_RESOLVED") == 1
    assert f'"data": {{"output": {output}, ' in out


def test_M2_an_action_prints_the_kept_values_with_every_digit_as_show_and_the_api_do(weave, world, orch):
    """An action's --json printed the instance parsed and written again: the output a resolve settled the step with,
    12345678901234567890.10, came back as 1.2345678901234567e+19 (and the instance's input with it), where
    `workflows show --json` and the API's answer to the same action give it as kept."""
    world.publish(APPROVAL)

    def start(request_id: str) -> str:
        code, out, err = weave("workflows", "start", "approval", "--app", world.app, "--deadline-ms", "86400000",
                               "--input", f'{{"request_id": "{request_id}", "amount": 12345678901234567890.10}}',
                               "--json")
        assert code == 0, err
        return json.loads(out)["workflow_id"]

    wf = start("r-1")
    world.db.advance(61_000)
    orch.drain()
    output = '{"amount": 12345678901234567890.10}'
    code, out, err = weave("steps", "resolve", wf, "approval", "--reason", "by hand", "--output", output, "--json")
    assert code == 0, err
    assert f'"output": {output}' in out and '"input": {"request_id": "r-1", "amount": 12345678901234567890.10}' in out
    assert json.loads(out)["status"] == "SUCCEEDED"
    code, shown, _ = weave("workflows", "show", wf, "--json")
    assert f'"output": {output}' in shown
    code, out, err = weave("workflows", "cancel", wf, "--reason", "done already", "--json")
    assert code == 5 and json.loads(err)["code"] == "INVALID_STATE"
    wf = start("r-2")
    for argv in (("workflows", "pause", wf), ("workflows", "resume", wf),
                 ("workflows", "deadline", wf, "--extend-ms", "1000"), ("workflows", "cancel", wf)):
        code, out, err = weave(*argv, "--reason", "look", "--json")
        assert code == 0, err
        assert '"input": {"request_id": "r-2", "amount": 12345678901234567890.10}' in out, argv


def test_workflows_purge_removes_what_finished_before_the_age_and_reports_each_window(weave, world, orch):
    world.publish(TIMER)
    old = [world.start("cool-off") for _ in range(3)]
    world.db.advance(61_000)
    orch.drain()
    world.db.advance(86_400_000)  # a day later, one more settles
    young = world.start("cool-off")
    world.db.advance(61_000)
    orch.drain()
    code, out, err = weave("workflows", "purge", "--older-than", "12h", "--dry-run", "--json", token=world.admin)
    dry = json.loads(out)
    assert code == 0 and (dry["purged"], dry["rows_deleted"], dry["dry_run"]) == (3, 0, True), err
    assert dry["workflow_ids"] == old  # "count and name what would go"
    code, out, err = weave("workflows", "purge", "--older-than", "12h", "--dry-run", token=world.admin)
    assert code == 0 and out.rstrip().endswith(": " + ", ".join(old)), out
    assert world.instance(old[0])["status"] == "SUCCEEDED"
    code, out, err = weave("workflows", "purge", "--older-than", "12h", token=world.admin)
    assert code == EXIT_CODES[422] and "REASON_INVALID" in err  # a purge that changes something says why
    code, out, err = weave("workflows", "purge", "--older-than", "12h", "--reason", "retention", "--batch", "2",
                           token=world.admin)
    assert code == 0, err
    assert re.fullmatch(r"removed 3 instance\(s\) finished before \S+Z \(\d+ rows\)\n", out), out
    first, second = err.splitlines()  # progress: one line per window that removed anything
    assert re.fullmatch(rf"removed 2 instance\(s\) so far, \d+ rows; next after {old[1]}", first), first
    assert re.fullmatch(r"removed 3 instance\(s\) so far, \d+ rows(; next after wf_\d+)?", second), second
    assert world.instance(young)["status"] == "SUCCEEDED"
    assert world.db.scalar("SELECT COUNT(*) FROM weave_instances") == 1


def test_R1_workflows_purge_sizes_its_windows_by_the_rows_an_instance_holds(weave, world, orch):
    """A window is one transaction, and its size was a count of instances whatever each held: a hundred polls of
    10,000 rounds each made one transaction of millions of rows. The first window now takes at most ten, and each
    next one as many as --max-rows allows at the rows per instance removed so far, at most --batch."""
    world.publish(TIMER)
    for _ in range(16):
        world.start("cool-off")
    world.db.advance(61_000)
    orch.drain()
    world.db.advance(86_400_000)
    code, out, err = weave("workflows", "purge", "--older-than", "12h", "--reason", "retention", "--max-rows", "25",
                           token=world.admin)
    assert code == 0 and out.startswith("removed 16 instance(s)"), (out, err)
    progress = [tuple(map(int, m)) for m in re.findall(r"removed (\d+) instance\(s\) so far, (\d+) rows", err)]
    removed = [n for n, _ in progress]
    windows = [b - a for a, b in zip([0, *removed], removed, strict=False)]
    per_instance = progress[0][1] / progress[0][0]
    assert windows[0] == 10 and len(windows) > 2, windows
    assert all(0 < w <= max(1, int(25 // per_instance)) for w in windows[1:]), (windows, per_instance)
    with pytest.raises(SystemExit) as refused:  # a window of no rows: a usage error
        weave("workflows", "purge", "--older-than", "12h", "--max-rows", "0", token=world.admin)
    assert refused.value.code == 2


@pytest.mark.parametrize("argv", [["--older-than", "0d"], ["--older-than", "90"], ["--older-than", "1.5h"],
                                  ["--older-than", "1d", "--finished-before", "2026-01-01T00:00:00Z"], []])
def test_workflows_purge_refuses_an_age_it_cannot_read_as_a_usage_error(weave, world, capsys, argv):
    if argv:  # refused by the parser
        with pytest.raises(SystemExit) as exited:
            weave("workflows", "purge", *argv, "--reason", "r", "--json", token=world.admin)
        assert exited.value.code == 2 and json.loads(capsys.readouterr().err)["code"] == "USAGE_INVALID"
    else:  # no cutoff and no instance named: refused by the command, before it connects
        code, _, err = weave("workflows", "purge", "--reason", "r", "--json", token=world.admin)
        assert code == 2 and json.loads(err)["code"] == "USAGE_INVALID"


def test_workflows_purge_refuses_a_time_without_a_zone_before_anything_goes(weave, world):
    code, _, err = weave("workflows", "purge", "--finished-before", "2026-01-01T00:00:00", "--reason", "r", "--json",
                         token=world.admin)
    assert code == 2 and json.loads(err)["code"] == "INVALID_ARGUMENT"


def test_workflows_purge_archives_every_row_of_an_instance_before_it_goes(weave, world, orch, tmp_path):
    world.publish(TIMER)
    settled = [world.start("cool-off") for _ in range(3)]
    world.db.advance(61_000)
    orch.drain()
    world.db.advance(121_000)  # past the horizon of /metrics, which counts what a purge removes first
    rows = {t: world.db.scalar(f"SELECT COUNT(*) FROM {t}") for t in ("weave_events", "weave_steps", "weave_waits")}
    archive = tmp_path / "history.jsonl"
    code, out, err = weave("workflows", "purge", "--older-than", "1s", "--reason", "retention", "--batch", "2",
                           "--archive", str(archive), "--json", token=world.admin)
    assert code == 0 and json.loads(out)["purged"] == 3, err
    assert archive.stat().st_mode & 0o777 == 0o600  # inputs and payloads: the owner's alone
    lines = [json.loads(line) for line in archive.read_text().splitlines()]
    assert [line["workflow_id"] for line in lines] == settled
    for line in lines:
        assert line["namespace"] == "acme" and line["tables"]["weave_instances"][0]["status"] == "SUCCEEDED"
        events = line["tables"]["weave_events"]
        assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    for table, count in rows.items():  # every row the tables held is in the archive, and gone from the tables
        assert sum(len(line["tables"].get(table, [])) for line in lines) == count
        assert world.db.scalar(f"SELECT COUNT(*) FROM {table}") == 0


def test_workflows_purge_archives_again_a_window_that_gained_a_row_while_it_was_written(weave, world, orch, tmp_path,
                                                                                     monkeypatch):
    """A worker's late report lands between the archive's read and the purge: the purge refuses the window, the run
    archives it again, and the archive's last line for the instance holds every row that went, the late one too."""
    from procedures import history, pulse

    world.publish({"name": "charge", "steps": [{"key": "charge", "type": "TASK", "queue": "payments", "handler": "h",
                                                "handler_version": "1",
                                                "retry": {"max_attempts": 2, "initial_backoff_ms": 1_000,
                                                          "backoff_coefficient": 2.0, "max_backoff_ms": 1_000}}]})
    wf = world.start("charge")
    first = pulse.task_claim(world.db.conn, "w-first", "payments", limit=1, lease_ms=60_000)[0]
    pulse.attempt_fail(world.db.conn, first["attempt_id"], "w-first", "timeout", retryable=True)
    world.db.advance(1_001)
    second = pulse.task_claim(world.db.conn, "w1", "payments", limit=1, lease_ms=60_000)[0]
    pulse.attempt_complete(world.db.conn, second["attempt_id"], "w1", {})
    orch.drain()
    assert world.instance(wf)["status"] == "SUCCEEDED"
    world.db.advance(121_000)
    reads = []

    def rows_of(conn, workflow_ids):
        rows = real_rows_of(conn, workflow_ids)
        if not reads:  # the late report, once the first archive read is done
            assert pulse.attempt_complete(world.db.conn, first["attempt_id"], "w-first", {})["outcome"] == "LATE"
        reads.append(rows)
        return rows

    real_rows_of = history.rows_of
    monkeypatch.setattr(history, "rows_of", rows_of)
    archive = tmp_path / "history.jsonl"
    code, out, err = weave("workflows", "purge", "--older-than", "1s", "--reason", "retention",
                           "--archive", str(archive), "--json", token=world.admin)
    assert code == 0 and json.loads(out)["purged"] == 1, err
    lines = [json.loads(line) for line in archive.read_text().splitlines()]
    assert [line["workflow_id"] for line in lines] == [wf, wf] and len(reads) == 2
    assert "pulse_late_reports" not in lines[0]["tables"] and len(lines[1]["tables"]["pulse_late_reports"]) == 1
    assert json.loads(out)["rows_deleted"] == sum(map(len, lines[1]["tables"].values()))


def test_R4_audit_prints_the_namespace_s_own_actions_and_an_instance_s(weave, world):
    world.credential(["workflows:read"], actor="bot")
    code, out, err = weave("audit", "--limit", "1", token=world.admin)
    assert code == 0 and "credential.create" in out and "next page: --cursor " in out, err
    cursor = out.rsplit("--cursor ", 1)[1].strip()
    code, out, _ = weave("audit", "--cursor", cursor, "--action", "credential.create", "--json", token=world.admin)
    assert [r["details"]["actor"] for r in json.loads(out)["items"]] == ["ops"]
    world.publish(TIMER)
    wf = world.start("cool-off")
    code, out, _ = weave("audit", "--workflow-id", wf, "--json")
    assert code == 0 and [r["action"] for r in json.loads(out)["items"]] == ["instance.start"]
    code, _, err = weave("audit", "--json")
    assert code == EXIT_CODES[403] and json.loads(err)["code"] == "FORBIDDEN"


def test_R4_values_a_caller_chose_print_with_their_control_characters_escaped(weave, world):
    """A signal's reason is the sender's: printed as it was, an escape sequence in it would clear the operator's
    screen or move the cursor up and write over the audit rows above it, and a line break would add a row of the
    sender's making. The audit trail, the listings and the instance print them escaped; --json stays exact."""
    world.publish(TIMER)
    wf = world.start("cool-off", business_key="bk\x1b[2J")
    forged = "ok\x1b[1A\x1b[2K\x1b]0;title\x07\n2026-01-01T00:00:00.000000Z  admin  credential.disable"
    code, _, err = weave("workflows", "pause", wf, "--reason", forged, "--idempotency-key", "p1")
    assert code == 0, err
    for argv in (("audit", "--workflow-id", wf), ("workflows", "list"), ("workflows", "show", wf)):
        code, out, err = weave(*argv)
        assert code == 0, err
        assert not re.search(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]", out), (argv, out)
    code, out, _ = weave("audit", "--workflow-id", wf)
    assert r"ok\x1b[1A\x1b[2K\x1b]0;title\x07\x0a2026-01-01" in out
    assert not any(line.startswith("2026-01-01") for line in out.splitlines())  # no row of the reason's making
    code, out, _ = weave("audit", "--workflow-id", wf, "--json")
    assert [r["reason"] for r in json.loads(out)["items"]][0] == forged


def test_R4_an_actor_whose_name_turns_the_direction_of_text_prints_escaped(weave, world):
    """An admin named a credential's actor with a right-to-left override: "ops" + U+202E + "evil" showed reversed,
    another name, in the credentials list (and, acting, in the audit trail), and turned the rest of the row. The
    marks that turn the direction of text print escaped, as the controls do; --json stays exact."""
    actor = "ops\u202eevil\u2066x\u2069"
    code, _, err = weave("credentials", "create", "--actor", actor, "--scopes", "workflows:read", token=world.admin)
    assert code == 0, err
    code, out, err = weave("credentials", "list", token=world.admin)
    assert code == 0, err
    assert r"ops\u202eevil\u2066x\u2069" in out and "\u202e" not in out, out
    code, out, _ = weave("credentials", "list", "--json", token=world.admin)
    assert actor in [c["actor"] for c in json.loads(out)]


def test_definitions_publish_reads_a_file_saved_with_a_byte_order_mark(weave, world, tmp_path):
    """Some Windows editors save UTF-8 with a byte order mark: such a file was refused with only "Expecting value at
    line 1 column 1". RFC 8259 lets a reader ignore the mark, and the CLI does; the definition is the same."""
    path = tmp_path / "cool-off.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(TIMER).encode())
    code, out, err = weave("definitions", "publish", str(path), "--json", token=world.admin)
    assert code == 0, err
    assert json.loads(out)["version"] == 1 and json.loads(out)["created"]
    path.write_bytes(json.dumps(TIMER).encode())  # the same content without the mark: the same version
    code, out, _ = weave("definitions", "publish", str(path), "--json", token=world.admin)
    assert code == 0 and json.loads(out)["version"] == 1 and not json.loads(out)["created"]


def test_definitions_publish_with_an_idempotency_key_answers_its_first_publish_when_run_again(weave, world, tmp_path):
    """A deploy job that publishes under its build's id and is run again after a later deploy must not make its
    older document the latest version again."""
    path = tmp_path / "cool-off.json"
    path.write_text(json.dumps(TIMER))
    code, out, err = weave("definitions", "publish", str(path), "--idempotency-key", "build-41", token=world.admin)
    assert code == 0 and "version 1 published" in out, err
    world.publish({**TIMER, "steps": [{**TIMER["steps"][0], "delay_ms": 1}]})
    code, out, err = weave("definitions", "publish", str(path), "--idempotency-key", "build-41", token=world.admin)
    assert code == 0 and out.strip() == ("definition cool-off version 1 published "
                                         "(answered again: this key's first publish)"), (out, err)
    assert world.db.scalar("SELECT MAX(version) FROM weave_definitions") == 2


def test_definitions_publish_past_the_server_s_packet_limit_says_so_and_publishes_nothing(capsys):
    """A definition larger than the database server takes in one statement (max_allowed_packet) was sent anyway:
    the server dropped the connection, the CLI tried again, and said UNAVAILABLE: 2006 MySQL server has gone away,
    as if the database were down. It now says what is too large, and what the server takes."""
    from tests.support.server import private_server

    with private_server("weave-packet-", "weave", options=("--max-allowed-packet=1M",)) as (_, dsn), \
            tempfile.TemporaryDirectory() as folder:
        with dbmod.connect(dsn) as conn:
            admin = routines.namespace_bootstrap(conn, "acme")["token"]
            routines.queue_put(conn, admin, "acme", "payments", 10)
        path = Path(folder) / "big.json"
        path.write_text(json.dumps({"name": "big", "steps": [
            {"key": "t", "type": "TASK", "queue": "payments", "handler": "example.echo", "handler_version": "1",
             "input": {"blob": "x" * 1_100_000}}]}))
        code = main(["definitions", "publish", str(path), "--dsn", dsn.url(), "--namespace", "acme",
                     "--token", admin])
        said = capsys.readouterr().err
        assert code == EXIT_CODES[413], said
        assert "PAYLOAD_TOO_LARGE" in said and "max_allowed_packet" in said and "1048576" in said, said
        with dbmod.connect(dsn) as conn, conn.cursor() as cur:
            cur.execute("SELECT COUNT(*) AS n FROM weave_definitions")
            assert cur.fetchall()[0]["n"] == 0


def test_M2_admin_creates_with_an_idempotency_key_answer_their_first_run_when_run_again(weave, world):
    """A provisioning script run again after a later change must not put its old quota back, and a credential's
    create run again must not make a second credential: with a key, each answers its first run."""
    code, out, err = weave("apps", "create", "reports", "--max-in-flight", "5", "--idempotency-key", "prov-1",
                           token=world.admin)
    assert code == 0 and out.strip() == "app reports: max_in_flight 5, ACTIVE", err
    routines.app_put(world.db.conn, world.admin, "acme", "reports", 9)
    code, out, err = weave("apps", "create", "reports", "--max-in-flight", "5", "--idempotency-key", "prov-1",
                           token=world.admin)
    assert code == 0 and out.strip() == ("app reports: max_in_flight 5, ACTIVE "
                                         "(answered again: this key's first answer)"), (out, err)
    assert world.db.scalar("SELECT max_in_flight FROM weave_apps WHERE name = 'reports'") == 9
    args = ("credentials", "create", "--actor", "ci-bot", "--scopes", "workflows:read", "--idempotency-key", "bot-1")
    code, out, err = weave(*args, token=world.admin)
    assert code == 0 and "token (shown once): wv_" in out, err
    made = out.split()[1]
    code, out, err = weave(*args, token=world.admin)
    assert code == 0 and out.startswith(f"credential {made} for ci-bot\n") and "wv_" not in out, (out, err)
    assert f"disable {made} and create another with a new key" in out
    assert world.db.scalar("SELECT COUNT(*) FROM weave_credentials WHERE actor = 'ci-bot'") == 1


def test_workflows_purge_of_named_instances_removes_those_alone_for_a_customer_s_erasure(weave, world, orch, tmp_path):
    """A customer asks to be forgotten: their instances are found by business key and removed by id, with every row
    of theirs. There was no documented way: a purge took every instance finished before a cutoff, and the routine's
    list of ids served only the archive. --workflow-id removes the named ones alone; a live one is kept and named;
    an id that is not this namespace's removes nothing else (a window of one, held to that id)."""
    world.publish(TIMER)
    before = world.start("cool-off", {"email": "someone.else@example.org"})
    theirs = [world.start("cool-off", {"email": "jane@example.org"}, business_key="jane@example.org")
              for _ in range(2)]
    after = world.start("cool-off", {"email": "someone.else@example.org"})
    world.db.advance(61_000)
    orch.drain()
    live = world.start("cool-off", {"email": "jane@example.org"}, business_key="jane@example.org")
    world.db.advance(121_000)  # past the horizon of /metrics, which counts what a purge removes first
    missing = f"wf_{int(after[3:]) + 1000}"
    code, out, err = weave("workflows", "purge", "--workflow-id", theirs[0], "--workflow-id", theirs[1],
                           "--workflow-id", live, "--workflow-id", missing, "--dry-run", "--json", token=world.admin)
    dry = json.loads(out)
    assert code == EXIT_CODES[409] and dry["workflow_ids"] == theirs and dry["left_ids"] == [live, missing], err
    archive = tmp_path / "erased.jsonl"
    code, out, err = weave("workflows", "purge", "--workflow-id", theirs[0], "--workflow-id", theirs[1],
                           "--archive", str(archive), "--json", token=world.admin)  # no reason: nothing written
    assert code == EXIT_CODES[422] and json.loads(err)["code"] == "REASON_INVALID" and not archive.exists()
    code, out, err = weave("workflows", "purge", "--workflow-id", theirs[0], "--workflow-id", theirs[1],
                           "--workflow-id", live, "--workflow-id", missing, "--reason", "erasure request 118",
                           "--archive", str(archive), token=world.admin)
    assert code == EXIT_CODES[409], err  # not every named instance went: a script must not take it as done
    assert out.startswith("removed 2 instance(s) finished before ") and f"left {live}, {missing}: not settled" in out
    assert [json.loads(line)["workflow_id"] for line in archive.read_text().splitlines()] == theirs
    for workflow_id in (before, after, live):
        assert world.instance(workflow_id)["status"] in ("SUCCEEDED", "RUNNING")
    assert world.db.scalar("SELECT COUNT(*) FROM weave_instances WHERE input LIKE %s", "%jane@example.org%") == 1
    # Named again, gone: its window of one holds the namespace's next instance, settled, which stays.
    code, out, err = weave("workflows", "purge", "--workflow-id", theirs[1], "--reason", "erasure request 118",
                           "--json", token=world.admin)
    assert code == EXIT_CODES[409] and json.loads(out)["purged"] == 0 and json.loads(out)["left_ids"] == [theirs[1]]
    assert world.instance(after)["status"] == "SUCCEEDED"
    code, out, err = weave("workflows", "purge", "--workflow-id", before, "--reason", "retention", "--json",
                           token=world.admin)
    assert code == 0 and json.loads(out)["workflow_ids"] == [before], err
    code, _, err = weave("workflows", "purge", "--reason", "x", "--json", token=world.admin)
    assert code == EXIT_USAGE and "--workflow-id" in json.loads(err)["detail"]
    code, _, err = weave("workflows", "purge", "--workflow-id", "7", "--reason", "x", "--json", token=world.admin)
    assert code == EXIT_USAGE and "not a workflow id" in json.loads(err)["detail"]
