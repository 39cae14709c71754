"""The query parameters of a schema's list, changes and aggregate routes: paging, ``search`` and a filter per
field and operator, as the REST routes accept them."""

from __future__ import annotations

from typing import Any

from . import search as full_text
from .fields import Field
from .openapi_common import value_schema
from .registry import CompiledSchema

LIST_PAGING = 6  # skip, limit, sort, select, populate, count: the first parameters of a list


def list_parameters(schema: CompiledSchema) -> list[dict[str, Any]]:
    params: list[dict[str, Any]] = [
        {"name": "skip", "in": "query", "schema": {"type": "integer", "minimum": 0, "default": 0}},
        {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 25}},
        {"name": "sort", "in": "query", "schema": {"type": "string"}, "description": "`-price,title`"},
        {"name": "select", "in": "query", "schema": {"type": "string"}},
        {
            "name": "populate",
            "in": "query",
            "schema": {"type": "string"},
            "description": "Relation fields: "
            + (", ".join(n for n, f in sorted(schema.fields.items()) if f.type == "Relation") or "none"),
        },
    ]
    params.append(
        {
            "name": "count",
            "in": "query",
            "schema": {"type": "string", "enum": ["none"]},
            "description": "`none` leaves out the total count",
        }
    )
    searchable = sorted(full_text.searchable_fields(schema.fields)) if (schema.storage or {}).get("search") else []
    if searchable:
        params.append(
            {
                "name": "search",
                "in": "query",
                "schema": {"type": "string", "maxLength": full_text.MAX_SEARCH_LENGTH},
                "example": "red sho",
                "description": f"words to find in {', '.join(searchable)}: every word in some field, the last one "
                "also as a prefix, `-word` excludes; best match first unless `sort` is given",
            }
        )
    # By name: the document is the same whatever order the fields were defined in (a promoted project).
    for name, field in sorted(schema.fields.items()):
        if field.type == "JSON":
            params.append(_operator_parameter(name, "$exists", {"type": "boolean"}, "the field is present"))
            continue
        item = value_schema(Field(name=name, type=field.type, model=field.model))
        if name != "search":  # the list's full-text parameter; such a field filters with search[$eq]
            params.append(
                {
                    "name": name,
                    "in": "query",
                    "schema": item,
                    "required": False,
                    "description": f"equals (also {name}<v for $lt and {name}>v for $gt)",
                }
            )
        for op in _operators(field):
            if op in ("$in", "$nin"):
                value: dict[str, Any] = {"type": "array", "items": item}
                described = "one of these (comma-separated)" if op == "$in" else "none of these (comma-separated)"
                params.append(_operator_parameter(name, op, value, described, explode=False))
            elif op == "$exists":
                params.append(_operator_parameter(name, op, {"type": "boolean"}, "the field is present"))
            elif op == "$contains":
                params.append(
                    _operator_parameter(
                        name,
                        op,
                        {"type": "string"},
                        "array holds the value" if field.array else "case-insensitive substring",
                    )
                )
            else:
                params.append(_operator_parameter(name, op, item, OPERATOR_TEXT[op]))
    return params


OPERATOR_TEXT = {"$ne": "not equal", "$lt": "less than", "$lte": "at most", "$gt": "greater than", "$gte": "at least"}


def _operators(field: Field) -> list[str]:
    """The filter operators of a field, as the REST list route accepts them (query.py)."""
    if field.array:
        return ["$ne", "$in", "$nin", "$contains", "$exists"]
    ops = ["$ne", "$lt", "$lte", "$gt", "$gte", "$in", "$nin", "$exists"]
    if field.type in ("String", "ObjectId", "Relation"):
        ops.append("$contains")
    return ops


def _operator_parameter(name: str, op: str, schema: dict[str, Any], text: str, explode: bool = True) -> dict[str, Any]:
    """``price[$lt]``: curl needs ``-g`` for the brackets; a generator names the argument ``price_lt``."""
    param: dict[str, Any] = {
        "name": f"{name}[{op}]",
        "in": "query",
        "required": False,
        "schema": schema,
        "description": f"{name}: {text}",
    }
    if not explode:
        param.update(style="form", explode=False)
    return param


def aggregate_parameters(schema: CompiledSchema) -> list[dict[str, Any]]:
    """The aggregate's own query parameters (aggregates.py); the field filters follow them."""
    numbers = [name for name, field in sorted(schema.fields.items()) if field.type == "Number" and not field.array]
    dates = ["createdAt", "updatedAt"] if schema.timestamps else []
    dates += [name for name, field in sorted(schema.fields.items()) if field.type == "Date" and not field.array]
    text = {"type": "string"}
    return [
        {
            "name": "groupBy",
            "in": "query",
            "schema": text,
            "description": "up to 5 single-valued fields, comma-separated; a Date as `field:day|week|month|year` "
            "(UTC, weeks from Monday); none: one group of every match",
        },
        {"name": "count", "in": "query", "schema": {"type": "boolean"}, "description": "documents per group"},
        *(
            {"name": op, "in": "query", "schema": text, "description": f"fields, comma-separated: {', '.join(names)}"}
            for op, names in (("sum", numbers), ("avg", numbers), ("min", numbers + dates), ("max", numbers + dates))
        ),
        {
            "name": "sort",
            "in": "query",
            "schema": text,
            "description": "`count`, a groupBy field or `<op>.<field>` (`sum.price`), `-` for descending; "
            "comma-separated, 5 at most. Default: by the group keys",
        },
        {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 100}},
        {
            "name": "where",
            "in": "query",
            "schema": text,
            "description": 'the filters as JSON, with `$and`/`$or`: `{"price": {"$lt": 10}}`',
        },
    ]
