"""The console over plain HTTP (Falcon's test client, real database): sign-in, cookie flags, CSRF, CSP,
expiry, sign-out, and the namespace and scope checks it shares with the API."""

from __future__ import annotations

import dataclasses
import datetime as dt
import itertools
import json
import re
from pathlib import Path

import pymysql
from falcon import testing

from api.app import create_app
from api.http import Connections
from procedures import routines
from tests.console.conftest import BASE, form_post, hidden, sign_in

TIMER = {"name": "cool-off", "steps": [{"key": "wait", "type": "TIMER", "delay_ms": 60_000}]}


def test_pages_need_a_session_and_the_sign_in_form_is_strict(client, world):
    got = client.simulate_get(BASE)
    assert got.status_code == 303 and "/console/signin?next=" in got.headers["location"]
    form = client.simulate_get(f"{BASE}/signin")
    assert form.status_code == 200 and form.headers["content-type"].startswith("text/html")
    csp = form.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "script-src" not in csp and "frame-ancestors 'none'" in csp
    page = " ".join((Path(__file__).parents[2] / "docs" / "console.md").read_text().split())
    assert f"`{csp}`" in page  # the policy the page quotes is the one sent
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


def test_a_session_lasts_as_long_as_the_setting_says(client, world, monkeypatch):
    monkeypatch.setenv("WEAVE_CONSOLE_SESSION_TTL_S", "600")
    page = client.simulate_get(f"{BASE}/signin")
    nonce, pre = hidden(page.text, "nonce"), page.cookies["weave_console_signin"].value
    done = form_post(client, f"{BASE}/signin", {"nonce": nonce, "namespace": "acme", "token": world.token},
                     {"weave_console_signin": pre})
    assert done.cookies["weave_console"].max_age == 600
    lasts = world.db.scalar("SELECT TIMESTAMPDIFF(SECOND, created_at, expires_at) FROM weave_console_sessions")
    assert lasts == 600


def test_S2_a_session_of_an_expiring_credential_ends_with_it_in_its_cookie_its_row_and_its_audit(client, world,
                                                                                                  monkeypatch):
    """A credential that expires before the configured lifetime ends its session then: the cookie's Max-Age, the
    session row and the sign-in's audit row say so, as every later read of the session does."""
    monkeypatch.setenv("WEAVE_CONSOLE_SESSION_TTL_S", "86400")
    made = routines.credential_create(world.db.conn, world.admin, "acme", "contractor", ["workflows:read"],
                                      expires_at=world.db.now() + dt.timedelta(seconds=900))
    page = client.simulate_get(f"{BASE}/signin")
    nonce, pre = hidden(page.text, "nonce"), page.cookies["weave_console_signin"].value
    done = form_post(client, f"{BASE}/signin", {"nonce": nonce, "namespace": "acme", "token": made["token"]},
                     {"weave_console_signin": pre})
    assert done.status_code == 303 and 890 <= done.cookies["weave_console"].max_age <= 900  # the clock runs on
    stored = world.db.scalar("SELECT expires_at FROM weave_console_sessions")
    assert routines.rfc3339(stored) == made["expires_at"]
    audit = routines.audit_list(world.db.conn, world.admin, "acme", action="console.sign_in", limit=1)["items"][0]
    assert audit["details"]["expires_at"] == made["expires_at"]

    world.db.advance(900_000)
    assert client.simulate_get(BASE, cookies={"weave_console": done.cookies["weave_console"].value}).status_code == 303


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
    assert forged.status_code == 403 and "weave_console" not in forged.cookies
    # Refused with a fresh form, as one left open past its one-off value's life is: the way on is to sign in again.
    assert "The sign-in form expired (or did not come from this console): nothing was sent" in forged.text
    assert hidden(forged.text, "nonce") != "guess" and forged.cookies["weave_console_signin"].value
    assert world.db.scalar("SELECT COUNT(*) FROM weave_console_sessions") == 0


def test_S2_a_token_or_namespace_longer_than_any_the_engine_holds_is_a_bad_sign_in(client, world):
    """As the API answers such a token 401: the database refused the value as it bound the call, and the console
    showed a 422 page naming the routine's parameter instead of the sign-in form saying the token is not valid."""
    for token, namespace in (("a" * 600, "acme"), (world.token, "n" * 300)):
        page = client.simulate_get(f"{BASE}/signin")
        nonce, pre = hidden(page.text, "nonce"), page.cookies["weave_console_signin"].value
        bad = form_post(client, f"{BASE}/signin", {"nonce": nonce, "namespace": namespace, "token": token},
                        {"weave_console_signin": pre})
        assert bad.status_code == 401 and "weave_console" not in bad.cookies, bad.text
        assert 'name="token"' in bad.text and "in_token" not in bad.text  # the form again, naming no parameter


def test_C1_an_action_whose_key_reason_or_number_is_wider_than_the_routine_takes_is_refused_by_its_rule(client,
                                                                                                     world):
    """A reason pasted past 1024 characters, a key past 128 or a number past 64 bits was refused by the database as it
    bound the call: a 422 page naming the routine's parameter (in_reason). The page now names the rule, as the API
    does, and nothing is done."""
    world.publish(TIMER)
    wf = world.start("cool-off")
    cookies = sign_in(client, world.token)
    for fields, code in (({"idempotency_key": "k" * 600, "reason": "by hand"}, "IDEMPOTENCY_KEY_INVALID"),
                         ({"idempotency_key": "k-2", "reason": "r" * 5_000}, "REASON_INVALID"),
                         ({"idempotency_key": "k-3", "reason": "later", "extend_ms": "9" * 30}, "VALIDATION_FAILED")):
        action = "deadline" if "extend_ms" in fields else "pause"
        page = client.simulate_get(f"{BASE}/instances/{wf}", cookies=cookies)
        refused = form_post(client, f"{BASE}/instances/{wf}/{action}", {"csrf": hidden(page.text, "csrf"), **fields},
                            cookies)
        assert refused.status_code == 422 and code in refused.text and "in_" not in refused.text, refused.text[-300:]
    assert world.instance(wf)["control"] == "ACTIVE"


def test_C1_a_step_action_for_an_activation_number_the_routine_cannot_hold_is_refused_by_its_rule(client, world):
    """The activation a step action is meant for is a hidden field the routines take as an INT UNSIGNED: a number
    past it (or below zero) was refused by the database as it bound the call, a page naming the routine's parameter
    (in_activation_sequence). The page names the field, as the API does, and nothing is done."""
    world.publish(TIMER)
    wf = world.start("cool-off")
    cookies = sign_in(client, world.token)
    for i, number in enumerate((str(2**32), "-1", str(2**31 + 1))):
        page = client.simulate_get(f"{BASE}/instances/{wf}", cookies=cookies)
        refused = form_post(client, f"{BASE}/instances/{wf}/steps/wait/reactivate",
                            {"csrf": hidden(page.text, "csrf"), "idempotency_key": f"k-{i}", "reason": "by hand",
                             "activation_sequence": number}, cookies)
        assert refused.status_code == 422 and "VALIDATION_FAILED" in refused.text, refused.text[-300:]
        assert "in_" not in refused.text, refused.text[-300:]
    assert world.step(wf, "wait")["status"] == "ACTIVE"


def test_state_changing_posts_without_the_csrf_token_are_refused(client, world):
    world.publish(TIMER)
    wf = world.start("cool-off")
    cookies = sign_in(client, world.token)
    for csrf in ("", "0" * 64):
        refused = form_post(client, f"{BASE}/instances/{wf}/pause",
                            {"csrf": csrf, "idempotency_key": "k-1", "reason": "forged"}, cookies)
        assert refused.status_code == 403 and "CSRF_REFUSED" in refused.text
    assert world.instance(wf)["control"] == "ACTIVE"
    # A form of a session that has ended since (signed in again in another tab): it says that nothing was done, and
    # why, not only that the form looks forged.
    stale = hidden(client.simulate_get(f"{BASE}/instances/{wf}", cookies=cookies).text, "csrf")
    cookies = sign_in(client, world.token)
    refused = form_post(client, f"{BASE}/instances/{wf}/pause",
                        {"csrf": stale, "idempotency_key": "k-1", "reason": "from the other tab"}, cookies)
    assert refused.status_code == 403 and "signed in again since" in refused.text
    assert "nothing was done" in refused.text and world.instance(wf)["control"] == "ACTIVE"
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
    crafted = client.simulate_get(f"{BASE}/instances/{wf}", params={"did": "wire money", "key": "k"}, cookies=cookies)
    assert crafted.status_code == 200 and 'id="result"' not in crafted.text


