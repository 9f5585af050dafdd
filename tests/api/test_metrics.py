"""/metrics as a Prometheus user reads it (07-api, R-11, T-8): parsed with prometheus-client's own parsers, in
the classic text format and in OpenMetrics when the scraper asks, with histograms, counters and gauges of
the right types, the same values from every worker (they come from the database), and numbers that follow
what the engine did."""

from __future__ import annotations

import pytest
from falcon import testing
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics
from prometheus_client.parser import text_string_to_metric_families as parse_text

from api.app import create_app
from api.http import Connections
from tests.api.conftest import auth

NS = "/v1/namespaces/acme"
FLOW = {"name": "cool-off", "steps": [{"key": "wait", "type": "TIMER", "delay_ms": 60_000}]}
TYPES = {
    "weave_timer_lateness_seconds": "histogram", "weave_decision_latency_seconds": "histogram",
    "weave_signals": "counter", "weave_poll_rounds": "counter", "weave_decisions": "counter",
    "weave_due_backlog": "gauge", "weave_oldest_due_lag_seconds": "gauge", "weave_instances": "gauge",
    "weave_review_reasons_open": "gauge", "weave_instances_in_review": "gauge", "weave_candidates_failing": "gauge",
    "weave_review_reasons_open_by_code": "gauge",
    "weave_instances_deferred": "gauge", "weave_instances_paused": "gauge", "weave_oldest_deferral_seconds": "gauge",
}


def families(text: str, openmetrics: bool = False) -> dict:
    parse = parse_openmetrics if openmetrics else parse_text
    return {f.name: f for f in parse(text)}


def value(family, name: str, **labels: str) -> float:
    return next(s.value for s in family.samples if s.name == name and all(s.labels.get(k) == v
                                                                           for k, v in labels.items()))


def test_T8_metrics_parse_with_prometheus_client_and_carry_real_types(client, world, orch):
    client.simulate_post(f"{NS}/definitions", headers=auth(world.admin), json=FLOW)
    client.simulate_post(f"{NS}/workflows", headers=auth(world.token, "m1"),
                         json={"definition": "cool-off", "app": "billing", "deadline_ms": 3_600_000})
    orch.drain()
    world.db.advance(61_500)  # settles 1.5 s late
    orch.drain()
    text = client.simulate_get("/metrics").text
    found = families(text)
    for name, kind in TYPES.items():
        assert name in found and found[name].type == kind, name
    lateness = found["weave_timer_lateness_seconds"]
    assert value(lateness, "weave_timer_lateness_seconds_bucket", le="1.0") == 0
    assert value(lateness, "weave_timer_lateness_seconds_bucket", le="5.0") == 1
    assert value(lateness, "weave_timer_lateness_seconds_count") == 1
    assert 1.4 < value(lateness, "weave_timer_lateness_seconds_sum") < 2.0
    assert value(found["weave_decisions"], "weave_decisions_total", kind="TIMER", result="SATISFIED") == 1
    assert value(found["weave_instances"], "weave_instances", status="RUNNING") == 0  # live ones only: it finished
    assert value(found["weave_due_backlog"], "weave_due_backlog", **{"class": "CHECKPOINT"}) == 0


def test_S2_an_active_credential_that_expires_is_watched_like_a_certificate(client, world):
    """A credential made to expire takes down what uses it at its time: /metrics gives that time (Unix seconds), for
    an alert on it minus time(), until the credential is disabled. It names the credential by id, never by its actor:
    /metrics needs no token."""
    import datetime as dt

    from procedures import routines

    at = world.db.now() + dt.timedelta(days=3)
    made = routines.credential_create(world.db.conn, world.admin, "acme", "contractor", ["workflows:read"],
                                      expires_at=at)
    found = families(client.simulate_get("/metrics").text)
    expiry = found["weave_credential_expiry_timestamp_seconds"]
    assert expiry.type == "gauge" and [s.labels for s in expiry.samples] == [
        {"namespace": "acme", "credential_id": made["credential_id"]}]
    assert "contractor" not in client.simulate_get("/metrics").text
    assert value(expiry, "weave_credential_expiry_timestamp_seconds") == at.replace(tzinfo=dt.timezone.utc).timestamp()
    routines.credential_disable(world.db.conn, world.admin, "acme", made["credential_id"])
    assert families(client.simulate_get("/metrics").text)["weave_credential_expiry_timestamp_seconds"].samples == []


