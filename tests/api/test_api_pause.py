"""R-12 at the HTTP edge, for a server that is busy rather than away: one statement answered later than the
API's timeout is that request's 503, and the API keeps serving; only when a probe of the server fails too does
every request answer 503 at once for the cool-down (tests/process/test_api_outage.py hangs and kills a real
server for that half)."""

from __future__ import annotations

from falcon import testing

from api.app import create_app
from api.http import ApiConnections
from procedures import errors
from procedures.db import Dsn
from tests.api.conftest import auth
from tests.api.test_http_basics import NS, problem, publish, start
from tests.support.waiting import wait_for


def _probed(connections: ApiConnections) -> bool:
    """The probe a failed request started (if any) has ended."""
    if not connections._probing.acquire(blocking=False):
        return False
    connections._probing.release()
    return True


def test_R12_one_late_answer_is_that_requests_503_and_the_api_keeps_serving(db, world, caplog):
    connections = ApiConnections(db.dsn, timeout=0.5, cooldown=60)
    client = testing.TestClient(create_app(connections))
    publish(client, world)
    wf = start(client, world).json["workflow_id"]
    holder = db.connect()
    holder.begin()
    try:
        with holder.cursor() as cur:  # the pause below waits on this lock past the API's timeout
            cur.execute("SELECT id FROM weave_instances WHERE id = %s FOR UPDATE", (int(wf.removeprefix("wf_")),))
        with caplog.at_level("WARNING", logger="weave.api"):
            late = client.simulate_post(f"{NS}/workflows/{wf}/pause", headers=auth(world.token, "p1"),
                                        json={"reason": "audit"})
        problem(late, 503, "UNAVAILABLE")
        # The log says the database is at work, not away, as the answer does (it said "unavailable").
        assert [r.getMessage() for r in caplog.records if r.name == "weave.api"] == [
            "answered 503: the database did not answer in time (busy, a row held, or away)"]
        assert wait_for(lambda: _probed(connections), timeout=10, interval=0.05)
        served = client.simulate_get(f"{NS}/workflows/{wf}", headers=auth(world.token))
        assert served.status_code == 200, served.text  # not 503 for the next 60 s
    finally:
        holder.rollback()
        holder.close()
        connections.discard()


def test_R12_a_server_that_fails_its_probe_too_pauses_every_request(world):
    connections = ApiConnections(Dsn(host="127.0.0.1", port=1, database="weave_nowhere"), timeout=0.5, cooldown=60)
    client = testing.TestClient(create_app(connections))
    problem(client.simulate_get(f"{NS}/workflows/wf_1", headers=auth(world.token)), 503, "UNAVAILABLE")
    assert wait_for(lambda: _probed(connections), timeout=10, interval=0.05)
    assert not connections.probe()
    try:
        connections.get()
        raise AssertionError("a request reached for a connection during the pause")
    except errors.TransientDatabaseError as exc:
        assert "a moment ago" in str(exc)
    problem(client.simulate_get(f"{NS}/workflows/wf_1", headers=auth(world.token)), 503, "UNAVAILABLE")


def test_R12_a_statement_a_request_gave_up_on_is_ended_by_the_thread_s_next_connection(db, world, monkeypatch):
    """A request whose answer did not come in time left its statement running in its session on the server, beside
    the connection that replaced it: under load the server's sessions grew past the API's threads until it refused
    every connection (1040), and every request answered 503. The next connection of that thread ends the session
    first. Here the statement waits for a table's metadata lock, a wait the server does not end when the client goes;
    its connection waits as long as the test's own (a statement slow for any reason), not the second the API sets."""
    monkeypatch.setattr("api.http._waits_bounded", lambda conn: conn)
    connections = ApiConnections(db.dsn, timeout=0.3, cooldown=60)
    client = testing.TestClient(create_app(connections))
    publish(client, world)
    wf = start(client, world).json["workflow_id"]
    holder = db.connect()
    try:
        with holder.cursor() as cur:
            cur.execute("LOCK TABLES weave_instances WRITE")
        problem(client.simulate_post(f"{NS}/workflows/{wf}/pause", headers=auth(world.token, "p1"),
                                     json={"reason": "audit"}), 503, "UNAVAILABLE")
        (left,) = db.rows("SELECT ID AS id FROM information_schema.PROCESSLIST WHERE ID <> CONNECTION_ID() "
                          "AND STATE = 'Waiting for table metadata lock' AND DB = DATABASE()")
        assert wait_for(lambda: _probed(connections), timeout=10, interval=0.05)
        listed = client.simulate_get(f"{NS}/definitions", headers=auth(world.token))  # no instance read
        assert listed.status_code == 200, listed.text
        assert db.scalar("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = %s AND COMMAND <> 'Killed'",
                         left["id"]) == 0
    finally:
        with holder.cursor() as cur:
            cur.execute("UNLOCK TABLES")
        holder.close()
        connections.discard()
    assert world.instance(wf)["control"] == "ACTIVE"  # the pause ended with its session, undone
