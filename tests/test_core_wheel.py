"""A wheel of the core carries its Alembic environment and every core migration, as a module's wheel
carries the module's (the checkout's top-level ``migrations/`` is a link into the package), and the site icon."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE_MIGRATIONS = ROOT / "src" / "trellis" / "migrations"


def test_the_core_wheel_carries_the_migrations(tmp_path):
    # Built from a copy: an in-tree build writes build/ into the checkout, where the other database's pass
    # may be building at the same time.
    source = tmp_path / "source"
    shutil.copytree(ROOT / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("setup.cfg", "pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    command = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(tmp_path)]
    built = subprocess.run([*command, str(source)], capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = tmp_path.glob("trellis-*.whl")
    carried = set(zipfile.ZipFile(wheel).namelist())
    expected = {
        "trellis/migrations/" + path.relative_to(PACKAGE_MIGRATIONS).as_posix()
        for path in PACKAGE_MIGRATIONS.rglob("*")
        if path.suffix in (".py", ".mako") and "__pycache__" not in path.parts
    }
    assert {"trellis/migrations/env.py", "trellis/migrations/versions/0001_core.py"} <= expected
    assert expected <= carried, sorted(expected - carried)
    assert "trellis/static/favicon.ico" in carried
    assert (ROOT / "migrations").resolve() == PACKAGE_MIGRATIONS  # the documented top level still has it
