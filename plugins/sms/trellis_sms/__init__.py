"""Trellis SMS module: text messages through the outbox (default) or Twilio."""

from __future__ import annotations

from pathlib import Path

from trellis import ConsolePage, Module

from .config import SmsConfig
from .routes import blp

# The files of the module's page in the admin console (see ConsolePage).
CONSOLE = Path(__file__).parent / "console"

module = Module(
    name="sms",
    description="Text messages to one or many phone numbers (outbox or Twilio)",
    blueprints=(blp,),
    config_schema=SmsConfig,
    migrations=str(Path(__file__).parent / "migrations" / "versions"),
    console_pages=(ConsolePage("sms", "SMS", str(CONSOLE / "sms.html")),),
)
