"""The console in a real browser: headless Chromium (Debian's package) driven by Playwright, against
`weave api` under gunicorn on the real test database. The orchestrator runs in process and the workers'
answers go through the Pulse routines; time moves only with the database test clock."""

from __future__ import annotations

import re

from procedures import routines
from tests.console.conftest import BASE, browser_sign_in, screenshot
from tests.sql.test_polls import INTERVAL, answer, poll_flow

HOSTILE = "<script>alert('x')</script>"


def in_review(world, orch, business_key: str, input: dict | None = None) -> str:
    """A POLL that used its only round on a PENDING answer: NEEDS_REVIEW with POLL_ROUNDS_EXHAUSTED."""
    if "pay" not in world.published:
        world.publish(poll_flow(max_rounds=1))
    wf = world.start("pay", input or {"order_id": business_key}, business_key=business_key)
    orch.drain()
    answer(world, "PENDING")
    orch.drain()
    assert world.instance(wf)["status"] == "NEEDS_REVIEW"
    return wf


def no_dialogs(page) -> list[str]:
    seen: list[str] = []
    page.on("dialog", lambda d: (seen.append(d.message), d.dismiss()))
    return seen


def test_find_an_instance_in_review_read_why_continue_it_and_watch_it_settle(page, world, orch):
    dialogs = no_dialogs(page)
    world.publish({"name": "cool-off", "steps": [{"key": "wait", "type": "TIMER", "delay_ms": 60_000}]})
    for n in range(3):
        world.start("cool-off", {"n": n}, business_key=f"cool-{n}")
    orch.drain()
    world.db.advance(60_250)
    orch.drain()  # three timers settle 250 ms late: the lateness chart has something to show
    world.start("cool-off", {"n": 9}, business_key="cool-9")
    orch.drain()
    older = in_review(world, orch, "order-41")
    wf = in_review(world, orch, "order-42", {"order_id": "order-42", "note": HOSTILE})

    browser_sign_in(page, world.token)
    assert page.get_by_role("heading", name="Dashboard").is_visible()
    assert page.evaluate("document.cookie") == ""  # the session cookie is HttpOnly: no script can read it
    assert world.token not in page.content() and world.token not in page.url
    assert page.locator('[data-figure="instances-in-review"]').inner_text() == "2"
    assert page.locator("svg.chart rect").count() == 7
    screenshot(page, "dashboard")

    page.get_by_role("link", name="Review queue", exact=True).click()  # the navigation's
    page.wait_for_url(re.compile(r".*/console/review$"))
    cards = page.locator("ol.queue > li")
    assert cards.count() == 2 and older in cards.nth(0).inner_text()  # the longest waiting first
    screenshot(page, "review-queue")

    page.get_by_role("link", name=wf).click()
    page.wait_for_url(re.compile(rf".*/console/instances/{wf}$"))
    why = page.get_by_role("region", name="Why it waits for a person")
    assert "POLL_ROUNDS_EXHAUSTED" in why.inner_text() and "check" in why.inner_text()
    assert "1 of 1 rounds" in page.locator("#step-check").inner_text()
    assert page.locator("#step-check table").first.inner_text().count("POLL_PENDING") == 1
    screenshot(page, "instance")

    form = page.locator("form.action", has=page.get_by_role("heading", name="Continue check"))
    key = form.get_by_label("Idempotency-Key").input_value()
    assert key.startswith("console-continue-")
    form.get_by_label("Reason").fill(f"vendor is slow today {HOSTILE}")
    form.get_by_label("Extra rounds").fill("1")
    form.get_by_role("button", name="Continue check").click()
    page.wait_for_url(re.compile(rf".*/console/instances/{wf}\?.*"))
    assert f"done with Idempotency-Key {key}" in page.get_by_role("status").inner_text()
    assert page.locator("h1 .status").inner_text() == "RUNNING"
    assert HOSTILE in page.locator(".timeline").inner_text()  # the reason, in the event history, as text

    orch.drain()
    world.db.advance(INTERVAL)
    orch.drain()
    answer(world, "DONE")
    orch.drain()
    page.reload()
    assert page.locator("h1 .status").inner_text() == "SUCCEEDED"
    assert page.locator("#step-check .status").first.inner_text() == "SUCCEEDED"
    assert dialogs == [] and page.locator("script").count() == 0


def test_resolve_a_step_with_output_validated_before_it_is_sent(page, world, orch):
    world.publish(poll_flow(max_rounds=1))
    wf = in_review(world, orch, "order-7")
    browser_sign_in(page, world.token)
    page.goto(f"{BASE}/instances/{wf}")
    form = page.locator("form.action", has=page.get_by_role("heading", name="Resolve check"))
    form.get_by_label("Reason").fill("paid by bank transfer, checked by hand")
    form.get_by_label("Output (JSON)").fill('{"status": "PAID", "status": "x"}')
    form.get_by_role("button", name="Resolve check").click()
    assert "OUTPUT_INVALID" in page.get_by_role("alert").inner_text()
    assert world.instance(wf)["status"] == "NEEDS_REVIEW"
    page.go_back()
    form = page.locator("form.action", has=page.get_by_role("heading", name="Resolve check"))
    form.get_by_label("Reason").fill("paid by bank transfer, checked by hand")
    form.get_by_label("Output (JSON)").fill('{"status": "PAID"}')
    form.get_by_role("button", name="Resolve check").click()
    page.wait_for_url(re.compile(rf".*/console/instances/{wf}\?.*"))
    assert page.locator("#step-check .status").first.inner_text() == "SUCCEEDED"
    assert page.locator("h1 .status").inner_text() == "SUCCEEDED"  # its last step: ended by the resolve (R-9)
    assert world.step(wf, "check")["output"] == {"status": "PAID"}


