"""`make run` installs and initialises only when something calls for it (issue 35: the second start with
nothing changed served in ~4-8 s on a loaded 2-core machine, against ~105 s of reinstalling before).

The Makefile is asked what it would do (`make -n`, nothing runs) with a virtualenv and an instance folder
of the test's own whose stamps say "installed" and "initialised"; `-W FILE` makes make treat a file as
just changed without touching it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def plan(venv: Path, instance: Path, *args: str, **env: str) -> str:
    """The commands `make run` would run (echo lines and all)."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("TRELLIS_")}
    environment.update(TRELLIS_INSTANCE_PATH=str(instance), **env)
    done = subprocess.run(
        ["make", "-n", f"VENV={venv}", *args, "run"],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout


@pytest.fixture()
def installed(tmp_path: Path) -> tuple[Path, Path]:
    """A virtualenv and an instance folder whose stamps are as a finished first `make run` leaves them."""
    venv, instance = tmp_path / "venv", tmp_path / "instance"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").touch()
    instance.mkdir()
    (instance / "trellis.db").touch()
    plugins = " ".join(sorted(f"plugins/{p.parent.name}/" for p in ROOT.glob("plugins/*/pyproject.toml")))
    for stamp in (venv / ".trellis-installed", venv / ".trellis-installed-test"):
        stamp.write_text(plugins + "\n")
    (instance / ".trellis-initialised").write_text("sqlite\n")
    return venv, instance


def test_nothing_changed_starts_the_server_at_once(installed):
    commands = plan(*installed)
    assert "wsgi.py" in commands
    assert "pip install" not in commands and "trellis init" not in commands


def test_a_changed_package_file_reinstalls_and_initialises(installed):
    commands = plan(*installed, "-W", "plugins/chat/pyproject.toml")
    assert "pip install" in commands and "trellis init" in commands
    assert commands.index("pip install") < commands.index("trellis init") < commands.index("wsgi.py")
    assert "==> installing Trellis" in commands  # the step says what it does


def test_a_new_migration_initialises_without_installing(installed):
    migration = next(ROOT.glob("plugins/*/trellis_*/migrations/versions/*.py")).relative_to(ROOT)
    commands = plan(*installed, "-W", str(migration))
    assert "trellis init" in commands and "pip install" not in commands


def test_a_module_added_or_removed_reinstalls(installed):
    venv, instance = installed
    (venv / ".trellis-installed").write_text("plugins/chat/\n")
    assert "pip install" in plan(venv, instance)


def test_another_database_or_a_missing_sqlite_file_initialises(installed):
    venv, instance = installed
    assert "trellis init" in plan(venv, instance, TRELLIS_DATABASE_URL="postgresql://127.0.0.1/other")
    (instance / "trellis.db").unlink()
    assert "trellis init" in plan(venv, instance)
