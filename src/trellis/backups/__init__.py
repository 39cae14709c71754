"""Backups and restore: the core's own module (``backups``), loaded like any other through its entry point.

One archive holds every table of the core and of every loaded module (found through the shared metadata
and the modules' ``trellis_backup_tables`` hook) and every stored file (``trellis_backup_blobs``), from one
snapshot; it restores on SQLite and PostgreSQL alike. See ``docs/operations.md``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from flask import Flask
from marshmallow import ValidationError, fields, validate, validates

from ..module_config import ModuleConfigSchema
from ..modules import ConsolePage, Module
from . import schedule
from .routes import blp


class BackupsConfig(ModuleConfigSchema):
    schedule = fields.String(
        load_default=None,
        allow_none=True,
        metadata={"description": "cron expression (`0 3 * * *`: every day at 03:00 UTC); none: no scheduled backups"},
    )
    keep = fields.Integer(
        load_default=7, validate=validate.Range(min=1, max=10_000), metadata={"description": "scheduled backups kept"}
    )
    storage = fields.String(
        load_default="local",
        validate=validate.OneOf(["local", "s3"]),
        metadata={
            "description": "where archives are kept: `local` (TRELLIS_BACKUP_PATH) or `s3` (the Storage module's "
            "S3 bucket; written locally first, and fetched back to restore or download)"
        },
    )

    @validates("schedule")
    def _cron(self, value: str | None, **_: Any) -> None:
        if value is not None and not schedule.valid(value):
            raise ValidationError("Not a cron expression (five fields: minute hour day month weekday)")


def _init_app(app: Flask) -> None:
    if not app.config.get("BACKUP_PATH"):
        app.config["BACKUP_PATH"] = str(Path(app.instance_path) / "backups")


CONSOLE = Path(__file__).parent / "console"

module = Module(
    name="backups",
    blueprints=(blp,),
    config_schema=BackupsConfig,
    console_pages=(ConsolePage("backups", "Backups", str(CONSOLE / "backups.html")),),
    init_app=_init_app,
    background=(schedule.start,),
    description="Backups and restore of every table and stored file",
)

__all__ = ["module"]