def test_C6_the_notice_after_an_action_is_what_its_audit_row_says_not_what_the_address_says(client, world):
    """The notice came from the address: a second tab's pause of an instance the first tab had paused changed
    nothing (its answer said so) but was shown as done, and an address naming any action and key (a link passed
    on, a bookmark) showed "cancel done" above an instance nobody had cancelled. The notice is now the action's
    audit row on that instance, with when and by whom."""
    world.publish(TIMER)
    wf = world.start("cool-off")
    cookies = sign_in(client, world.token)
    csrf = hidden(client.simulate_get(f"{BASE}/instances/{wf}", cookies=cookies).text, "csrf")
    for key, reason in (("console-pause-tab-b", "tab B"), ("console-pause-tab-a", "tab A")):
        sent = form_post(client, f"{BASE}/instances/{wf}/pause",
                         {"csrf": csrf, "idempotency_key": key, "reason": reason}, cookies)
        shown = client.simulate_get(f"{BASE}/instances/{wf}", cookies=cookies,
                                    params=dict(p.split("=") for p in sent.headers["location"].split("?")[1]
                                                .split("#")[0].split("&")))
        notice = " ".join(re.search(r'<p id="result".*?</p>', shown.text, re.S).group(0).split())
        if reason == "tab B":
            assert "pause done with Idempotency-Key <code>console-pause-tab-b</code>" in notice
        else:
            assert "pause changed nothing: the instance was already so when it came" in notice
        assert "<time>" in notice  # when it was done, from its audit row
    assert [e["type"] for e in world.events(wf)].count("INSTANCE_PAUSED") == 1
    for did, key in (("cancel", "console-cancel-0011223344556677"), ("resume", "console-pause-tab-b")):
        stale = client.simulate_get(f"{BASE}/instances/{wf}", params={"did": did, "key": key}, cookies=cookies)
        assert stale.status_code == 200 and 'id="result"' not in stale.text, did


def test_sign_out_ends_the_session_and_sessions_expire_on_the_engine_clock(client, world):
    cookies = sign_in(client, world.token)
    page = client.simulate_get(BASE, cookies=cookies)
    out = form_post(client, f"{BASE}/signout", {"csrf": hidden(page.text, "csrf")}, cookies)
    assert out.status_code == 303 and out.cookies["weave_console"].value == ""
    assert client.simulate_get(BASE, cookies=cookies).status_code == 303  # the old cookie points at nothing
    again = sign_in(client, world.token)
    page = client.simulate_get(BASE, cookies=again)
    assert page.status_code == 200
    assert re.search(r'data-figure="session-left">session ends in (8h 0m|7h 59m)<', page.text)
    # Near its end the page says so: a form typed past it is refused, nothing done, and has to be typed again.
    world.db.advance(8 * 3600 * 1000 - 10 * 60 * 1000)
    page = client.simulate_get(BASE, cookies=again).text
    assert re.search(r'class="warn" data-figure="session-left">session ends in (10m 0s|9m 59s): sign in again', page)
    world.db.advance(10 * 60 * 1000 + 1)
    assert client.simulate_get(BASE, cookies=again).status_code == 303


def test_a_session_cookie_that_is_not_ours_leads_to_sign_in_never_an_error(client, world):
    # A browser sends whatever cookie it holds under that name, including letters outside ASCII.
    for value in ("a" * 43, "é" * 43, "a" * 42 + "²", "a" * 42 + "/", "a" * 44, ""):
        got = client.simulate_get(BASE, cookies={"weave_console": value})
        assert got.status_code == 303 and "/console/signin?next=" in got.headers["location"], value
    form = client.simulate_get(f"{BASE}/signin", cookies={"weave_console": "é" * 43})
    assert form.status_code == 200 and 'name="nonce"' in form.text


def test_S2_a_disabled_credential_ends_its_sessions_for_good(client, world):
    cred = world.credential(["workflows:read"], actor="temp")
    cookies = sign_in(client, cred["token"])
    assert client.simulate_get(BASE, cookies=cookies).status_code == 200
    other = sign_in(client, world.token)
    routines.credential_disable(world.db.conn, world.admin, "acme", cred["credential_id"])
    assert client.simulate_get(BASE, cookies=cookies).status_code == 303
    # Ended, not suspended: enabling the credential again does not bring a session back (a browser left signed in,
    # or a cookie taken, while it was disabled). The sessions of other credentials go on.
    routines.credential_enable(world.db.conn, world.admin, "acme", cred["credential_id"])
    assert client.simulate_get(BASE, cookies=cookies).status_code == 303
    assert client.simulate_get(BASE, cookies=other).status_code == 200
    audit = world.db.row("SELECT details FROM weave_audit WHERE action = 'credential.disable' ORDER BY id DESC LIMIT 1")
    assert json.loads(audit["details"])["console_sessions_ended"] == 1


def test_a_form_sent_after_its_session_ended_says_nothing_was_done_and_sign_in_leads_back_to_it(client, world):
    """A form left open while its session ended (signed out in another tab, expired, its credential disabled) did
    nothing when sent: the sign-in form says so, and signing in leads back to the instance to send it again. A
    sign-in never goes on to an address outside the console."""
    world.publish(TIMER)
    wf = world.start("cool-off")
    cookies = sign_in(client, world.token)
    page = client.simulate_get(f"{BASE}/instances/{wf}", cookies=cookies).text
    form_post(client, f"{BASE}/signout", {"csrf": hidden(page, "csrf")}, cookies)  # another tab signs out
    sent = form_post(client, f"{BASE}/instances/{wf}/pause",
                     {"csrf": hidden(page, "csrf"), "idempotency_key": "pause-1", "reason": "hold"}, cookies)
    assert sent.status_code == 303
    assert sent.headers["location"] == f"{BASE}/signin?next=%2Fconsole%2Finstances%2F{wf}&ended=1"
    assert world.instance(wf)["control"] == "ACTIVE"  # nothing was done
    form = client.simulate_get(f"{BASE}/signin", params={"next": f"{BASE}/instances/{wf}", "ended": "1"})
    assert "nothing was done" in form.text and hidden(form.text, "next") == f"{BASE}/instances/{wf}"
    nonce = hidden(form.text, "nonce")
    back = form_post(client, f"{BASE}/signin", {"nonce": nonce, "namespace": "acme", "token": world.token,
                                                "next": f"{BASE}/instances/{wf}"},
                     {"weave_console_signin": form.cookies["weave_console_signin"].value})
    assert back.status_code == 303 and back.headers["location"] == f"{BASE}/instances/{wf}"
    for elsewhere in ("https://example.com/", "//example.com/console/x", f"{BASE}//example.com", "/metrics",
                      f"{BASE}/../../evil", f"{BASE}/%2e%2e/%2e%2e/other-app/logout", f"{BASE}/..%2f..%2fx",
                      f"{BASE}/./instances", f"{BASE}%2f..%2fx", f"{BASE}/instances/x\\..\\y"):
        form = client.simulate_get(f"{BASE}/signin", params={"next": elsewhere})
        assert hidden(form.text, "next") == BASE, elsewhere
    # Behind a prefix the page is found the same way, and so is the sign-out that comes after a session ended.
    prefixed = form_post(client, "/console/instances/wf_12/pause", {"csrf": "x"}, {}, root_path="/ops")
    assert prefixed.headers["location"] == "/ops/console/signin?next=%2Fops%2Fconsole%2Finstances%2Fwf_12&ended=1"
    out = form_post(client, f"{BASE}/signout", {"csrf": "x"}, {})
    assert out.headers["location"] == f"{BASE}/signin?next=%2Fconsole"  # nothing to send again


def test_a_refused_action_s_page_leads_back_to_the_instance(client, world):
    world.publish(TIMER)
    wf = world.start("cool-off")
    cookies = sign_in(client, world.token)
    page = client.simulate_get(f"{BASE}/instances/{wf}", cookies=cookies).text
    refused = form_post(client, f"{BASE}/instances/{wf}/deadline",  # neither a new deadline nor an extension
                        {"csrf": hidden(page, "csrf"), "idempotency_key": "deadline-1", "reason": "more time"},
                        cookies)
    assert refused.status_code == 422
    assert f'<a href="{BASE}/instances/{wf}">Back to the page</a>' in refused.text
    assert "give exactly one of new deadline and a positive Extend by" in refused.text  # the form's words


def charge_in_review(world, orch) -> str:
    """An instance whose one TASK step failed for good (TASK_FAILED, in review): its workflow id."""
    from procedures import pulse

    world.publish({"name": "charge", "steps": [{"key": "charge", "type": "TASK", "queue": "payments",
                                                "handler": "example.fail", "handler_version": "1",
                                                "retry": {"max_attempts": 1}}]})
    wf = world.start("charge")
    claimed = pulse.task_claim(world.db.conn, "w1", "payments", limit=1)[0]
    pulse.attempt_fail(world.db.conn, claimed["attempt_id"], "w1", "card declined")
    orch.drain()
    return wf


def test_an_instance_page_offers_what_applies_and_no_countdown_once_finished(client, world, orch):
    failed = charge_in_review(world, orch)
    cookies = sign_in(client, world.token)
    page = client.simulate_get(f"{BASE}/instances/{failed}", cookies=cookies).text
    assert "Reactivate charge" in page  # the step's recovery forms are there
    assert 'name="timeout_ms"' not in page  # a TASK step's reactivation takes no timeout (SIGNAL and POLL do)
    assert "No signal has targeted this step" not in page  # signals are a SIGNAL step's matter
    world.publish(TIMER)
    wf = world.start("cool-off")
    page = client.simulate_get(f"{BASE}/instances/{wf}", cookies=cookies).text
    assert re.search(r"<dt>Deadline</dt><dd><time>[^<]+</time> \(in ", page)
    world.db.advance(61_000)
    orch.drain()
    done = client.simulate_get(f"{BASE}/instances/{wf}", cookies=cookies).text
    assert world.instance(wf)["status"] == "SUCCEEDED"
    assert re.search(r"<dt>Deadline</dt><dd><time>[^<]+</time></dd>", done)  # nothing left to count down to


