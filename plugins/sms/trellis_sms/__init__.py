"""Trellis SMS module: text messages through the outbox (default) or Twilio."""

from __future__ import annotations

from pathlib import Path

from trellis import Module

from .config import SmsConfig
from .routes import blp

module = Module(
    name="sms",
    description="Text messages to one or many phone numbers (outbox or Twilio)",
    blueprints=(blp,),
    config_schema=SmsConfig,
    migrations=str(Path(__file__).parent / "migrations" / "versions"),
)
