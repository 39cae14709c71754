"""Trellis Push Notifications module: device tokens, topics, sends through the outbox or FCM."""

from __future__ import annotations

from pathlib import Path

from flask import Flask

from trellis import ConsolePage, Module

from .config import PushConfig
from .hooks import UserCleanup
from .providers import PushState
from .routes import blp


def _init_app(app: Flask) -> None:
    app.extensions["pushNotifications"] = PushState()


# The files of the module's page in the admin console (see ConsolePage).
CONSOLE = Path(__file__).parent / "console"

module = Module(
    name="pushNotifications",
    requires=("authentication",),
    description="Device tokens, topic subscriptions, and notifications to users or topics (outbox or FCM)",
    blueprints=(blp,),
    config_schema=PushConfig,
    migrations=str(Path(__file__).parent / "migrations" / "versions"),
    console_pages=(ConsolePage("push", "Push notifications", str(CONSOLE / "push.html")),),
    hooks=(UserCleanup(),),
    init_app=_init_app,
)