def test_openmetrics_when_the_scraper_asks_for_it(client):
    result = client.simulate_get("/metrics", headers={"Accept": "application/openmetrics-text; version=1.0.0"})
    assert result.headers["content-type"].startswith("application/openmetrics-text")
    found = families(result.text, openmetrics=True)
    assert found["weave_decisions"].type == "counter" and found["weave_timer_lateness_seconds"].type == "histogram"
    plain = client.simulate_get("/metrics")
    assert plain.headers["content-type"].startswith("text/plain")


def engine_figures(text: str) -> str:
    """The engine's figures of a scrape, without the node's own request metrics."""
    return "\n".join(line for line in text.splitlines() if "weave_http_" not in line)


def test_every_worker_answers_the_same_values(db, world, client):
    """Two apps stand for two gunicorn workers: the engine's figures are not counted in a process, so they agree,
    and a request served by one of them changes no figure the other shows."""
    second = testing.TestClient(create_app(Connections(db.dsn)))
    client.simulate_get(f"{NS}/workflows", headers=auth(world.token))
    first_text = engine_figures(client.simulate_get("/metrics").text)
    assert first_text == engine_figures(second.simulate_get("/metrics").text) and "weave_decisions" in first_text


def test_metrics_count_the_node_s_requests_by_route_and_status(client, world):
    """An SRE's error rate and latency per route came only from the access log: /metrics now counts each answer by
    method, the route's template (never an id), and status, with its time."""
    def counts() -> dict:
        found = families(client.simulate_get("/metrics").text)
        requests = {(s.labels["method"], s.labels["route"], s.labels["status"]): s.value
                    for s in found["weave_http_requests"].samples if s.name == "weave_http_requests_total"}
        timed = {(s.labels["method"], s.labels["route"]): s.value
                 for s in found["weave_http_request_duration_seconds"].samples
                 if s.name == "weave_http_request_duration_seconds_count"}
        return {"requests": requests, "timed": timed}

    before = counts()
    client.simulate_post(f"{NS}/definitions", headers=auth(world.admin), json=FLOW)
    for n in range(3):
        client.simulate_get(f"{NS}/workflows/wf_{900 + n}", headers=auth(world.token))  # none of them exists
    client.simulate_get("/no/such/path")
    client.simulate_get("/console/no-such-page")
    after = counts()

    def grew(kind: str, key: tuple) -> float:
        return after[kind].get(key, 0) - before[kind].get(key, 0)

    one = "/v1/namespaces/{ns}/workflows/{workflow_id}"
    assert grew("requests", ("POST", "/v1/namespaces/{ns}/definitions", "201")) == 1
    assert grew("requests", ("GET", one, "404")) == 3 and grew("timed", ("GET", one)) == 3
    assert grew("requests", ("GET", "unmatched", "404")) == 1
    assert grew("requests", ("GET", "/console", "404")) == 1
    assert grew("requests", ("GET", "/metrics", "200")) == 1  # the first scrape, seen by the second
    assert not any("wf_9" in route or "acme" in route for _, route, _ in after["requests"])


