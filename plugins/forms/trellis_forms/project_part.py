"""The module's share of project as code: ``modules.forms.forms.<name>``, each form as the admin routes
show it, ``{fields, enabled, forwardTo}`` (no id or timestamps; submissions are data, not the project).
Pruning a form deletes its submissions with it, as ``DELETE /admin/forms/{formId}`` does."""

from __future__ import annotations

from typing import Any

from marshmallow import ValidationError
from sqlalchemy import select

from trellis import db
from trellis.errors import APIError
from trellis.project import ProjectInvalid, ProjectPart, invalid

from . import service
from .models import Form
from .schemas import FormCreateSchema

FIELDS = ("fields", "enabled", "forwardTo")


def _id(name: str) -> Any:
    """The id of the form called ``name`` (None: there is none)."""
    return db.session.execute(select(Form.id).where(Form.name == name)).scalar()


class FormsPart(ProjectPart):
    module = "forms"
    kinds = {"forms": "form"}

    def stored(self, key: str) -> dict[str, Any]:
        rows = db.session.execute(select(Form).order_by(Form.name)).scalars()
        return {row.name: {field: service.form_dict(row)[field] for field in FIELDS} for row in rows}

    def normalise(self, key: str, name: str, thing: Any, path: str) -> Any:
        """Checked as ``POST /admin/forms`` checks a body, defaults filled as it fills them (``enabled``: true,
        ``required``: false, ``forwardTo``: null)."""
        if not isinstance(thing, dict):
            raise ProjectInvalid(path, "must be an object with fields")
        if "name" in thing:
            raise ProjectInvalid(f"{path}.name", "a form's name is its key in the project")
        try:
            loaded = FormCreateSchema().load({**thing, "name": name})
            service.check_definition(name, _id(name), loaded["fields"])
        except (ValidationError, APIError) as exc:  # a field named as the spam honeypot
            raise invalid(path, exc) from None
        return {"fields": loaded["fields"], "enabled": loaded["enabled"], "forwardTo": loaded.get("forwardTo")}

    def create(self, key: str, name: str, thing: Any) -> None:
        service.create_form({"name": name, **thing})

    def update(self, key: str, name: str, thing: Any, current: Any) -> None:
        service.update_form(_id(name), thing)

    def delete(self, key: str, name: str, current: Any) -> None:
        service.delete_form(_id(name))