def test_C4_the_instance_s_own_failing_review_is_retried_from_its_page_and_only_there(client, world, orch):
    from tests.sql.test_instance_retry import early_signal_in_review

    failed = charge_in_review(world, orch)  # a step's reason: its step's actions, no retry
    cookies = sign_in(client, world.token)
    assert "Retry failing decisions" not in client.simulate_get(f"{BASE}/instances/{failed}", cookies=cookies).text
    wf = early_signal_in_review(world, orch)
    page = client.simulate_get(f"{BASE}/instances/{wf}", cookies=cookies).text
    assert "Retry failing decisions" in page and "then retry the instance" in page
    done = form_post(client, f"{BASE}/instances/{wf}/retry",
                     {"csrf": hidden(page, "csrf"), "idempotency_key": "t-1", "reason": "routines reinstalled"},
                     cookies)
    assert done.status_code == 303 and world.instance(wf)["status"] == "RUNNING"
    after = client.simulate_get(done.headers["location"], cookies=cookies).text
    assert "Retry failing decisions" not in after  # nothing of the instance's own is failing any more
    assert re.search(r"retry done with Idempotency-Key <code>t-1</code>", after)  # the notice, from the audit row


def test_C4_a_step_held_back_by_a_failing_decision_goes_on_from_the_instance_s_page(client, world, orch):
    """A signal for an open wait failed a third time: its step's reason is CANDIDATE_FAILING, and the page offers
    retry beside the step's own actions; the retry sends the step on, and its signal wins."""
    from tests.support.signals import failing_in_review

    wf, _ = failing_in_review(world, orch)
    cookies = sign_in(client, world.token)
    page = client.simulate_get(f"{BASE}/instances/{wf}", cookies=cookies).text
    assert "Retry failing decisions" in page and "Reactivate approval" in page
    done = form_post(client, f"{BASE}/instances/{wf}/retry",
                     {"csrf": hidden(page, "csrf"), "idempotency_key": "t-1", "reason": "routines reinstalled"},
                     cookies)
    assert done.status_code == 303 and world.step(wf, "approval")["status"] == "ACTIVE"
    orch.drain()
    assert world.instance(wf)["status"] == "SUCCEEDED"


def test_C4_R6_an_outcome_set_aside_for_its_ownership_is_retried_from_the_instance_s_page(client, world, orch):
    from tests.sql.test_instance_retry import round_outcome_set_aside

    wf, edit = round_outcome_set_aside(world, orch)
    cookies = sign_in(client, world.token)
    page = client.simulate_get(f"{BASE}/instances/{wf}", cookies=cookies).text
    assert "Retry failing decisions" in page and "repair the rows, then retry the instance" in page
    world.db.execute(edit["undo"])
    done = form_post(client, f"{BASE}/instances/{wf}/retry",
                     {"csrf": hidden(page, "csrf"), "idempotency_key": "t-1", "reason": "round repaired"}, cookies)
    assert done.status_code == 303 and world.instance(wf)["status"] == "RUNNING"
    orch.drain()
    assert world.instance(wf)["status"] == "SUCCEEDED"


def test_a_cancel_from_the_instance_page_needs_its_box_ticked(client, world):
    world.publish(TIMER)
    wf = world.start("cool-off")
    cookies = sign_in(client, world.token)
    page = client.simulate_get(f"{BASE}/instances/{wf}", cookies=cookies).text
    assert 'name="confirm" value="1" required' in page
    fields = {"csrf": hidden(page, "csrf"), "idempotency_key": "c-1", "reason": "customer withdrew"}
    unticked = form_post(client, f"{BASE}/instances/{wf}/cancel", fields, cookies)
    assert unticked.status_code == 422 and "CONFIRMATION_NEEDED" in unticked.text
    assert world.instance(wf)["status"] == "RUNNING"
    done = form_post(client, f"{BASE}/instances/{wf}/cancel", {**fields, "confirm": "1"}, cookies)
    assert done.status_code == 303 and world.instance(wf)["status"] == "CANCELLED"


def test_C2_S17_a_cancelling_instance_shows_the_task_it_waits_for(client, world, orch):
    from procedures import pulse

    world.publish({"name": "charge", "steps": [{"key": "charge", "type": "TASK", "queue": "payments",
                                                "handler": "example.echo", "handler_version": "1"}]})
    wf = world.start("charge")
    claimed = pulse.task_claim(world.db.conn, "w7", "payments", limit=1)[0]
    routines.instance_cancel(world.db.conn, world.token, "acme", wf, "customer withdrew", "c-1")
    assert world.instance(wf)["status"] == "CANCELLING"
    cookies = sign_in(client, world.token)
    page = client.simulate_get(f"{BASE}/instances/{wf}", cookies=cookies).text
    assert "The instance ends once every task still running has reported" in page
    assert f"Task {claimed['task_id']} RUNNING" in page and "held by w7" in page and "cancel requested" in page


def test_each_review_reason_says_what_usually_helps_as_the_operations_guide_does(client, world, orch):
    from procedures.reviews import REVIEW_HELP

    guide = (Path(__file__).parents[2] / "docs" / "operations.md").read_text()
    lines = guide.split("### What each reason means and what usually helps", 1)[1].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| reason |")) + 2  # past its head and rule
    rows = list(itertools.takewhile(lambda line: line.startswith("|"), lines[start:]))
    codes = {code for row in rows for code in re.findall(r"`([A-Z_]+)`", row.split("|")[1])}
    assert codes == set(REVIEW_HELP)  # the guide's table and the console's help name the same codes
    wf = charge_in_review(world, orch)
    page = client.simulate_get(f"{BASE}/instances/{wf}", cookies=sign_in(client, world.token)).text
    assert f"What usually helps: {REVIEW_HELP['TASK_FAILED']}" in page


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


def test_opening_an_actions_address_goes_to_the_instance_and_acts_on_nothing(client, world):
    world.publish(TIMER)
    wf = world.start("cool-off")
    cookies = sign_in(client, world.token)
    csrf = hidden(client.simulate_get(f"{BASE}/instances/{wf}", cookies=cookies).text, "csrf")
    routines.instance_cancel(world.db.conn, world.token, "acme", wf, "in another tab", "c-1")
    refused = form_post(client, f"{BASE}/instances/{wf}/resume",
                        {"csrf": csrf, "idempotency_key": "r-1", "reason": "too late"}, cookies)
    # the page of the refused action keeps the action's address in the bar
    assert refused.status_code == 409 and "INVALID_STATE" in refused.text
    for path in (f"{wf}/resume", f"{wf}/pause", f"{wf}/steps/wait/resolve", "wf_999999/cancel"):
        got = client.simulate_get(f"{BASE}/instances/{path}", cookies=cookies)  # that address opened again
        assert got.status_code == 303, got.text
        assert got.headers["location"].endswith(f"/console/instances/{path.split('/')[0]}")
    assert [e["type"] for e in world.events(wf)].count("INSTANCE_RESUMED") == 0


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
    world.db.advance(61_000)  # the three timers are due
    cookies = sign_in(client, world.token)
    page = client.simulate_get(BASE, cookies=cookies).text
    metrics = client.simulate_get("/metrics").text
    assert 'weave_instances{status="RUNNING"} 3.0' in metrics
    assert 'data-figure="instances-RUNNING">3<' in page
    assert 'weave_due_backlog{class="CHECKPOINT"} 3.0' in metrics and 'data-figure="due-CHECKPOINT">3<' in page
    assert 'weave_candidates_failing{class="CHECKPOINT",repeated="false"} 0.0' in metrics
    assert 'data-figure="failing-CHECKPOINT">0<' in page
    assert "<svg" in page and "Timer lateness" in page
    assert re.search(r"at engine time \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z,", page)  # as the CLI and API write it


def test_static_css_and_unknown_console_pages(client, world):
    css = client.simulate_get(f"{BASE}/static/console.css")
    assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")
    assert client.simulate_get(f"{BASE}/static/../app.py").status_code == 404


# --- filters and bulk actions ---------------------------------------------------------------------------------
def bulk_form(dry_page: str, action: str, reason: str, workflow_ids: list[str]) -> dict:
    """The fields of a bulk run as its dry run's page offers them: its form's token, run key and filter."""
    import re

    filters = dict(re.findall(r'<input type="hidden" name="(status|definition|control|business_key|review_code|'
                              r'in_review|deferred)" value="([^"]*)">', dry_page))
    return {"csrf": hidden(dry_page, "csrf"), "action": action, "bulk_key": hidden(dry_page, "bulk_key"),
            "reason": reason, "workflow_id": workflow_ids, **filters}


def _ids_on(html: str) -> list[str]:
    import re

    return re.findall(r'<td><a href="/console/instances/(wf_\d+)">', html)


