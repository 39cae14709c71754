"""Trellis Forms module: admin-defined forms, public submissions, forwarding by e-mail."""

from pathlib import Path

from trellis import ConsolePage, EventTopic, Module, OwnedSchema
from trellis.project import taking_part

from .config import FormsConfigSchema
from .project_part import FormsPart
from .routes import blp
from .schemas import FormSubmissionSchema

# Listed by the Database module's schema list with ownerModule "forms" (the data lives in forms tables).
FORM_SCHEMA = OwnedSchema(
    name="Form",
    fields={
        "name": {"type": "String", "required": True, "unique": True},
        "fields": {"type": "JSON", "required": True},
        "enabled": {"type": "Boolean", "default": True},
        "forwardTo": {"type": "String"},
    },
    owner_module="forms",
)
SUBMISSION_SCHEMA = OwnedSchema(
    name="FormSubmission",
    fields={
        "form": {"type": "Relation", "model": "Form", "required": True},
        "data": {"type": "JSON", "required": True},
        "forwardStatus": {"type": "String"},
        "forwardError": {"type": "String"},
    },
    owner_module="forms",
)

# The files of the module's page in the admin console (see ConsolePage).
CONSOLE = Path(__file__).parent / "console"

module = Module(
    name="forms",
    uses=("email",),  # forwards submissions by mail when the Email module is there
    blueprints=(blp,),
    config_schema=FormsConfigSchema,
    migrations=str(Path(__file__).parent / "migrations" / "versions"),
    console_pages=(ConsolePage("forms", "Forms", str(CONSOLE / "forms.html")),),
    owned_schemas=(FORM_SCHEMA, SUBMISSION_SCHEMA),
    hooks=(taking_part(FormsPart()),),
    events=(EventTopic("forms.submission.create", "A form received a valid submission", FormSubmissionSchema),),
    description="Admin-defined forms that accept validated public submissions, forwarded by e-mail when Email is active",
)
