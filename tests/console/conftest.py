"""Console fixtures: the Falcon app in process for plain HTTP tests, a real gunicorn and a headless Chromium
(Debian's package, driven by Playwright) for browser tests, all on the real test database."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

import pytest
from falcon import testing

from api.app import create_app
from api.http import Connections

CHROMIUM = os.environ.get("WEAVE_CHROMIUM", "/usr/bin/chromium")
# Where the browser tests draw their screenshots: a scratch folder, overwritten by each run, so that a test run
# leaves the checkout as it was; WEAVE_CONSOLE_SHOTS=docs/console redraws the ones the documentation shows.
SHOTS = Path(os.environ.get("WEAVE_CONSOLE_SHOTS") or Path(tempfile.gettempdir()) / "weave-console-shots")
BASE = "/console"


@pytest.fixture
def client(db, world):
    connections = Connections(db.dsn)
    yield testing.TestClient(create_app(connections))
    connections.discard()


def hidden(html: str, name: str) -> str:
    match = re.search(rf'name="{name}" value="([^"]*)"', html)
    assert match, f"no hidden field {name}"
    return match.group(1)


def form_post(client, path: str, fields: dict, cookies: dict | None = None, **kw):
    from urllib.parse import urlencode

    return client.simulate_post(path, body=urlencode(fields, doseq=True), cookies=cookies or {},
                                headers={"Content-Type": "application/x-www-form-urlencoded"}, **kw)


def sign_in(client, token: str, namespace: str = "acme", **kw) -> dict:
    """Sign in through the form; answers the cookies a browser would hold afterwards."""
    page = client.simulate_get(f"{BASE}/signin", **kw)
    nonce = hidden(page.text, "nonce")
    cookies = {"weave_console_signin": page.cookies["weave_console_signin"].value}
    done = form_post(client, f"{BASE}/signin", {"nonce": nonce, "namespace": namespace, "token": token}, cookies,
                     **kw)
    assert done.status_code == 303, done.text
    return {"weave_console": done.cookies["weave_console"].value}


# --- a real server and a real browser ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def server(database, tmp_path_factory):
    """`weave api` (gunicorn, two workers) on the test database, for the whole module."""
    from tests.support.processes import start_api

    proc, url = start_api(database, tmp_path_factory.mktemp("console") / "api.log")
    yield url
    proc.terminate()
    proc.close()


@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).exists() and not shutil.which("chromium"):
        pytest.fail(f"Debian's chromium is needed at {CHROMIUM} (apt-get install chromium); .ci/run installs it")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                      args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser, server):
    context = browser.new_context(base_url=server, viewport={"width": 1280, "height": 900})
    context.set_default_timeout(10_000)
    tab = context.new_page()
    errors: list[str] = []
    tab.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    tab.csp_errors = errors
    yield tab
    context.close()


def browser_sign_in(page, token: str, namespace: str = "acme") -> None:
    page.goto(BASE)
    assert "/console/signin?next=" in page.url
    page.get_by_label("Namespace").fill(namespace)
    page.get_by_label("Token").fill(token)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(re.compile(r".*/console$"))


def screenshot(page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)