def test_list_filters_by_business_key_control_review_code_and_deferral(client, world, orch):
    from tests.console.test_console_browser import in_review

    world.publish({"name": "two-waits", "steps": [{"key": "first", "type": "TIMER", "delay_ms": 60_000},
                                                  {"key": "second", "type": "TIMER", "delay_ms": 60_000,
                                                   "after": ["first"]}]})
    plain = world.start("two-waits", business_key="bk-1")
    other = world.start("two-waits", business_key="bk-2")
    orch.drain()
    routines.instance_pause(world.db.conn, world.token, "acme", other, "hold", "p-1")
    reviewed = in_review(world, orch, "bk-3")
    cookies = sign_in(client, world.token)

    def listed(**params) -> list[str]:
        page = client.simulate_get(f"{BASE}/instances", params=params, cookies=cookies)
        assert page.status_code == 200, page.text
        return _ids_on(page.text)

    assert listed() == [reviewed, other, plain]
    assert listed(business_key="bk-1") == [plain]
    # A customer's spelling of a key: nothing matches, and the page says that case counts.
    unmatched = client.simulate_get(f"{BASE}/instances", params={"business_key": "BK-1"}, cookies=cookies).text
    assert "No instance matches. A business key matches exactly, case included" in " ".join(unmatched.split())
    # A filter longer than any name or key: said in the filter's words, not the database's.
    for name, said in (("definition", "the definition name filter is 500 characters"),
                       ("business_key", "the business key filter is 500 characters")):
        too_long = client.simulate_get(f"{BASE}/instances", params={name: "x" * 500}, cookies=cookies)
        assert too_long.status_code == 422 and said in too_long.text and "Data too long" not in too_long.text
    assert listed(control="PAUSED") == [other]
    assert listed(in_review="1") == [reviewed] == listed(review_code="POLL_ROUNDS_EXHAUSTED")
    assert listed(review_code="poll_rounds_exhausted") == [reviewed]  # codes are upper case, however typed
    assert listed(review_code="POLL_DEADLINE") == []
    shown = client.simulate_get(f"{BASE}/instances", params={"in_review": "1", "status": "SUCCEEDED"},
                                cookies=cookies).text
    assert '<option value="NEEDS_REVIEW" selected>' in shown  # the status listed is the status shown
    dashboard = client.simulate_get(BASE, cookies=cookies).text
    assert 'data-figure="review-POLL_ROUNDS_EXHAUSTED">1<' in dashboard
    assert f'href="{BASE}/instances?review_code=POLL_ROUNDS_EXHAUSTED"' in dashboard
    world.db.advance(61_000)
    orch.drain()  # the paused instance's timer settles, and its next step is deferred while paused
    assert listed(deferred="1") == [other]
    page = client.simulate_get(f"{BASE}/instances/{other}", cookies=cookies).text
    assert "Deferred: PAUSED" in page and "instance paused" in page and "When the engine looks again" in page
    assert "deferred <strong>PAUSED</strong>: instance paused" in page  # the deferral and its words, apart
    assert "Held back: <strong>PAUSED</strong>" in page  # the explain answer of the step that waits
    assert 'id="a-resume-title"' in page and 'id="a-pause-title"' not in page  # paused: resume is what is left


def test_list_pages_with_a_cursor(client, world):
    import re

    world.publish(TIMER)
    started = [world.start("cool-off") for _ in range(30)]
    cookies = sign_in(client, world.token)
    first = client.simulate_get(f"{BASE}/instances", cookies=cookies).text
    cursor = re.search(r'href="/console/instances\?cursor=(\d+)" rel="next"', first).group(1)
    second = client.simulate_get(f"{BASE}/instances", params={"cursor": cursor}, cookies=cookies).text
    assert _ids_on(first) + _ids_on(second) == started[::-1]
    assert 'rel="next"' not in second


def test_a_cursor_no_page_answered_is_a_422_page(client, world):
    cookies = sign_in(client, world.token)
    for cursor in ("abc", "-1", "9" * 20, "²", "12³"):  # '²' passes str.isdigit() but is no number
        got = client.simulate_get(f"{BASE}/instances", params={"cursor": cursor}, cookies=cookies)
        assert got.status_code == 422 and "CURSOR_INVALID" in got.text, cursor
        assert got.headers["content-type"].startswith("text/html")


def test_bulk_dry_run_lists_exactly_the_filter_then_each_item_acts_once_with_its_own_key(client, world):
    world.publish(TIMER)
    world.publish({"name": "other-flow", "steps": [{"key": "wait", "type": "TIMER", "delay_ms": 60_000}]})
    mine = [world.start("cool-off") for _ in range(5)]
    theirs = world.start("other-flow")
    for n, wf in enumerate([*mine[:3], theirs]):
        routines.instance_pause(world.db.conn, world.token, "acme", wf, "hold", f"p-{n}")
    cookies = sign_in(client, world.token)
    dry = client.simulate_get(f"{BASE}/bulk", cookies=cookies, params={
        "definition": "cool-off", "control": "PAUSED", "action": "resume", "dry_run": "1"})
    assert dry.status_code == 200 and 'data-figure="bulk-count">3<' in dry.text
    assert sorted(_ids_on(dry.text)) == sorted(mine[:3])
    assert all(world.instance(wf)["control"] == "PAUSED" for wf in mine[:3])  # a dry run changes nothing
    run_key = hidden(dry.text, "bulk_key")
    fields = {"csrf": hidden(dry.text, "csrf"), "action": "resume", "bulk_key": run_key, "reason": "vendor is back",
              "workflow_id": mine[:3]}
    applied = form_post(client, f"{BASE}/bulk", fields, cookies)
    assert applied.status_code == 200 and 'data-figure="bulk-ok">3<' in applied.text
    assert all(f"{run_key}.{wf}" in applied.text for wf in mine[:3])
    assert [world.instance(wf)["control"] for wf in mine] == ["ACTIVE"] * 5
    assert world.instance(theirs)["control"] == "PAUSED"
    again = form_post(client, f"{BASE}/bulk", fields, cookies)  # a second submit replays every item
    assert again.text.count(">replayed<") == 3
    for wf in mine[:3]:
        assert [e["type"] for e in world.events(wf)].count("INSTANCE_RESUMED") == 1


def test_a_partial_bulk_failure_is_reported_per_item_and_a_refusal_for_its_state_is_not_offered_again(client, world):
    """The dry run says what the filter matched, by status; the results tell an instance already so (left as it was)
    from one acted on and one refused; a refusal for the instance's state would be refused again, so no retry of it
    is offered (a run that lost the database offers its untried items: the next test)."""
    world.publish(TIMER)
    wfs = [world.start("cool-off") for _ in range(4)]
    routines.instance_cancel(world.db.conn, world.token, "acme", wfs[1], "wrong order", "c-1")
    routines.instance_pause(world.db.conn, world.token, "acme", wfs[2], "already", "p-0")
    cookies = sign_in(client, world.token)
    dry = client.simulate_get(f"{BASE}/bulk", cookies=cookies,
                              params={"definition": "cool-off", "action": "pause", "dry_run": "1"})
    assert 'data-figure="bulk-count">4<' in dry.text
    assert 'data-figure="bulk-status-RUNNING">3<' in dry.text and 'data-figure="bulk-status-CANCELLED">1<' in dry.text
    fields = bulk_form(dry.text, "pause", "freeze", _ids_on(dry.text))
    applied = form_post(client, f"{BASE}/bulk", fields, cookies).text
    assert 'data-figure="bulk-ok">3<' in applied and 'data-figure="bulk-failed">1<' in applied
    assert 'data-figure="bulk-unchanged">1<' in applied
    assert re.search(rf'<tr data-result="{wfs[2]}">.*?<td class="ok">already so</td>', applied, re.S)
    assert f'<tr data-result="{wfs[1]}">' in applied and "INVALID_STATE" in applied
    assert 'name="workflow_id"' not in applied and "would be refused" in applied


def test_C4_a_bulk_retry_reopens_every_instance_whose_decisions_failed_and_sends_their_steps_on(client, world, orch):
    """The morning after a fault that failed many instances' decisions the same way: once it is fixed, one run
    retries every instance in review with CANDIDATE_FAILING, whether the reason is the instance's own or its step's
    (that step goes on in its activation)."""
    from procedures import db as dbmod
    from tests.support.signals import send, signal_flow

    world.publish(signal_flow(before_timer_ms=60_000))
    wfs = [world.start("approval-flow", {"order_id": f"o-{n}"}) for n in range(3)]
    orch.drain()
    for n, wf in enumerate(wfs[:2]):  # early signals failing: the instances' own reasons
        send(world, wf, f"s-{n}", correlation_key=f"o-{n}", queued=True)
    failing = [("SIGNAL", "SELECT id, version FROM weave_signals WHERE idempotency_key = %s", f"s-{n}") for n in (0, 1)]
    failing.append(("CHECKPOINT", "SELECT id, version FROM weave_pending_advances WHERE instance_id = %s",
                    world.internal_id(wfs[2])))  # its timer's checkpoint failing: the step's reason
    for cls, sql, arg in failing:
        for _ in range(3):
            c = world.db.row(sql, arg)
            dbmod.call(world.db.conn, "weave_candidate_fail", cls, c["id"], c["version"], "INVALID_STATE: x")
    cookies = sign_in(client, world.token)
    dry = client.simulate_get(f"{BASE}/bulk", cookies=cookies,
                              params={"review_code": "CANDIDATE_FAILING", "action": "retry", "dry_run": "1"})
    assert 'data-figure="bulk-count">3<' in dry.text and "goes on where it stopped" in dry.text
    ids = _ids_on(dry.text)
    applied = form_post(client, f"{BASE}/bulk", bulk_form(dry.text, "retry", "routines reinstalled", ids), cookies).text
    assert 'data-figure="bulk-ok">3<' in applied and 'data-figure="bulk-failed">0<' in applied
    assert [world.instance(wf)["status"] for wf in wfs] == ["RUNNING", "RUNNING", "RUNNING"]
    assert world.step(wfs[2], "cool_off")["status"] == "ACTIVE"
    assert world.db.scalar("SELECT COUNT(*) FROM weave_audit WHERE action = 'instance.retry'") == 3


