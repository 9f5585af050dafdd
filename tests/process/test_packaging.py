"""The package as a user installs it: the wheel built from this checkout carries every routine, migration,
console file and example definition, and run from that wheel alone (not from the checkout) `weave migrate`
installs a fresh database at the level this code ships and `weave dev`'s provisioning publishes the examples."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from procedures import db as dbmod
from procedures import installer
from tests.support.processes import ROOT

pytestmark = pytest.mark.process


def _tracked(*patterns: str) -> set[str]:
    """The checkout's files as a build sees them: tracked or new, not ignored, and present."""
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", *patterns], cwd=ROOT,
                            capture_output=True, text=True, check=True)
    return {name for name in listed.stdout.split() if (ROOT / name).is_file()}


def test_the_wheel_carries_the_routines_migrations_and_console_and_migrates_a_fresh_database(tmp_path, database):
    # Built from a copy of the tracked files: a build in the checkout would leave build/ there, whose stale
    # contents a later build packs as well.
    source = tmp_path / "source"
    for name in _tracked():
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, source / name)
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", str(source), "-w",
                            str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-3000:]
    # setuptools announced that the table form of project.license stops building after 2027-02-18.
    assert "project.license" not in built.stdout + built.stderr
    (wheel,) = tmp_path.glob("weave-*.whl")
    unpacked = tmp_path / "site"
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(unpacked)
        names = set(archive.namelist())

    # What a checkout ships, where an installed package keeps it: sql/ becomes procedures/migrations/.
    wanted = {f"procedures/migrations/{Path(p).name}" for p in _tracked("sql/*.sql")}
    wanted |= {f"orchestrator/examples/{Path(p).name}" for p in _tracked("docs/examples/*.json")}
    wanted |= _tracked("procedures/*/*.sql", "api/console/templates/*", "api/console/static/*")
    assert len(wanted) > 100 and wanted <= names, sorted(wanted - names)

    # Run from the unpacked wheel with the site's own libraries only: -S leaves out the editable install's
    # path hook, so nothing can be read from the checkout.
    dsn = database.with_database(f"{database.database}_wheel")
    script = ("import sys; sys.path[:0] = sys.argv[1:3]; del sys.argv[1:3]; "
              "from orchestrator.cli import main; sys.exit(main())")
    try:
        run = subprocess.run([sys.executable, "-S", "-c", script, str(unpacked), sysconfig.get_paths()["purelib"],
                              "migrate", "--json"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                             env={"WEAVE_DSN": dsn.url(), "PATH": "/usr/bin:/bin"})
        assert run.returncode == 0, run.stdout + run.stderr
        report = json.loads(run.stdout)
        assert report["migrations_applied"] == installer.shipped_migrations()
        assert sorted(report["routines_installed"]) == sorted(r.name for r in installer.shipped_routines())

        # weave dev's provisioning from the wheel publishes every example definition the checkout has.
        provision = ("import sys, json; sys.path[:0] = sys.argv[1:3]; from procedures import db; "
                     "from orchestrator import dev; conn = db.connect(db.dsn_from_env(None)); "
                     "print(json.dumps(dev.provision(conn)['definitions']))")
        run = subprocess.run([sys.executable, "-S", "-c", provision, str(unpacked), sysconfig.get_paths()["purelib"]],
                             cwd=tmp_path, capture_output=True, text=True, timeout=120,
                             env={"WEAVE_DSN": dsn.url(), "PATH": "/usr/bin:/bin"})
        assert run.returncode == 0, run.stdout + run.stderr
        examples = sorted(Path(p).stem for p in _tracked("docs/examples/*.json"))
        assert [name.split(" v")[0] for name in json.loads(run.stdout)] == examples
    finally:
        with dbmod.connect(dsn, database=False) as conn, conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{dsn.database}`")
