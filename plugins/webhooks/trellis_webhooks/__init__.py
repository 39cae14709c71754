"""Trellis Webhooks module: events of every module, delivered signed and retried to admin-registered URLs."""

from pathlib import Path

from flask import Flask

from trellis import ConsolePage, Module
from trellis.project import taking_part

from . import worker
from .config import WebhooksConfigSchema
from .deliveries import runtime_of
from .project_part import WebhooksPart
from .routes import blp
from .settings import SETTINGS


def _init_app(app: Flask) -> None:
    runtime_of(app)  # settings are checked at start-up, not on the first delivery


# The files of the module's page in the admin console (see ConsolePage).
CONSOLE = Path(__file__).parent / "console"

module = Module(
    name="webhooks",
    blueprints=(blp,),
    config_schema=WebhooksConfigSchema,
    migrations=str(Path(__file__).parent / "migrations" / "versions"),
    settings=SETTINGS,
    init_app=_init_app,
    background=(worker.start,),
    hooks=(taking_part(WebhooksPart()),),
    console_pages=(ConsolePage("webhooks", "Webhooks", str(CONSOLE / "webhooks.html"), str(CONSOLE / "webhooks.js")),),
    description="Signed, retried, logged deliveries of the modules' events to URLs that admins register",
)