def test_a_bulk_run_that_loses_the_database_leaves_the_rest_untried_and_retryable(world, database, monkeypatch):
    """The database stops answering after the first item (the proxy in front of it dies: every connect is refused).
    The run tries no further item, each of which would otherwise wait out a connect of its own (with a hung server
    5 s each, past the worker's timeout); the items left show as not tried, in the retry form."""
    from falcon import testing

    from api.app import create_app
    from api.console import pages
    from api.http import Connections
    from tests.support.proxy import Proxy

    world.publish(TIMER)
    wfs = [world.start("cool-off") for _ in range(4)]
    proxy = Proxy(database.host, database.port)
    connections = Connections(database.single("127.0.0.1", proxy.port))
    client = testing.TestClient(create_app(connections))
    tried = []

    def pause_then_die(*args):
        tried.append(args[3])
        done = routines.instance_pause(*args)
        proxy.kill()
        return done

    try:
        cookies = sign_in(client, world.token)
        dry = client.simulate_get(f"{BASE}/bulk", cookies=cookies,
                                  params={"definition": "cool-off", "action": "pause", "dry_run": "1"})
        ids = _ids_on(dry.text)
        fields = bulk_form(dry.text, "pause", "freeze", ids)
        monkeypatch.setitem(pages.INSTANCE_ACTIONS, "pause", pause_then_die)
        applied = form_post(client, f"{BASE}/bulk", fields, cookies).text
    finally:
        proxy.kill()
        connections.discard()
    assert tried == ids[:1] and sorted(ids) == sorted(wfs)
    assert 'data-figure="bulk-ok">1<' in applied and 'data-figure="bulk-failed">3<' in applied
    assert applied.count("not tried: the database stopped answering") == 2  # the second item's own error, then two
    assert all(f'name="workflow_id" value="{wf}"' in applied for wf in ids[1:])
    assert [world.instance(wf)["control"] for wf in ids] == ["PAUSED", "ACTIVE", "ACTIVE", "ACTIVE"]


def test_a_read_only_credential_gets_a_dry_run_but_no_apply_and_a_forged_apply_is_refused(client, world):
    world.publish(TIMER)
    wf = world.start("cool-off")
    reader = world.credential(["workflows:read"], actor="auditor")
    cookies = sign_in(client, reader["token"])
    dry = client.simulate_get(f"{BASE}/bulk", cookies=cookies, params={"action": "cancel", "dry_run": "1"})
    assert 'data-figure="bulk-count">1<' in dry.text and "bulk_key" not in dry.text
    forged = form_post(client, f"{BASE}/bulk", {"csrf": hidden(dry.text, "csrf"), "action": "cancel", "confirm": "1",
                                                 "bulk_key": "k", "reason": "x", "workflow_id": [wf]}, cookies)
    assert "FORBIDDEN" in forged.text and world.instance(wf)["status"] == "RUNNING"


def test_unknown_console_pages_are_html_404s_and_the_api_keeps_its_problems(client, world):
    cookies = sign_in(client, world.token)
    missing = client.simulate_get(f"{BASE}/nope/deeper", cookies=cookies)
    assert missing.status_code == 404 and missing.headers["content-type"].startswith("text/html")
    assert "content-security-policy" in missing.headers
    api = client.simulate_get("/consolex")
    assert api.status_code == 404 and api.headers["content-type"].startswith("application/problem+json")


def test_a_new_sign_in_replaces_the_browsers_session(client, world):
    first = sign_in(client, world.token)
    page = client.simulate_get(f"{BASE}/signin")  # another tab, opened before the first sign-in
    both = {**first, "weave_console_signin": page.cookies["weave_console_signin"].value}
    done = form_post(client, f"{BASE}/signin", {"nonce": hidden(page.text, "nonce"), "namespace": "acme",
                                                "token": world.token}, both)
    second = {"weave_console": done.cookies["weave_console"].value}
    assert second != first and world.db.scalar("SELECT COUNT(*) FROM weave_console_sessions") == 1
    assert client.simulate_get(BASE, cookies=first).status_code == 303


def test_the_deadline_moves_by_an_extension_or_to_a_time_and_a_bad_time_is_a_422_page(client, world):
    world.publish(TIMER)
    wf = world.start("cool-off", deadline_ms=3_600_000)
    cookies = sign_in(client, world.token)
    csrf = hidden(client.simulate_get(f"{BASE}/instances/{wf}", cookies=cookies).text, "csrf")
    before = world.instance(wf)["deadline_at"]
    moved = form_post(client, f"{BASE}/instances/{wf}/deadline",
                      {"csrf": csrf, "idempotency_key": "d-1", "reason": "customer asked", "extend_ms": "60000"},
                      cookies)
    assert moved.status_code == 303 and world.instance(wf)["deadline_at"] > before
    bad = form_post(client, f"{BASE}/instances/{wf}/deadline",
                    {"csrf": csrf, "idempotency_key": "d-2", "reason": "typo", "deadline_at": "next tuesday"}, cookies)
    assert bad.status_code == 422 and "DEADLINE_INVALID" in bad.text
    zoneless = form_post(client, f"{BASE}/instances/{wf}/deadline", {"csrf": csrf, "idempotency_key": "d-4",
                         "reason": "typo", "deadline_at": "2099-12-31T00:00:00"}, cookies)
    assert zoneless.status_code == 422 and "RFC 3339 time with a zone" in zoneless.text  # why, not only that it is
    to = form_post(client, f"{BASE}/instances/{wf}/deadline", {"csrf": csrf, "idempotency_key": "d-3",
                   "reason": "year end", "deadline_at": "2099-12-31T00:00:00Z"}, cookies)
    assert to.status_code == 303 and world.instance(wf)["deadline_at"].startswith("2099-12-31T00:00:00")


def test_a_long_history_pages_through_its_events(client, world, orch, monkeypatch):
    import re

    from api.console import pages

    monkeypatch.setattr(pages.Instance, "EVENTS", 2)
    world.publish(TIMER)
    wf = world.start("cool-off")
    orch.drain()
    world.db.advance(60_001)
    orch.drain()
    types = [e["type"] for e in world.events(wf)]
    assert len(types) == 4
    cookies = sign_in(client, world.token)
    seen, params = [], {}
    while True:
        html = client.simulate_get(f"{BASE}/instances/{wf}", params=params, cookies=cookies).text
        seen += re.findall(r"</time> <strong>([A-Z_]+)</strong>", html)
        later = re.search(r'href="\?events_after=(\d+)#history" rel="next"', html)
        if not later:
            break
        params = {"events_after": later.group(1)}
    assert seen == types


def test_C6_an_action_whose_answer_was_lost_is_offered_again_with_its_own_key_and_acts_once(client, world,
                                                                                            monkeypatch):
    """An extension whose answer did not come (the database answered too late) had been done; the 503 page said to
    retry with the same Idempotency-Key but offered no way to, and Back showed the form with a new key: sent again,
    the deadline moved twice. The page now offers the form again as it was sent, with its key, which replays."""
    world.publish(TIMER)
    wf = world.start("cool-off")
    before = world.instance(wf)["deadline_at"]
    cookies = sign_in(client, world.token)
    html = client.simulate_get(f"{BASE}/instances/{wf}", cookies=cookies).text
    form_html = re.search(r'<form method="post" action="[^"]*/deadline".*?</form>', html, re.S).group(0)
    key = hidden(form_html, "idempotency_key")
    fields = {"csrf": hidden(form_html, "csrf"), "idempotency_key": key, "reason": "customer asked for a day",
              "extend_ms": "86400000", "deadline_at": "", "go": "deadline"}
    real = routines.instance_deadline

    def answer_lost(*args, **kwargs):  # the routine runs and commits; its answer does not reach the console
        real(*args, **kwargs)
        raise pymysql.err.OperationalError(2013, "Lost connection to server during query (timed out)")

    monkeypatch.setattr(routines, "instance_deadline", answer_lost)
    lost = form_post(client, f"{BASE}/instances/{wf}/deadline", fields, cookies)
    assert lost.status_code == 503 and "Send it again" in lost.text and f"<code>{key}</code>" in lost.text
    assert "Back to the page" not in lost.text
    resend = re.search(r'<form method="post" action="([^"]*)"[^>]*aria-labelledby="resend-title">(.*?)</form>',
                       lost.text, re.S)
    assert resend.group(1) == f"{BASE}/instances/{wf}/deadline"
    again = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', resend.group(2)))
    assert again == fields
    monkeypatch.setattr(routines, "instance_deadline", real)
    replayed = form_post(client, resend.group(1), again, cookies)
    assert replayed.status_code == 303 and "replayed=1" in replayed.headers["location"]
    extended = world.instance(wf)["deadline_at"]
    assert dt.datetime.fromisoformat(extended[:-1]) - dt.datetime.fromisoformat(before[:-1]) == dt.timedelta(days=1)


def test_database_down_is_a_503_page_with_retry_after(world):
    from falcon import testing

    from api.app import create_app
    from procedures.db import Dsn
    from tests.console.conftest import Connections

    dead = testing.TestClient(create_app(Connections(Dsn(host="127.0.0.1", port=1, database="x"))))
    page = dead.simulate_get(f"{BASE}/signin")
    assert page.status_code == 200  # signing in needs no database until the form is posted
    got = dead.simulate_get(BASE, cookies={"weave_console": "a" * 43})
    assert got.status_code == 503 and got.headers["retry-after"] == "1"
    assert got.headers["content-type"].startswith("text/html") and "UNAVAILABLE" in got.text
    assert "Traceback" not in got.text


