"""The Email module's declaration (entry point ``trellis.modules: email``)."""
from pathlib import Path

from trellis import Module

from .config import EmailConfigSchema
from .routes import blp

module = Module(
    name="email",
    blueprints=(blp,),
    config_schema=EmailConfigSchema,
    migrations=str(Path(__file__).parent / "migrations" / "versions"),
    description="Sends raw and template e-mail through an outbox, SMTP, Mailgun or SendGrid",
)