def test_C3_review_figures_count_only_instances_a_person_can_review(client, world, orch):
    """A reason opened while the instance was CANCELLING (its task's outcome kept failing) stays open once the
    instance is CANCELLED: the review figures must not count it, or the review alert never clears."""
    from procedures import db as dbmod
    from procedures import pulse, routines
    from tests.sql.test_pulse import claim, task_flow

    world.publish(task_flow())
    wf = world.start("pay", {"order_id": "o1"})
    orch.drain()
    got, = claim(world)
    routines.instance_cancel(world.db.conn, world.token, world.namespace, wf, "customer withdrew", "c1")
    with world.held(attempt_id=got["attempt_id"]):  # the outcome is left for the orchestrator
        pulse.attempt_complete(world.db.conn, got["attempt_id"], "w1", {"paid": True})
    for _ in range(3):
        event = world.db.row("SELECT id, version FROM pulse_inbox WHERE state = 'PENDING'")
        dbmod.call(world.db.conn, "weave_candidate_fail", "INBOX", event["id"], event["version"], "INVALID_STATE: x")
    world.db.advance(60_000)
    orch.drain()
    inst = world.instance(wf)
    assert inst["status"] == "CANCELLED" and [r["code"] for r in inst["review_reasons"]] == ["CANDIDATE_FAILING"]
    found = families(client.simulate_get("/metrics").text)
    assert value(found["weave_instances"], "weave_instances", status="NEEDS_REVIEW") == 0
    assert value(found["weave_instances_in_review"], "weave_instances_in_review") == 0
    assert value(found["weave_review_reasons_open"], "weave_review_reasons_open") == 0


def test_R18_open_review_reasons_are_counted_by_code_as_well(client, world, orch):
    """A worker that keeps crashing (TASK_UNKNOWN) or failing (TASK_FAILED) is not a business value to look at: the
    totals alone do not tell them apart, so /metrics, `weave status` and the status figures give each code's count."""
    from procedures import pulse, routines
    from tests.sql.test_pulse import claim, task_flow

    world.publish(task_flow(task_timeout_ms=1_000, retry={"max_attempts": 1}))
    for order in ("o1", "o2", "o3"):
        world.start("pay", {"order_id": order})
    orch.drain()
    for got in claim(world, limit=2):
        pulse.attempt_fail(world.db.conn, got["attempt_id"], "w1", "declined")
    world.db.advance(2_000)
    orch.drain()  # the third task expires unclaimed
    found = families(client.simulate_get("/metrics").text)
    by_code = found["weave_review_reasons_open_by_code"]
    assert {s.labels["code"]: s.value for s in by_code.samples} == {"TASK_FAILED": 2, "TASK_EXPIRED": 1}
    assert value(found["weave_review_reasons_open"], "weave_review_reasons_open") == 3
    figures = routines.status(world.db.conn)
    assert figures["review_by_code"] == {"TASK_EXPIRED": {"open_review_reasons": 1, "instances_in_review": 1},
                                         "TASK_FAILED": {"open_review_reasons": 2, "instances_in_review": 2}}
    assert (figures["open_review_reasons"], figures["instances_in_review"]) == (3, 3)


def test_T8_a_bucket_bound_is_exact_to_the_microsecond(client, world, orch):
    """Latency is settled - due in microseconds: a timer 100.049 ms late is not in the 0.1 s bucket, in /metrics as in
    the last five minutes the dashboard shows, and the sum keeps every microsecond."""
    from procedures import routines

    client.simulate_post(f"{NS}/definitions", headers=auth(world.admin), json=FLOW)
    client.simulate_post(f"{NS}/workflows", headers=auth(world.token, "m1"),
                         json={"definition": "cool-off", "app": "billing", "deadline_ms": 3_600_000})
    orch.drain()
    world.db.advance(60_000)
    orch.drain()
    world.db.execute("UPDATE weave_waits SET settled_at = due_at + INTERVAL 100049 MICROSECOND "
                     "WHERE kind = 'TIMER' AND status = 'SATISFIED'")
    lateness = families(client.simulate_get("/metrics").text)["weave_timer_lateness_seconds"]
    assert value(lateness, "weave_timer_lateness_seconds_bucket", le="0.1") == 0
    assert value(lateness, "weave_timer_lateness_seconds_bucket", le="0.5") == 1
    assert value(lateness, "weave_timer_lateness_seconds_sum") == 0.100049
    recent = {float(r["le_seconds"]): r["timers"] for r in routines.status(world.db.conn)["lateness"]
              if r["le_seconds"] is not None}
    assert recent[0.1] == 0 and recent[0.5] == 1