def test_the_instance_page_explains_a_waiting_signal_step_and_each_signal_that_lost(client, world, orch):
    from tests.support import signals as sig

    world.publish(sig.signal_flow())
    wf = world.start("approval-flow", {"order_id": "o-1"})
    orch.drain()
    sig.send(world, wf, correlation_key="o-1 ", payload='{"note": "<b>bold</b>"}', reason="typo <i>here</i>")
    orch.drain()
    cookies = sign_in(client, world.token)
    html = client.simulate_get(f"{BASE}/instances/{wf}", cookies=cookies).text
    assert "Explain: why this step is still waiting" in html
    assert "CORRELATION_MISMATCH" in html and "first_difference_offset" in html  # explain, and why it lost
    assert "&lt;b&gt;bold&lt;/b&gt;" in html and "typo &lt;i&gt;here&lt;/i&gt;" in html
    assert "<b>bold</b>" not in html and "<i>here</i>" not in html
    assert "(in 59m" in html  # the wait's deadline with the time left on the engine clock


def test_S17_R11_a_step_waiting_for_its_after_steps_names_them_instead_of_being_explained(client, world, orch):
    """Every unsettled step was explained, a call each: a chain of 256 steps made 255 calls a page view, each saying
    only that the step had not started. A TIMER or TASK step whose after-steps have not all succeeded now names
    them; a SIGNAL step is still explained, as early signals may have targeted it."""
    from tests.support import signals as sig

    world.publish({"name": "chain", "steps": [
        {"key": "a", "type": "TIMER", "delay_ms": 60_000},
        {"key": "b", "type": "TIMER", "delay_ms": 60_000, "after": ["a"]},
        {"key": "c", "type": "TIMER", "delay_ms": 60_000, "after": ["b"]},
        {**sig.signal_flow()["steps"][0], "after": ["a"]}]})
    wf = world.start("chain", {"order_id": "o-1"})
    orch.drain()
    cookies = sign_in(client, world.token)
    html = client.simulate_get(f"{BASE}/instances/{wf}", cookies=cookies).text
    assert 'Waits for <a href="#step-a">a</a> (ACTIVE) to succeed.' in html
    assert 'Waits for <a href="#step-b">b</a> (PENDING) to succeed.' in html
    assert html.count('<details class="explain"') == 2  # the ACTIVE timer a and the SIGNAL step approval
    b = html[html.index('id="step-b"'):html.index('id="step-c"')]
    assert "Explain:" not in b


def test_every_kind_of_step_renders_at_every_stage_of_a_flow(client, world, orch):
    """The example order flow (TIMER, POLL with a final signal, SIGNAL) and a TASK, page by page as it runs."""
    import json
    from pathlib import Path

    from tests.sql.test_polls import answer
    from tests.support import signals as sig

    doc = json.loads((Path(__file__).resolve().parents[2] / "docs/examples/order-flow.json").read_text())
    for step in doc["steps"]:
        if step.get("queue"):
            step["queue"] = "payments"
    doc["steps"].append({"key": "ship", "type": "TASK", "queue": "payments", "handler": "example.echo",
                         "handler_version": "1", "after": ["approval"], "input": {"order": "$.input.order_id"}})
    world.publish(doc)
    wf = world.start("order-flow", {"order_id": "o-1"}, business_key="o-1")
    cookies = sign_in(client, world.token)

    def shown() -> str:
        got = client.simulate_get(f"{BASE}/instances/{wf}", cookies=cookies)
        assert got.status_code == 200, got.text
        return got.text

    html = shown()  # the start has activated the first step
    assert "TIMER wait <strong>WAITING</strong>" in html and "Timer: due" in html and "after 5000 ms" in html
    world.db.advance(5_001)
    orch.drain()
    html = shown()
    assert "POLL_FINAL wait" in html and "Poll IN_FLIGHT" in html
    answer(world, "PENDING")
    orch.drain()
    assert "POLL_PENDING" in shown()
    world.db.advance(2_001)
    orch.drain()
    answer(world, {"status": "PAID", "output": {"paid": True}})
    orch.drain()
    html = shown()
    assert "SIGNAL wait <strong>WAITING</strong>" in html and "1. cool_off" in html and "4. ship" in html
    sig.send(world, wf, payload='{"approved": true}')
    orch.drain()
    html = shown()
    assert "won by" in html and "approval.decided v1" in html
    answer(world, {"shipped": True})
    orch.drain()
    html = shown()
    assert 'class="status s-SUCCEEDED">SUCCEEDED</span></h1>' in html and "INSTANCE_SUCCEEDED" in html
    assert 'name="idempotency_key"' not in html  # a finished instance offers no action


def test_bulk_cancel_of_everything_in_review_with_a_given_reason_code(client, world, orch):
    from tests.console.test_console_browser import in_review

    stuck = [in_review(world, orch, f"o-{n}") for n in range(2)]
    world.publish(TIMER)
    running = world.start("cool-off")
    cookies = sign_in(client, world.token)
    dry = client.simulate_get(f"{BASE}/bulk", cookies=cookies, params={
        "in_review": "1", "review_code": "POLL_ROUNDS_EXHAUSTED", "action": "cancel", "dry_run": "1"})
    assert 'data-figure="bulk-count">2<' in dry.text and sorted(_ids_on(dry.text)) == sorted(stuck)
    fields = bulk_form(dry.text, "cancel", "vendor retired this API", stuck)
    assert 'name="confirm"' in dry.text  # a cancel asks the operator to tick that they mean it
    unticked = form_post(client, f"{BASE}/bulk", fields, cookies)
    assert unticked.status_code == 422 and "CONFIRMATION_NEEDED" in unticked.text
    assert "nothing was done" in unticked.text
    assert [world.instance(wf)["status"] for wf in stuck] == ["NEEDS_REVIEW", "NEEDS_REVIEW"]
    applied = form_post(client, f"{BASE}/bulk", {**fields, "confirm": "1"}, cookies)
    assert 'data-figure="bulk-ok">2<' in applied.text
    assert [world.instance(wf)["status"] for wf in stuck] == ["CANCELLED", "CANCELLED"]
    assert world.instance(running)["status"] == "RUNNING"


def test_C2_bulk_cancel_leaves_an_instance_a_colleague_moved_on_since_the_dry_run(client, world, orch):
    """The apply acted on the dry run's list as it stood: an instance a colleague continued in another tab between
    the dry run and the apply (RUNNING again, no longer in review) was cancelled all the same, for good, and the
    results said "done". Each instance is now matched against the dry run's filter as it is when the run reaches it,
    and one that no longer matches is left as it is and says why; a second submit still replays what the run did."""
    from tests.console.test_console_browser import in_review

    stuck = [in_review(world, orch, f"o-{n}") for n in range(3)]
    cookies = sign_in(client, world.token)
    dry = client.simulate_get(f"{BASE}/bulk", cookies=cookies, params={
        "in_review": "1", "review_code": "POLL_ROUNDS_EXHAUSTED", "action": "cancel", "dry_run": "1"})
    assert sorted(_ids_on(dry.text)) == sorted(stuck)
    fields = {**bulk_form(dry.text, "cancel", "vendor retired this API", stuck), "confirm": "1"}
    assert fields["review_code"] == "POLL_ROUNDS_EXHAUSTED" and fields["in_review"] == "1"
    routines.step_continue(world.db.conn, world.token, "acme", stuck[0], "check", "vendor fixed", "c-0",
                           extra_rounds=5)
    assert world.instance(stuck[0])["status"] == "RUNNING"
    for submit in ("first", "again"):
        applied = form_post(client, f"{BASE}/bulk", fields, cookies).text
        assert re.search(rf'<tr data-result="{stuck[0]}">.*?NO_LONGER_MATCHES</td>\s*<td>left as it is: its status '
                         r"is now RUNNING, not NEEDS_REVIEW</td>", applied, re.S), submit
        assert applied.count(">replayed<" if submit == "again" else ">done<") == 2, submit
        assert 'data-figure="bulk-ok">2<' in applied and 'data-figure="bulk-failed">1<' in applied
    assert [world.instance(wf)["status"] for wf in stuck] == ["RUNNING", "CANCELLED", "CANCELLED"]


def test_C4_bulk_reactivate_starts_each_instance_s_step_in_review_again_and_leaves_one_with_two_to_its_page(
        client, world, orch):
    """After an outage is fixed, every instance it sent to review is started again: the console's bulk offered
    pause, resume and cancel only, and the usual remedy (reactivate) had to be done page by page. Each instance's
    one step in review starts again as activation 2; one with two steps in review is left for its page."""
    from tests.console.test_console_browser import in_review
    from tests.sql.test_polls import answer, poll_step

    stuck = [in_review(world, orch, f"o-{n}") for n in range(2)]
    world.publish({"name": "two-polls", "steps": [
        {**poll_step(max_rounds=1), "key": key} for key in ("a", "b")]})
    both = world.start("two-polls", {"order_id": "o-9"})
    orch.drain()
    for _ in range(2):
        answer(world, "PENDING")
    orch.drain()
    assert len(world.instance(both)["review_reasons"]) == 2
    cookies = sign_in(client, world.token)
    dry = client.simulate_get(f"{BASE}/bulk", cookies=cookies, params={
        "review_code": "POLL_ROUNDS_EXHAUSTED", "action": "reactivate", "dry_run": "1"})
    assert 'data-figure="bulk-count">3<' in dry.text and "new activation" in dry.text
    fields = bulk_form(dry.text, "reactivate", "the PSP is back", _ids_on(dry.text))
    applied = form_post(client, f"{BASE}/bulk", fields, cookies).text
    assert 'data-figure="bulk-ok">2<' in applied and 'data-figure="bulk-failed">1<' in applied
    assert "2 steps are in review: reactivate on the instance&#39;s page" in applied
    for wf in stuck:
        step = world.step(wf, "check")
        assert world.instance(wf)["status"] == "RUNNING" and step["activation_sequence"] == 2
    assert world.instance(both)["status"] == "NEEDS_REVIEW"
    again = form_post(client, f"{BASE}/bulk", fields, cookies).text  # the same run again only replays
    assert again.count(">replayed<") == 2


