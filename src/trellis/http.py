"""HTTP building blocks every module uses: the Blueprint, list arguments, common response schemas."""
from __future__ import annotations

from typing import Any, Sequence

import flask_smorest
from marshmallow import INCLUDE, Schema, fields, validate
from sqlalchemy import Select, func, select
from webargs.flaskparser import FlaskParser

from . import db

MAX_LIMIT = 1000
DEFAULT_LIMIT = 25


class _Parser(FlaskParser):
    # Invalid input is a 400 (CONTRACT.md), not webargs' 422.
    DEFAULT_VALIDATION_STATUS = 400


class Blueprint(flask_smorest.Blueprint):
    """flask-smorest Blueprint whose argument errors are 400 and documented as such."""

    ARGUMENTS_PARSER = _Parser()


class ListArgs(Schema):
    """``skip``/``limit`` of every list route (limit above 1000 → 400)."""

    skip = fields.Integer(load_default=0, validate=validate.Range(min=0, max=2**31 - 1))
    limit = fields.Integer(load_default=DEFAULT_LIMIT, validate=validate.Range(min=1, max=MAX_LIMIT))


class FreeFormSchema(Schema):
    """A JSON object whose keys another layer validates (module configs, documents).

    Loads every key as is and dumps the object unchanged; documented as an open object.
    """

    class Meta:
        unknown = INCLUDE

    def dump(self, obj: Any, *, many: bool | None = None) -> Any:
        return obj


class DeletedSchema(Schema):
    _id = fields.String(required=True)
    deleted = fields.Boolean(required=True)


class MessageSchema(Schema):
    message = fields.String(required=True)


def deleted(record_id: str) -> dict[str, Any]:
    return {"_id": record_id, "deleted": True}


def list_schema(name: str, plural: str, item: type[Schema] | Schema) -> type[Schema]:
    """``{<plural>: [item], count}`` response schema for a list route."""
    return Schema.from_dict(
        {plural: fields.List(fields.Nested(item), required=True), "count": fields.Integer(required=True)},
        name=name,
    )


def paginate(query: Select, skip: int, limit: int, order_by: Sequence[Any] = ()) -> tuple[list[Any], int]:
    """Rows of ``query`` for one page and the total before skip/limit."""
    total = db.session.execute(select(func.count()).select_from(query.order_by(None).subquery())).scalar_one()
    page = query.order_by(*order_by).offset(skip).limit(limit) if order_by else query.offset(skip).limit(limit)
    return list(db.session.execute(page).scalars()), total
