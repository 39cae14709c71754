"""Trellis Forms module: admin-defined forms, public submissions, forwarding by e-mail."""
from pathlib import Path

from trellis import Module

from .config import FormsConfigSchema
from .routes import blp

module = Module(
    name="forms",
    blueprints=(blp,),
    config_schema=FormsConfigSchema,
    migrations=str(Path(__file__).parent / "migrations" / "versions"),
    description="Admin-defined forms that accept validated public submissions, forwarded by e-mail when Email is active",
)