def test_a_bulk_run_past_its_limit_takes_the_first_listed_and_the_next_dry_run_lists_the_rest(
        client, world, monkeypatch):
    """More matches than one run takes were refused with "narrow the filter", though no filter could split
    instances alike: the run takes the first it lists, and a dry run after it lists the rest."""
    from api.console import pages

    monkeypatch.setattr(pages.Bulk, "LIMIT", 2)
    world.publish(TIMER)
    wfs = [world.start("cool-off") for _ in range(3)]
    cookies = sign_in(client, world.token)
    params = {"definition": "cool-off", "control": "ACTIVE", "action": "pause", "dry_run": "1"}
    dry = client.simulate_get(f"{BASE}/bulk", cookies=cookies, params=params)
    assert 'data-figure="bulk-count">2<' in dry.text and 'data-figure="bulk-more"' in dry.text
    first = _ids_on(dry.text)
    fields = bulk_form(dry.text, "pause", "freeze", first)
    assert 'data-figure="bulk-ok">2<' in form_post(client, f"{BASE}/bulk", fields, cookies).text
    rest = client.simulate_get(f"{BASE}/bulk", cookies=cookies, params=params)
    assert 'data-figure="bulk-count">1<' in rest.text and 'data-figure="bulk-more"' not in rest.text
    assert sorted(first + _ids_on(rest.text)) == sorted(wfs)


def test_C3_past_its_limit_the_review_queue_keeps_the_longest_waiting_and_says_how_many_it_left_out(
        client, world, orch, monkeypatch):
    import re

    from api.console import pages
    from tests.console.test_console_browser import in_review
    from tests.sql.test_polls import answer

    monkeypatch.setattr(pages.Review, "LIMIT", 2)
    wfs = []
    for n in range(3):
        wfs.append(in_review(world, orch, f"o-{n}"))
        world.db.advance(1_000)  # each one enters review a second after the one before
    cookies = sign_in(client, world.token)

    def queue() -> tuple[list[str], str]:
        html = client.simulate_get(f"{BASE}/review", cookies=cookies).text
        return re.findall(r'<h2><a href="/console/instances/(wf_\d+)">', html), html

    shown, html = queue()
    assert shown == wfs[:2]  # the longest waiting first; the newest is the one left out
    assert 'data-figure="review-total">3<' in html
    monkeypatch.setattr(pages.Review, "LIMIT", 3)
    shown, html = queue()
    assert shown == wfs and "review-total" not in html
    # The first started is started again, and is back in review after the others: it waits the least now. The page
    # kept the first created, so with more in review than it shows it hid the ones waiting longest.
    routines.step_reactivate(world.db.conn, world.token, "acme", wfs[0], "check", "try once more", "r-0")
    orch.drain()
    answer(world, "PENDING")
    orch.drain()
    assert world.instance(wfs[0])["status"] == "NEEDS_REVIEW"
    monkeypatch.setattr(pages.Review, "LIMIT", 2)
    shown, html = queue()
    assert shown == wfs[1:] and 'data-figure="review-total">3<' in html


def test_an_instance_page_shows_its_signals_a_page_at_a_time_and_of_a_long_payload_its_beginning(client, world,
                                                                                                  monkeypatch):
    """A sender may store 1024 signals of 256 KiB each on one instance. The page read every one of them, parsed, and
    showed each payload whole and indented (four times its size for a list of short arrays): 40 payloads of 126 KB
    made an 18 MB page, and a full instance a gigabyte, the worker's memory and more than its timeout, for every
    operator who opened it. It shows a page of signals at a time, and of a payload its first characters."""
    import json
    import re

    from api.console import pages
    from procedures import signals

    world.publish({"name": "flow", "steps": [
        {"key": "approval", "type": "SIGNAL", "signal": {"name": "ok", "payload_version": "1", "payload_type": "any"},
         "correlation": "$.input.id", "timeout_ms": 3_600_000}]})
    wf = world.start("flow", {"id": "x"})
    big = json.dumps([[1, 2, 3, 4, 5, 6, 7, 8]] * 7000, separators=(",", ":")).encode()  # 126 KB
    sent = []
    for n in range(pages.Instance.SIGNALS + 1):
        sent.append(signals.send(world.db.conn, world.token, "acme", wf, idempotency_key=f"s-{n}", name="ok",
                                 payload_version="1", target_step_key="approval", target_activation_sequence=1,
                                 correlation_key=b"zz", payload=big if n < 3 else b'{"n": %d}' % n,
                                 reason="r")["signal_id"])
    cookies = sign_in(client, world.token)
    first = client.simulate_get(f"{BASE}/instances/{wf}", cookies=cookies)
    assert first.status_code == 200 and len(first.text) < 500_000, len(first.text)
    shown = re.findall(r'<tr id="(sig_\d+)">', first.text)
    assert shown == sent[:pages.Instance.SIGNALS]
    assert "[\n  [\n    1,\n    2," in first.text and "more characters of this value are not shown" in first.text
    later = re.search(r'href="\?signals_after=(sig_\d+)#signals" rel="next"', first.text)
    assert later, "no link to the later signals"
    rest = client.simulate_get(f"{BASE}/instances/{wf}", params={"signals_after": later.group(1)}, cookies=cookies)
    assert re.findall(r'<tr id="(sig_\d+)">', rest.text) == sent[pages.Instance.SIGNALS:]
    assert "{\n  &#34;n&#34;: 100\n}" in rest.text and 'rel="next"' not in rest.text.split('id="signals"')[1]


def test_C4_a_step_action_sent_from_a_page_of_an_earlier_activation_is_refused_and_changes_nothing(client, world,
                                                                                                  orch):
    """Each step form carries the activation the page showed. An operator who decides about activation 1 while
    someone else reactivates the step (and activation 2 fails too) gets a 409 page, not a resolve of what they never
    saw; the page read again offers the actions for activation 2."""
    from procedures import pulse

    wf = charge_in_review(world, orch)

    def fail() -> None:  # activation 2 fails as activation 1 did
        claimed = pulse.task_claim(world.db.conn, "w1", "payments", limit=1)[0]
        pulse.attempt_fail(world.db.conn, claimed["attempt_id"], "w1", "card declined", retryable=False)
        orch.drain()

    cookies = sign_in(client, world.token)
    page = client.simulate_get(f"{BASE}/instances/{wf}", cookies=cookies).text
    assert hidden(page, "activation_sequence") == "1"
    assert "Last error: <code>card declined</code>" in page and "Late report" not in page
    first = world.db.scalar("SELECT MAX(id) FROM pulse_attempts")
    pulse.attempt_complete(world.db.conn, first, "w1", {"charged": True})  # too late: kept, without effect
    late = client.simulate_get(f"{BASE}/instances/{wf}", cookies=cookies).text
    assert "Late report (changed nothing) of attempt 1 by" in late
    assert "<code>{\"charged\": true}</code>" in late
    routines.step_reactivate(world.db.conn, world.token, "acme", wf, "charge", "retried by a colleague", "r1")
    orch.drain()
    fail()
    stale = form_post(client, f"{BASE}/instances/{wf}/steps/charge/resolve",
                      {"csrf": hidden(page, "csrf"), "idempotency_key": "resolve-1", "reason": "paid by wire",
                       "output": '{"paid": true}', "activation_sequence": hidden(page, "activation_sequence")},
                      cookies)
    assert stale.status_code == 409 and "is at activation 2, not 1" in stale.text
    assert world.step(wf, "charge")["status"] == "NEEDS_REVIEW"
    assert world.db.scalar("SELECT COUNT(*) FROM weave_audit WHERE action = 'step.resolve'") == 0
    again = client.simulate_get(f"{BASE}/instances/{wf}", cookies=cookies).text
    assert hidden(again, "activation_sequence") == "2"


def test_Z3_a_database_that_refuses_the_node_s_login_is_a_503_page_as_the_api_answers_it(client, world):
    """A credential rotated in place (1045): a page answers 503 with Retry-After, as every API request does."""
    cookies = sign_in(client, world.token)
    refused = dataclasses.replace(world.db.dsn, password="not-its-password")
    page = testing.TestClient(create_app(Connections(refused))).simulate_get(BASE, cookies=cookies)
    assert (page.status_code, page.headers["retry-after"]) == (503, "1")


# --- a long poll's rounds and a step's many signals: the instance page shows the latest, and says so ---------------
def _rounds_on(html: str) -> list[int]:
    return [int(n) for n in re.findall(r"<tr><td>(\d+)</td><td>tsk_\d+</td>", html)]


def _next_page(html: str) -> str | None:
    later = re.search(r'<a href="([^"]+)" rel="next">Next page</a>', html)
    return later.group(1).replace("&amp;", "&") if later else None


