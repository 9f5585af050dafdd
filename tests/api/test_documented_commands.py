"""Every command the README and the quickstart show stays runnable, in the order a reader runs them: each
`weave …` line runs against the test database (daemons are only parsed), each `curl` line is sent to the
app with the method, headers and body it shows and must succeed (or answer the status its comment
promises), `sleep N` moves the test clock, and `make` targets exist. Following both documents with one
set of idempotency keys must therefore never conflict."""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from orchestrator import cli
from orchestrator.dev import provision

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", ROOT / "docs" / "quickstart.md"]
DAEMONS = {"orchestrator", "dev", "api", "worker"}


def commands(path: Path) -> list[tuple[str, str]]:
    """(command, trailing comment) of every line of every ```sh block, continuation lines joined."""
    found: list[tuple[str, str]] = []
    for block in re.findall(r"```sh\n(.*?)```", path.read_text(), re.S):
        pending = ""
        for line in block.splitlines():
            pending += line.rstrip()
            if pending.endswith("\\"):
                pending = pending[:-1] + " "
                continue
            try:
                shlex.split(pending)
            except ValueError:  # a quote spans lines
                pending += "\n"
                continue
            if pending.strip():
                text = pending.strip()
                comment = text.split("  #", 1)[1] if "  #" in text else ""
                found.append((text.split("  #", 1)[0].strip() if "  #" in text else text, comment))
            pending = ""
    return found


class Reader:
    """Runs documented commands the way a reader would, against the test app and database."""

    def __init__(self, client, database, world, orch, tokens: dict):
        self.client, self.database, self.world, self.orch = client, database, world, orch
        self.env = {"TOKEN": tokens["token"], "NS": "http://127.0.0.1:8080/v1/namespaces/dev"}
        self.ran = 0

    def expand(self, text: str) -> str:
        """Variables as the shell expands them; the literal ids the documents show (wf_1, sig_1) as the ids
        this run got, as the documents tell the reader to do."""
        text = re.sub(r"\$\{?(\w+)\}?", lambda m: self.env.get(m.group(1), m.group(0)), text)
        for literal, name in (("wf_1", "WF"), ("sig_1", "SIG")):
            if name in self.env:
                text = re.sub(rf"\b{literal}\b", self.env[name], text)
        return text

    def run(self, command: str, comment: str) -> None:
        capture = re.fullmatch(r"(\w+)=\$\((.*)\)", command, re.S)
        if capture:
            answer = self.run(capture.group(2), comment)
            self.env[capture.group(1)] = answer["workflow_id"]
            return None
        words = shlex.split(self.expand(command))
        if "|" in words:
            words = words[: words.index("|")]
        while re.fullmatch(r"\w+=.*", words[0]) and len(words) > 1:  # VAR=value command
            words = words[1:]
        head = words[0]
        if head == "export":
            for assignment in words[1:]:
                name, _, value = assignment.partition("=")
                placeholder = "..." in value or "…" in value or "/path/to/" in value
                if not placeholder and (name.startswith("WEAVE_") or name not in self.env):
                    self.env[name] = value
            return None
        if head == "make":
            assert re.search(rf"^{words[1]}:", (ROOT / "Makefile").read_text(), re.M), command
            return None
        if head in ("sleep",):
            self.world.db.advance(int(float(words[1]) * 1000))
            self.orch.drain()
            return None
        if head == "watch":
            return None
        self.ran += 1
        if head.endswith("weave"):
            return self.weave(words[1:], command)
        if head == "curl":
            return self.curl(words[1:], command, comment)
        raise AssertionError(f"a documented command this test cannot run: {command}")

    def weave(self, argv: list[str], command: str) -> None:
        argv = [a for a in argv if a]
        if argv[0] in DAEMONS:
            cli.build_parser().parse_args(argv)  # they run until stopped: only their arguments are checked
            return None
        env_token = self.env.get("WEAVE_TOKEN", "")
        extra = ["--dsn", self.database.url()]
        parser_argv = [*argv, *extra]
        needs_token = argv[0] not in ("migrate", "bootstrap", "status")
        if needs_token:
            parser_argv += ["--token", env_token or self.world.admin,
                            "--namespace", self.env.get("WEAVE_NAMESPACE", "dev")]
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = cli.main(parser_argv)
        assert code == 0, f"{command} exited {code}"
        if argv[0] == "bootstrap":
            self.env["WEAVE_TOKEN"] = re.search(r"token \(shown once\): (\S+)", out.getvalue()).group(1)
        self.orch.drain()
        return None

    def curl(self, args: list[str], command: str, comment: str) -> dict:
        headers: dict[str, str] = {}
        body, url = None, None
        i = 0
        while i < len(args):
            arg = args[i]
            if arg == "-H":
                name, _, value = args[i + 1].partition(":")
                headers[name.strip()] = value.strip()
                i += 2
            elif arg == "-d":
                body = args[i + 1]
                i += 2
            elif arg in ("-o", "-w"):
                i += 2
            elif arg.startswith("-"):
                i += 1
            else:
                url = arg
                i += 1
        assert url is not None, command
        parts = urlsplit(url)
        result = self.client.simulate_request("POST" if body is not None else "GET", parts.path,
                                              query_string=parts.query or None, headers=headers, body=body)
        expected = 409 if "409" in comment or "IDEMPOTENCY_CONFLICT" in comment else None
        if expected:
            assert result.status_code == expected, (command, result.text)
        else:
            assert result.status_code < 300, (command, result.status_code, result.text)
        self.orch.drain()
        answer = result.json if result.text else {}
        if isinstance(answer, dict) and "workflow_id" in answer and "WF" not in self.env:
            self.env["WF"] = answer["workflow_id"]
        if isinstance(answer, dict) and "signal_id" in answer and "SIG" not in self.env:
            self.env["SIG"] = answer["signal_id"]
        return answer