def test_hostile_text_renders_as_text_everywhere(page, world, orch):
    dialogs = no_dialogs(page)
    wf = in_review(world, orch, HOSTILE, {"order_id": HOSTILE})
    routines.instance_pause(world.db.conn, world.token, "acme", wf, HOSTILE, "pause-hostile")
    browser_sign_in(page, world.token)
    for path in (f"{BASE}/instances/{wf}", f"{BASE}/review", f"{BASE}/instances"):
        page.goto(path)
        assert page.locator("script").count() == 0
        assert HOSTILE in page.locator("main").inner_text()
    page.goto(f"{BASE}/instances/{wf}")
    assert page.locator(".facts .bk").inner_text() == HOSTILE
    assert dialogs == [] and page.csp_errors == []


def test_read_only_credential_sees_no_actions_and_other_namespaces_are_404(page, world, orch):
    from tests.support.world import World

    wf = in_review(world, orch, "order-9")
    other = World.create(world.db, "other")
    other.publish({"name": "cool-off", "steps": [{"key": "wait", "type": "TIMER", "delay_ms": 60_000}]})
    theirs = other.start("cool-off")
    reader = world.credential(["workflows:read"], actor="auditor")
    browser_sign_in(page, reader["token"])
    page.goto(f"{BASE}/instances/{wf}")
    page.keyboard.press("Tab")  # keyboard first: the skip link, then the navigation
    assert page.evaluate("document.activeElement.textContent") == "Skip to content"
    page.keyboard.press("Enter")
    assert page.evaluate("document.activeElement.id") == "main"
    assert "POLL_ROUNDS_EXHAUSTED" in page.locator("main").inner_text()
    assert page.locator("form.action").count() == 0 and page.get_by_role("button", name="Pause").count() == 0
    got = page.goto(f"{BASE}/instances/{theirs}")
    assert got.status == 404 and page.get_by_role("heading", name="Not found").is_visible()
    page.goto(BASE)
    page.get_by_role("button", name="Sign out").click()
    page.wait_for_url(re.compile(r".*/console/signin$"))
    assert page.goto(f"{BASE}/instances/{wf}").url.endswith(f"/console/signin?next=%2Fconsole%2Finstances%2F{wf}")


def test_bulk_dry_run_counts_exactly_what_the_filter_matches_then_applies_per_item(page, world):
    world.publish({"name": "cool-off", "steps": [{"key": "wait", "type": "TIMER", "delay_ms": 60_000}]})
    world.publish({"name": "other-flow", "steps": [{"key": "wait", "type": "TIMER", "delay_ms": 60_000}]})
    mine = [world.start("cool-off") for _ in range(4)]
    theirs = world.start("other-flow")
    for n, wf in enumerate([mine[0], mine[2], theirs]):
        routines.instance_pause(world.db.conn, world.token, "acme", wf, "hold", f"p-{n}")
    browser_sign_in(page, world.token)
    page.get_by_role("link", name="Bulk actions").click()
    page.get_by_label("Definition").fill("cool-off")
    page.get_by_label("Control").select_option("PAUSED")
    page.get_by_label("Action", exact=True).select_option("resume")
    page.get_by_role("button", name="Dry run").click()
    assert page.locator('[data-figure="bulk-count"]').inner_text() == "2"
    listed = page.locator("table.list tbody tr td:first-child").all_inner_texts()
    assert sorted(listed) == sorted([mine[0], mine[2]])
    page.get_by_label("Reason", exact=True).fill("the vendor is back")
    page.get_by_role("button", name="Apply resume").click()
    assert page.locator('[data-figure="bulk-ok"]').inner_text() == "2"
    assert page.locator('[data-figure="bulk-failed"]').inner_text() == "0"
    assert [world.instance(wf)["control"] for wf in mine] == ["ACTIVE"] * 4
    assert world.instance(theirs)["control"] == "PAUSED"


def test_reading_and_acting_work_with_javascript_off(browser, server, world, orch):
    wf = in_review(world, orch, "order-nojs")
    context = browser.new_context(base_url=server, java_script_enabled=False)
    try:
        page = context.new_page()
        browser_sign_in(page, world.token)
        page.goto(f"{BASE}/instances/{wf}")
        assert "POLL_ROUNDS_EXHAUSTED" in page.get_by_role("region", name="Why it waits for a person").inner_text()
        form = page.locator("form.action", has=page.get_by_role("heading", name="Pause"))
        form.get_by_label("Reason").fill("hold while we call the bank")
        form.get_by_role("button", name="Pause").click()
        page.wait_for_url(re.compile(rf".*/console/instances/{wf}\?.*"))
        assert world.instance(wf)["control"] == "PAUSED"
    finally:
        context.close()
