"""Alembic, run against the app's engine with the core's and every loaded module's versions dirs."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from flask import Flask

from .modules import ENTRY_POINT_GROUP, Module

# The core's Alembic environment and versions travel inside the package, as every module's do (a wheel of
# trellis carries them); the checkout's top-level migrations/ is a link to it.
DEFAULT_SCRIPT_LOCATION = Path(__file__).resolve().parent / "migrations"


def alembic_config(app: Flask) -> Config:
    location = Path(app.config["MIGRATIONS_PATH"] or DEFAULT_SCRIPT_LOCATION)
    if not (location / "env.py").exists():
        raise RuntimeError(f"No Alembic environment at {location}; set TRELLIS_MIGRATIONS_PATH")
    cfg = Config()
    cfg.set_main_option("script_location", str(location))
    dirs = [str(location / "versions")]
    dirs += [m.migrations for m in app.extensions["trellis"].modules if m.migrations]
    # Alembic splits version_locations on the path separator we choose here.
    cfg.set_main_option("path_separator", "os")
    cfg.set_main_option("version_locations", os.pathsep.join(dirs))
    cfg.attributes["engine"] = app.extensions["trellis"].engine
    return cfg


def upgrade(app: Flask, revision: str = "heads") -> None:
    with app.app_context():
        command.upgrade(alembic_config(app), revision)


def downgrade(app: Flask, revision: str = "base") -> None:
    with app.app_context():
        command.downgrade(alembic_config(app), revision)


class RevisionError(RuntimeError):
    """A module revision that cannot be generated; the message says why."""


def module_package(module: Module) -> str:
    """The top-level package behind a module's entry point (``trellis_bookmarks`` for ``bookmarks``)."""
    for ep in entry_points(group=ENTRY_POINT_GROUP, name=module.name):
        return ep.module.partition(".")[0]
    raise RevisionError(f"module {module.name!r} is not installed through a {ENTRY_POINT_GROUP!r} entry point")


def module_tables(module: Module) -> set[str]:
    """Names of the tables mapped by models defined in the module's own package."""
    from .db import Base

    package = module_package(module)
    return {
        table.name
        for mapper in Base.registry.mappers
        if mapper.class_.__module__ == package or mapper.class_.__module__.startswith(package + ".")
        for table in mapper.tables
    }


def _next_number(script: ScriptDirectory, branch: str) -> int:
    """1 + the highest ``<branch>_NNNN`` revision id of the branch (ids follow that pattern)."""
    pattern = re.compile(rf"{re.escape(branch)}_(\d+)")
    numbers = [
        int(match.group(1))
        for rev in script.iterate_revisions(f"{branch}@head", "base")
        if (match := pattern.fullmatch(rev.revision))
    ]
    return max(numbers, default=0) + 1


def revision(app: Flask, module_name: str, message: str) -> Path:
    """Autogenerate the next revision of ``module_name``'s branch into its versions directory.

    Only the module's own tables are compared (other modules' tables, and tables the Database module
    creates at run time, are not its business). The database must be at every head first. Returns
    the new file; ids and file names follow the modules' ``<name>_NNNN`` / ``NNNN_<slug>.py`` pattern.
    """
    trellis = app.extensions["trellis"]
    module = next((m for m in trellis.modules if m.name == module_name), None)
    if module is None:
        loaded = ", ".join(m.name for m in trellis.modules) or "none"
        raise RevisionError(f"module {module_name!r} is not loaded (loaded: {loaded}); check TRELLIS_MODULES")
    if not module.migrations:
        raise RevisionError(f"module {module_name!r} declares no migrations directory")
    tables = module_tables(module)
    with app.app_context():
        cfg = alembic_config(app)
        script = ScriptDirectory.from_config(cfg)
        if not script.get_revisions(module_name):
            raise RevisionError(f"no revision carries the branch label {module_name!r}; its first revision must")
        number = _next_number(script, module_name)
        cfg.set_main_option("file_template", f"{number:04d}_%%(slug)s")
        cfg.attributes["include_tables"] = tables
        created = command.revision(
            cfg,
            message=message,
            autogenerate=True,
            head=f"{module_name}@head",
            version_path=module.migrations,
            rev_id=f"{module_name}_{number:04d}",
        )
    scripts = created if isinstance(created, list) else [created]
    assert scripts[0] is not None  # autogenerate with a head always writes a script
    path = Path(scripts[0].path)
    tidy(path)
    return path


def ruff_executable() -> str | None:
    """The ruff of this environment (the ``ruff`` package's binary, else one on ``PATH``), or None."""
    try:
        from ruff.__main__ import find_ruff_bin
    except ImportError:
        return shutil.which("ruff")
    return find_ruff_bin()


def tidy(path: Path) -> None:
    """Lint-fix and format a generated revision with ruff, under the settings of the project it lives in.

    Autogenerate writes single-quoted strings and cannot know whether ``trellis`` is first-party (a module
    in this repository) or third-party (a module of its own): ruff, finding the nearest configuration, does.
    Without ruff the file stays as Alembic wrote it.
    """
    ruff = ruff_executable()
    if ruff is None:
        return
    for step in (["check", "--fix-only", "--quiet"], ["format", "--quiet"]):
        # An explicit file is checked even where the configuration excludes migrations/versions.
        subprocess.run([ruff, *step, str(path)], cwd=path.parent, check=False, capture_output=True)


def include_object(tables: set[str] | None):
    """Alembic ``include_object`` that keeps autogenerate to ``tables`` (None: every table)."""

    def include(obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any) -> bool:
        if tables is None:
            return True
        table = name if type_ == "table" else getattr(getattr(obj, "table", None), "name", None)
        return table in tables

    return include
