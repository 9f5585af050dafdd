"""The console under gunicorn behind a path prefix (SCRIPT_NAME): links, forms and cookies stay under it."""

from __future__ import annotations

import http.cookiejar
import json
import re
import urllib.error
import urllib.parse
import urllib.request

from tests.support.processes import WeaveProcess, free_port
from tests.support.waiting import wait_for


def test_the_console_works_behind_a_path_prefix_under_gunicorn(database, world, tmp_path):
    port = free_port()
    proc = WeaveProcess(database, "api", "--bind", f"127.0.0.1:{port}", "--workers", "1",
                        env={"SCRIPT_NAME": "/ops"}, log=tmp_path / "api.log")
    root = f"http://127.0.0.1:{port}/ops"
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))

    def ready() -> bool:
        try:
            with urllib.request.urlopen(root + "/readyz", timeout=2) as resp:
                return resp.status == 200
        except OSError:
            return False

    try:
        assert wait_for(ready, timeout=30), (tmp_path / "api.log").read_text()
        with opener.open(root + "/console") as resp:  # no session: redirected to the prefixed sign-in
            assert resp.url == root + "/console/signin?next=%2Fops%2Fconsole"
            html = resp.read().decode()
        assert 'action="/ops/console/signin"' in html and 'href="/ops/console/static/console.css"' in html
        nonce = re.search(r'name="nonce" value="([^"]+)"', html).group(1)
        body = urllib.parse.urlencode({"nonce": nonce, "namespace": "acme", "token": world.token}).encode()
        with opener.open(root + "/console/signin", data=body) as resp:
            assert resp.url == root + "/console"
            dashboard = resp.read().decode()
        assert "Dashboard" in dashboard and 'href="/ops/console/review"' in dashboard
        session = next(c for c in jar if c.name == "weave_console")
        assert session.path == "/ops/console" and session.has_nonstandard_attr("HttpOnly")
        with opener.open(root + "/console/static/console.css") as resp:
            assert resp.headers["Content-Type"].startswith("text/css")
        # A path outside the prefix is one this server does not serve: 404, never a 500.
        for outside in ("/healthz", "/v1/namespaces/acme/apps", "/console/signin"):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}{outside}", timeout=5)
                raise AssertionError(f"{outside} answered")
            except urllib.error.HTTPError as refused:
                problem = json.loads(refused.read())
                assert (refused.code, problem["code"]) == (404, "NOT_FOUND"), problem
                assert "'/ops'" in problem["detail"] and outside in problem["detail"]
    finally:
        proc.terminate()
        proc.close()
