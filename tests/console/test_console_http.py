"""The console over plain HTTP (Falcon's test client, real database): sign-in, cookie flags, CSRF, CSP,
expiry, sign-out, and the namespace and scope checks it shares with the API."""

from __future__ import annotations

from procedures import routines
from tests.console.conftest import BASE, form_post, hidden, sign_in

TIMER = {"name": "cool-off", "steps": [{"key": "wait", "type": "TIMER", "delay_ms": 60_000}]}


def test_pages_need_a_session_and_the_sign_in_form_is_strict(client, world):
    got = client.simulate_get(BASE)
    assert got.status_code == 303 and got.headers["location"].endswith("/console/signin")
    form = client.simulate_get(f"{BASE}/signin")
    assert form.status_code == 200 and form.headers["content-type"].startswith("text/html")
    csp = form.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "script-src" not in csp and "frame-ancestors 'none'" in csp
    assert "<script" not in form.text and " style=" not in form.text
    assert form.headers["x-content-type-options"] == "nosniff"


def test_sign_in_sets_an_httponly_strict_cookie_holding_no_token(client, world):
    cookies = sign_in(client, world.token)
    sid = cookies["weave_console"]
    assert world.token not in sid and len(sid) == 43
    page = client.simulate_get(f"{BASE}/signin")
    nonce, pre = hidden(page.text, "nonce"), page.cookies["weave_console_signin"].value
    done = form_post(client, f"{BASE}/signin", {"nonce": nonce, "namespace": "acme", "token": world.token},
                     {"weave_console_signin": pre})
    cookie = done.cookies["weave_console"]
    assert cookie.http_only and cookie.same_site == "Strict" and cookie.path == "/console"
    assert not cookie.secure  # plain HTTP here; over HTTPS the cookie is Secure (below)
    assert world.token not in done.headers.get("location", "")
    dashboard = client.simulate_get(BASE, cookies=cookies)
    assert dashboard.status_code == 200 and world.token not in dashboard.text
    row = world.db.row("SELECT sealed_token, session_hash FROM weave_console_sessions LIMIT 1")
    assert world.token.encode() not in bytes(row["sealed_token"]) and sid not in row["session_hash"]


def test_over_https_the_session_cookie_is_secure(client, world):
    cookies = sign_in(client, world.token, protocol="https")
    page = client.simulate_get(f"{BASE}/signin", protocol="https")
    nonce, pre = hidden(page.text, "nonce"), page.cookies["weave_console_signin"].value
    assert page.cookies["weave_console_signin"].secure
    done = form_post(client, f"{BASE}/signin", {"nonce": nonce, "namespace": "acme", "token": world.token},
                     {"weave_console_signin": pre}, protocol="https")
    assert done.cookies["weave_console"].secure and cookies


def test_a_bad_token_or_a_forged_sign_in_is_refused(client, world):
    page = client.simulate_get(f"{BASE}/signin")
    nonce, pre = hidden(page.text, "nonce"), page.cookies["weave_console_signin"].value
    bad = form_post(client, f"{BASE}/signin", {"nonce": nonce, "namespace": "acme", "token": "wv_nope"},
                    {"weave_console_signin": pre})
    assert bad.status_code == 401 and "weave_console" not in bad.cookies
    forged = form_post(client, f"{BASE}/signin", {"nonce": "guess", "namespace": "acme", "token": world.token})
    assert forged.status_code == 403 and "CSRF_REFUSED" in forged.text and "weave_console" not in forged.cookies
    assert world.db.scalar("SELECT COUNT(*) FROM weave_console_sessions") == 0


def test_state_changing_posts_without_the_csrf_token_are_refused(client, world):
    world.publish(TIMER)
    wf = world.start("cool-off")
    cookies = sign_in(client, world.token)
    for csrf in ("", "0" * 64):
        refused = form_post(client, f"{BASE}/instances/{wf}/pause",
                            {"csrf": csrf, "idempotency_key": "k-1", "reason": "forged"}, cookies)
        assert refused.status_code == 403 and "CSRF_REFUSED" in refused.text
    assert world.instance(wf)["control"] == "ACTIVE"
    page = client.simulate_get(f"{BASE}/instances/{wf}", cookies=cookies)
    done = form_post(client, f"{BASE}/instances/{wf}/pause",
                     {"csrf": hidden(page.text, "csrf"), "idempotency_key": "k-1", "reason": "by hand"}, cookies)
    assert done.status_code == 303 and world.instance(wf)["control"] == "PAUSED"


