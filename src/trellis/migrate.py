"""Alembic, run against the app's engine with the core's and every loaded module's versions dirs."""

from __future__ import annotations

import os
from pathlib import Path

from alembic import command
from alembic.config import Config
from flask import Flask

# The repository's migrations/ environment (the core is installed from the checkout).
DEFAULT_SCRIPT_LOCATION = Path(__file__).resolve().parents[2] / "migrations"


def script_location() -> Path:
    return Path(os.environ.get("TRELLIS_MIGRATIONS_PATH", DEFAULT_SCRIPT_LOCATION))


def alembic_config(app: Flask) -> Config:
    location = script_location()
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