def test_C1_weave_status_shows_the_live_instances_metrics_shows(client, world, orch, database, capsys):
    """`weave status --json` and /metrics give the same live instances by status, paused ones among them."""
    import json

    from orchestrator.cli import main
    from procedures import routines

    world.publish(FLOW)
    started = [world.start("cool-off") for _ in range(2)]
    orch.drain()
    routines.instance_pause(world.db.conn, world.token, world.namespace, started[0], "hold", "p1")
    found = families(client.simulate_get("/metrics").text)
    assert main(["status", "--dsn", database.url(), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)["instances"]
    for status in ("RUNNING", "NEEDS_REVIEW", "CANCELLING"):
        assert shown[status] == {"instances": value(found["weave_instances"], "weave_instances", status=status),
                                 "paused": value(found["weave_instances_paused"], "weave_instances_paused",
                                                 status=status)}
    assert shown["RUNNING"] == {"instances": 2, "paused": 1}


def test_R18_a_queue_nothing_claims_from_and_a_task_running_past_its_deadline_show_before_anything_expires(
        client, world, orch, database, capsys):
    """A queue no worker served kept its task QUEUED, counted with every other queue's, until the task expired
    (up to its task_timeout_ms, a day here) and only then reached review; a handler still running past its
    deadline showed only in its step's explain. /metrics and `weave status` now give how long the task each queue's
    next claim would take has been ready, and how many tasks run past their deadline."""
    import json

    from orchestrator.cli import main
    from procedures import pulse, routines

    routines.queue_put(world.db.conn, world.admin, world.namespace, "orphan", 10)
    task = {"type": "TASK", "handler": "example.echo", "handler_version": "1", "input": {},
            "task_timeout_ms": 86_400_000}
    world.publish({"name": "orphaned", "steps": [{"key": "work", "queue": "orphan", **task}]})
    world.publish({"name": "served", "steps": [{"key": "work", "queue": "payments", **task,
                                                "task_timeout_ms": 60_000}]})
    world.start("orphaned")
    world.start("served")
    orch.drain()
    pulse.task_claim(world.db.conn, "w1", "payments", limit=1, lease_ms=3_600_000)  # payments is served
    world.db.advance(90_000)  # the served task runs past its deadline; the orphan's waits 90 s
    found = families(client.simulate_get("/metrics").text)
    assert value(found["weave_tasks_overdue"], "weave_tasks_overdue") == 1
    waits = {s.labels["queue"]: s.value for s in found["weave_queue_wait_seconds"].samples}
    assert list(waits) == ["orphan"] and 90 <= waits["orphan"] < 100
    assert main(["status", "--dsn", database.url(), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["tasks_overdue"] == 1
    assert [(q["namespace"], q["queue"]) for q in shown["queues_waiting"]] == [("acme", "orphan")]
    assert main(["status", "--dsn", database.url()]) == 0
    assert "queues whose next task waits (ready, not yet claimed): orphan (acme) 9" in capsys.readouterr().out


@pytest.mark.filterwarnings("ignore:Unknown REQUEST_METHOD")  # the test client's WSGI checker notes each, as meant
def test_metrics_count_a_method_no_api_has_under_other_not_under_its_name(client):
    """Each made-up method (the server takes any word of capitals), no token needed, was a new series of every route
    it reached, kept until the API stopped: 5,000 of them made /metrics 90,081 series and 8.5 MB. They are all OTHER."""
    def methods() -> dict[str, float]:
        found = families(client.simulate_get("/metrics").text)
        counted: dict[str, float] = {}
        for s in found["weave_http_requests"].samples:
            if s.name == "weave_http_requests_total":
                counted[s.labels["method"]] = counted.get(s.labels["method"], 0) + s.value
        return counted

    before = methods()
    for n in range(5):
        client.simulate_request(f"MADEUP{chr(65 + n)}", "/healthz")
    after = methods()
    assert set(after) <= {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE", "CONNECT", "OTHER"}
    assert after.get("OTHER", 0) - before.get("OTHER", 0) == 5