def polled(world, orch, rounds: int, max_rounds: int = 100) -> str:
    """An instance whose POLL step `check` has answered PENDING ``rounds`` times: its workflow id."""
    from tests.sql.test_polls import poll_flow, started
    from tests.sql.test_step_rounds import pending_rounds

    world.publish(poll_flow(max_rounds=max_rounds))
    wf = started(world, orch)
    pending_rounds(world, orch, wf, rounds)
    return wf


def test_R11_P5_past_the_latest_50_rounds_the_instance_page_says_so_and_the_rounds_page_pages_through_all(
        client, world, orch):
    """A poll may run 10,000 rounds; the instance read carries the latest 50. The instance page says it shows only
    those and links to the rounds page, which shows every round a page at a time, in order, with its result."""
    wf = polled(world, orch, 55)
    cookies = sign_in(client, world.token)
    html = client.simulate_get(f"{BASE}/instances/{wf}", cookies=cookies).text
    assert _rounds_on(html) == list(range(6, 56))
    assert "Shown here: the latest 50 of 55 rounds." in " ".join(html.split())
    rounds_page = f"{BASE}/instances/{wf}/steps/check/rounds"
    assert f'<a href="{rounds_page}">All rounds of check</a>.' in html
    seen, address, pages_ = [], rounds_page, []
    while address:
        path, _, query = address.partition("?")
        got = client.simulate_get(path, query_string=query, cookies=cookies)
        assert got.status_code == 200, got.text
        pages_.append(got.text)
        seen += _rounds_on(got.text)
        address = _next_page(got.text)
    assert seen == list(range(1, 56)) and len(pages_) == 2
    first, last = pages_
    assert "Rounds 1 to 50 of 55" in first and "Rounds 51 to 55 of 55" in last
    assert "{\n  &#34;status&#34;: &#34;PENDING&#34;,\n  &#34;output&#34;: {\n    &#34;n&#34;: 51\n" in last
    assert '<th scope="col">Created</th>' in first and "POLL_PENDING" in first
    assert "First page" not in first and f'<a href="{rounds_page}?activation=1">First page</a>' in last
    assert f'<a href="{BASE}/instances/{wf}#step-check">Back to {wf}</a>' in first
    past = client.simulate_get(rounds_page, params={"after": "55"}, cookies=cookies)
    assert past.status_code == 200 and "No rounds after round 55." in past.text


def test_P5_the_rounds_page_offers_each_activation_of_a_reactivated_poll(client, world, orch):
    """A reactivated step keeps each earlier activation's rounds: the instance page links to them, and the rounds
    page chooses among the activations, the latest by default. A read-only credential reads them too."""
    wf = polled(world, orch, 2, max_rounds=2)  # the budget spent: the step is in review
    routines.step_reactivate(world.db.conn, world.token, "acme", wf, "check", "try again", "again-1")
    orch.drain()
    reader = world.credential(["workflows:read"], actor="auditor")
    cookies = sign_in(client, reader["token"])
    html = " ".join(client.simulate_get(f"{BASE}/instances/{wf}", cookies=cookies).text.split())
    assert "All rounds of check</a>, of this activation and the 1 before it." in html
    assert "Shown here: the latest" not in html
    rounds_page = f"{BASE}/instances/{wf}/steps/check/rounds"
    latest = client.simulate_get(rounds_page, cookies=cookies)
    assert latest.status_code == 200 and _rounds_on(latest.text) == [1]
    assert "Activation 2 (the latest)" in latest.text and "<td>IN_FLIGHT</td>" in latest.text
    assert f'<a href="{rounds_page}?activation=1">1</a>' in latest.text
    assert f'<a href="{rounds_page}?activation=2" aria-current="page">2 (latest)</a>' in latest.text
    earlier = client.simulate_get(rounds_page, params={"activation": "1"}, cookies=cookies)
    assert _rounds_on(earlier.text) == [1, 2] and "(an earlier one; the latest is 2)" in earlier.text
    assert "poll STOPPED, 2 of 2 rounds" in earlier.text and "&#34;n&#34;: 2" in earlier.text
    assert f'<a href="{rounds_page}?activation=1" aria-current="page">1</a>' in earlier.text


def test_a_poll_that_polls_no_more_shows_its_deadline_without_a_count_down(client, world, orch):
    """A poll that had ended (its budget spent, in review) still showed its deadline counting down, as if it still
    polled: an agent read that it had minutes left."""
    from tests.console.test_console_browser import in_review

    wf = in_review(world, orch, "o-1")
    cookies = sign_in(client, world.token)
    html = " ".join(client.simulate_get(f"{BASE}/instances/{wf}", cookies=cookies).text.split())
    said = re.search(r"<p>Poll (\w+): .*?</p>", html).group(0)
    assert "Poll STOPPED" in said and re.search(r"poll deadline <time>[^<]+</time>\.</p>$", said), said


def test_R11_a_rounds_page_refuses_bad_query_values_and_a_step_without_rounds_as_pages_leading_back(client, world,
                                                                                                    orch):
    """A query value that is no round or activation number is a 422 page naming it, never a 500 or the routine's
    parameter; a step that is no POLL, or none at all, is a 404 page; each leads back to the instance."""
    from tests.sql.test_polls import poll_step, started

    world.publish({"name": "mixed", "steps": [{"key": "wait", "type": "TIMER", "delay_ms": 60_000},
                                              poll_step(after=["wait"])]})
    wf = started(world, orch, "mixed")
    cookies = sign_in(client, world.token)
    back = f'<a href="{BASE}/instances/{wf}">Back to the instance</a>'
    rounds_page = f"{BASE}/instances/{wf}/steps/check/rounds"
    never = client.simulate_get(rounds_page, cookies=cookies)
    assert never.status_code == 200 and "The step has not been activated yet: it has no rounds." in never.text
    for params in ({"after": "x"}, {"after": "-1"}, {"after": str(2**40)}, {"activation": "0"},
                   {"activation": "two"}, {"activation": str(2**63)}, {"after": "1.5"}):
        refused = client.simulate_get(rounds_page, params=params, cookies=cookies)
        assert refused.status_code == 422 and "VALIDATION_FAILED" in refused.text, (params, refused.text[-300:])
        assert next(iter(params)) in refused.text and "in_" not in refused.text and back in refused.text
    for path, words in ((rounds_page + "?activation=1", "the step has no activation 1"),
                        (f"{BASE}/instances/{wf}/steps/wait/rounds", "this step is a TIMER step"),
                        (f"{BASE}/instances/{wf}/steps/nope/rounds", "the instance has no step with this key")):
        address, _, query = path.partition("?")
        missing = client.simulate_get(address, query_string=query, cookies=cookies)
        assert missing.status_code == 404 and "NOT_FOUND" in missing.text and words in missing.text, missing.text
        assert back in missing.text
    assert "/rounds" not in client.simulate_get(f"{BASE}/instances/{wf}", cookies=cookies).text  # no rounds yet
    assert client.simulate_get(f"{BASE}/instances/wf_999999/steps/check/rounds", cookies=cookies).status_code == 404
    gone = client.simulate_get(f"{BASE}/instances/wf_999999", cookies=cookies)  # no way "back" to the page that failed
    assert gone.status_code == 404 and "Back to the instance" not in gone.text and "Back to the dashboard" in gone.text
    signed_out = client.simulate_get(rounds_page)
    assert signed_out.status_code == 303 and "/console/signin?next=" in signed_out.headers["location"]


def test_S17_R11_past_the_latest_100_signals_explain_says_so_and_points_to_the_instance_s_signal_list(client, world,
                                                                                                      orch):
    from tests.support import signals as sig

    world.publish(sig.signal_flow())
    wf = world.start("approval-flow", {"order_id": "o-1"})
    orch.drain()
    for i in range(100):  # each refused at once, its correlation key not the wait's
        sig.send(world, wf, f"k-{i}", correlation_key=f"o-1-{i}")
    cookies = sign_in(client, world.token)
    html = client.simulate_get(f"{BASE}/instances/{wf}", cookies=cookies).text
    assert html.count("<td><strong>CORRELATION_MISMATCH</strong></td>") == 100  # explain's table: all of them
    assert "Shown here: the latest" not in html
    sig.send(world, wf, "k-100", correlation_key="o-1-100")
    html = " ".join(client.simulate_get(f"{BASE}/instances/{wf}", cookies=cookies).text.split())
    assert "Shown here: the latest 100 of 101 signals that targeted this step." in html
    assert '<a href="#signals">The instance\'s signals</a> list every one' in html.replace("&#39;", "'")
    assert 'id="signals"' in html


def test_S2_a_console_path_refused_before_the_console_sees_it_carries_the_pages_headers(client, world):
    """A path with an escaped slash names nothing and is refused before routing; under /console that answer lacked
    the console's Content-Security-Policy, frame and sniffing headers, which every console answer carries."""
    path = "/console/instances/wf_1/steps/a%2Fb/rounds"
    refused = client.simulate_get("/console/instances/wf_1/steps/a/b/rounds", extras={"RAW_URI": path})
    assert refused.status_code == 404
    assert refused.headers["content-security-policy"].startswith("default-src 'none'")
    assert refused.headers["x-frame-options"] == "DENY" and refused.headers["x-content-type-options"] == "nosniff"
    api = client.simulate_get("/v1/namespaces/acme/workflows/wf_1/signals",
                              extras={"RAW_URI": "/v1/namespaces/acme/workflows/wf_1%2Fsignals"})
    assert api.status_code == 404 and "content-security-policy" not in api.headers
