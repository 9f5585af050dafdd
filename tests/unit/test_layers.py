"""The architecture as a test: which package may import which, and the vocabularies that several layers
share are one (the error table, the candidate classes)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from api import client, docs
from procedures import candidates, errors
from procedures.installer import shipped_routines

ROOT = Path(__file__).resolve().parents[2]


def _imports(path: Path) -> set[str]:
    """Absolute names of the modules a file imports (relative imports resolved against its package)."""
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, *([base] if base else [])])
            names |= {base} | {f"{base}.{alias.name}" for alias in node.names}
    return names


def _importers(target: str, *packages: str) -> list[str]:
    found = []
    for package in packages:
        for path in sorted((ROOT / package).rglob("*.py")):
            if any(name == target or name.startswith(target + ".") for name in _imports(path)):
                found.append(str(path.relative_to(ROOT)))
    return found


def test_the_core_imports_neither_daemons_nor_the_api():
    assert _importers("orchestrator", "procedures") == []
    assert _importers("api", "procedures") == []


def test_the_api_never_imports_the_daemon_package():
    assert _importers("orchestrator", "api") == []


def test_the_cli_sits_at_the_top_and_nothing_imports_it():
    assert _importers("orchestrator.cli", "procedures", "orchestrator", "api") == []


def test_the_sdk_has_one_exception_class_per_code_the_api_can_answer():
    assert set(client.BY_CODE) == set(errors.http_codes())
    for code, cls in client.BY_CODE.items():
        assert cls.code == code and issubclass(cls, client.WeaveApiError)


def test_the_http_reference_explains_every_code_of_the_error_table():
    assert set(docs.WHEN) == set(errors.http_codes())
    assert all(text for _, _, text in docs.STABLE_CODES)


def test_R10_the_candidate_registry_names_every_class_the_scan_proposes_and_status_counts():
    routines = {r.name: r.text for r in shipped_routines()}
    scanned = re.findall(r"SELECT '([A-Z_]+)' AS class", routines["weave_scan"])
    assert tuple(scanned) == candidates.NAMES
    backlog = routines["weave_status"].split("CALL _weave_now(v_now);", 1)[1].split(";", 1)[0]
    assert tuple(re.findall(r"SELECT '([A-Z_]+)'", backlog)) == candidates.NAMES  # result set 1: the backlog
    for klass in candidates.CLASSES:
        assert klass.advancer in routines, f"{klass.name}: no routine {klass.advancer}"
