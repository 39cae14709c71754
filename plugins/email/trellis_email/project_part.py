"""The module's share of project as code: ``modules.email.templates.<name>``, each template as the admin
routes show it, ``{subject, body, variables}`` (no id, timestamps or the provider's copy: ``externalId``
belongs to the server that uploaded it)."""

from __future__ import annotations

from typing import Any

from marshmallow import ValidationError
from sqlalchemy import select

from trellis import db
from trellis.errors import APIError
from trellis.project import ProjectInvalid, ProjectPart, invalid

from . import service
from .models import EmailTemplate
from .schemas import EmailTemplateCreateSchema

FIELDS = ("subject", "body", "variables")


def _id(name: str) -> Any:
    return db.session.execute(select(EmailTemplate.id).where(EmailTemplate.name == name)).scalar_one()


class TemplatesPart(ProjectPart):
    module = "email"
    kinds = {"templates": "template"}

    def stored(self, key: str) -> dict[str, Any]:
        rows = db.session.execute(select(EmailTemplate).order_by(EmailTemplate.name)).scalars()
        return {row.name: {field: service.template_dict(row)[field] for field in FIELDS} for row in rows}

    def normalise(self, key: str, name: str, thing: Any, path: str) -> Any:
        """Checked as ``POST /admin/email/templates`` checks a body; ``variables`` derived as it derives them
        (left out: the placeholders; given: they must agree)."""
        if not isinstance(thing, dict):
            raise ProjectInvalid(path, "must be an object with subject and body")
        if "name" in thing:
            raise ProjectInvalid(f"{path}.name", "a template's name is its key in the project")
        try:
            loaded = EmailTemplateCreateSchema().load({**thing, "name": name})
            variables = service.derive_variables(loaded["subject"], loaded["body"], loaded.get("variables"))
        except (
            ValidationError,
            APIError,
        ) as exc:  # a placeholder that does not parse, variables that disagree with them
            raise invalid(path, exc) from None
        return {"subject": loaded["subject"], "body": loaded["body"], "variables": variables}

    def create(self, key: str, name: str, thing: Any) -> None:
        service.create_template({"name": name, **thing})

    def update(self, key: str, name: str, thing: Any, current: Any) -> None:
        service.update_template(_id(name), thing)

    def delete(self, key: str, name: str, current: Any) -> None:
        service.delete_template(_id(name))