def test_a_double_submit_acts_once(client, world):
    world.publish(TIMER)
    wf = world.start("cool-off")
    cookies = sign_in(client, world.token)
    page = client.simulate_get(f"{BASE}/instances/{wf}", cookies=cookies)
    fields = {"csrf": hidden(page.text, "csrf"), "idempotency_key": "console-pause-twice", "reason": "hold it"}
    first = form_post(client, f"{BASE}/instances/{wf}/pause", fields, cookies)
    second = form_post(client, f"{BASE}/instances/{wf}/pause", fields, cookies)
    assert first.status_code == second.status_code == 303
    assert "replayed=1" in second.headers["location"] and "replayed=1" not in first.headers["location"]
    assert [e["type"] for e in world.events(wf)].count("INSTANCE_PAUSED") == 1
    shown = client.simulate_get(second.headers["location"].split("#")[0].replace("http://falconframework.org", ""),
                                cookies=cookies)
    assert "already done with Idempotency-Key" in shown.text


def test_sign_out_ends_the_session_and_sessions_expire_on_the_engine_clock(client, world):
    cookies = sign_in(client, world.token)
    page = client.simulate_get(BASE, cookies=cookies)
    out = form_post(client, f"{BASE}/signout", {"csrf": hidden(page.text, "csrf")}, cookies)
    assert out.status_code == 303 and out.cookies["weave_console"].value == ""
    assert client.simulate_get(BASE, cookies=cookies).status_code == 303  # the old cookie points at nothing
    again = sign_in(client, world.token)
    assert client.simulate_get(BASE, cookies=again).status_code == 200
    world.db.advance(8 * 3600 * 1000 + 1)
    assert client.simulate_get(BASE, cookies=again).status_code == 303


def test_a_disabled_credential_ends_its_sessions(client, world):
    cred = world.credential(["workflows:read"], actor="temp")
    cookies = sign_in(client, cred["token"])
    assert client.simulate_get(BASE, cookies=cookies).status_code == 200
    routines.credential_disable(world.db.conn, world.admin, "acme", cred["credential_id"])
    assert client.simulate_get(BASE, cookies=cookies).status_code == 303


def test_another_namespaces_instance_is_a_404_page(client, world):
    from tests.support.world import World

    other = World.create(world.db, "other")
    other.publish(TIMER)
    theirs = other.start("cool-off")
    cookies = sign_in(client, world.token)
    got = client.simulate_get(f"{BASE}/instances/{theirs}", cookies=cookies)
    assert got.status_code == 404 and got.headers["content-type"].startswith("text/html")
    assert "NOT_FOUND" in got.text and "cool-off" not in got.text
    assert client.simulate_get(f"{BASE}/instances/wf_999999", cookies=cookies).status_code == 404


def test_a_read_only_credential_sees_no_actions_and_a_forged_post_is_refused(client, world):
    world.publish(TIMER)
    wf = world.start("cool-off")
    reader = world.credential(["workflows:read"], actor="auditor")
    cookies = sign_in(client, reader["token"])
    page = client.simulate_get(f"{BASE}/instances/{wf}", cookies=cookies)
    assert page.status_code == 200 and "idempotency_key" not in page.text and "/pause" not in page.text
    refused = form_post(client, f"{BASE}/instances/{wf}/pause",
                        {"csrf": hidden(page.text, "csrf"), "idempotency_key": "k-x", "reason": "sneaky"}, cookies)
    assert refused.status_code == 403 and "FORBIDDEN" in refused.text
    assert world.instance(wf)["control"] == "ACTIVE"


def test_a_credential_without_read_scope_cannot_sign_in(client, world):
    starter = world.credential(["workflows:start"], actor="starter")
    page = client.simulate_get(f"{BASE}/signin")
    nonce, pre = hidden(page.text, "nonce"), page.cookies["weave_console_signin"].value
    got = form_post(client, f"{BASE}/signin", {"nonce": nonce, "namespace": "acme", "token": starter["token"]},
                    {"weave_console_signin": pre})
    assert got.status_code == 403 and "weave_console" not in got.cookies


def test_the_dashboard_shows_the_figures_of_metrics(client, world):
    world.publish(TIMER)
    for _ in range(3):
        world.start("cool-off")
    cookies = sign_in(client, world.token)
    page = client.simulate_get(BASE, cookies=cookies).text
    metrics = client.simulate_get("/metrics").text
    assert 'weave_instances{status="RUNNING"} 3.0' in metrics
    assert 'data-figure="instances-RUNNING">3<' in page
    assert 'weave_due_backlog{class="CHECKPOINT"} 3.0' in metrics and 'data-figure="due-CHECKPOINT">3<' in page
    assert "<svg" in page and "Timer lateness" in page


def test_static_css_and_unknown_console_pages(client, world):
    css = client.simulate_get(f"{BASE}/static/console.css")
    assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")
    assert client.simulate_get(f"{BASE}/static/../app.py").status_code == 404