@pytest.fixture
def reader(client, database, world, orch, monkeypatch):
    monkeypatch.chdir(ROOT)  # the documents' paths (docs/examples/…) are relative to the checkout
    tokens = provision(world.db.conn)  # what `make dev` sets up: the dev namespace, app, queue and examples
    return Reader(client, database, world, orch, tokens)


def test_every_command_of_the_readme_and_the_quickstart_runs(reader):
    for doc in DOCS:
        for command, comment in commands(doc):
            reader.run(command, comment)
    assert reader.ran >= 20


def test_the_quickstart_shows_the_start_answer_the_api_gives(client, world, monkeypatch):
    """The answer the quickstart prints for its first start (the JSON block under section 3) is the answer the API
    gives, steps included: the start runs the first walk itself, so `cool_off` is already ACTIVE (the guide said
    every step was still PENDING, waiting for the orchestrator)."""
    import json

    monkeypatch.chdir(ROOT)
    tokens = provision(world.db.conn)
    section = (ROOT / "docs" / "quickstart.md").read_text().split("## 3. Start an instance", 1)[1]
    shown = json.loads(re.search(r"```json\n(.*?)```", section, re.S).group(1))
    answer = client.simulate_post("/v1/namespaces/dev/workflows", json={
        "definition": "order-flow", "app": "dev-app", "input": {"order_id": "o-1"}, "deadline_ms": 3_600_000},
        headers={"Authorization": f"Bearer {tokens['token']}", "Idempotency-Key": "start-o-1"}).json
    assert set(shown) == {"workflow_id", "status", "control", "gate", "deadline_at", "steps"}
    assert {k: shown[k] for k in ("status", "control", "gate", "steps")} == {
        "status": answer["status"], "control": answer["control"], "gate": answer["gate"],
        "steps": [[s["key"], s["status"], s["activation_sequence"]] for s in answer["steps"]]}
