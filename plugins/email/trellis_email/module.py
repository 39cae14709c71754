"""The Email module's declaration (entry point ``trellis.modules: email``)."""

from pathlib import Path

from trellis import ConsolePage, Module, OwnedSchema
from trellis.project import taking_part

from . import outbox
from .config import EmailConfigSchema
from .project_part import TemplatesPart
from .routes import blp

# Listed by the Database module's schema list with ownerModule "email" (the data lives in email_templates).
TEMPLATE_SCHEMA = OwnedSchema(
    name="EmailTemplate",
    fields={
        "name": {"type": "String", "required": True, "unique": True},
        "subject": {"type": "String", "required": True},
        "body": {"type": "String", "required": True},
        "variables": ["String"],
        "externalId": {"type": "String"},
    },
    owner_module="email",
)

# The files of the module's page in the admin console (see ConsolePage).
CONSOLE = Path(__file__).parent / "console"

module = Module(
    name="email",
    blueprints=(blp,),
    config_schema=EmailConfigSchema,
    migrations=str(Path(__file__).parent / "migrations" / "versions"),
    console_pages=(ConsolePage("email", "Email", str(CONSOLE / "email.html"), str(CONSOLE / "email.js")),),
    owned_schemas=(TEMPLATE_SCHEMA,),
    settings=outbox.SETTINGS,
    init_app=outbox.settings_of,
    background=(outbox.start,),
    hooks=(taking_part(TemplatesPart()),),
    description="Sends raw and template e-mail through an outbox, SMTP, Mailgun or SendGrid",
)
