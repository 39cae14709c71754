"""Custom endpoint definitions (Conduit's body; ``docs/database.md``, "Custom endpoints"): their marshmallow schemas, the checks that
need the schema registry, and the admin writes. Running an endpoint is ``endpoint_calls.py``.

The marshmallow schemas check the shape, the enumerations (names, or Conduit's numbers) and the rules
between fields of the body itself; the routes load bodies through them, so ``/openapi.json`` documents
the definition. What needs the selected schema (fields exist, operators fit their types, ``Custom``
values convert) is checked here, on the loaded definition. Errors are keyed by their path
(``query.AND.0.operation``, ``inputs.1.name``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Any

import sqlalchemy as sa
from marshmallow import Schema, ValidationError, pre_load, validate, validates_schema
from marshmallow import fields as ma
from sqlalchemy.exc import IntegrityError

from trellis import audit, db
from trellis.db import new_id, utcnow
from trellis.errors import bad_request, conflict, not_found
from trellis.fields import BoundedList, JsonBoolean
from trellis.http import list_schema

from .fields import TYPES, Field, FieldError, check_json, coerce_query_value, format_datetime
from .models import CustomEndpointRecord
from .query import SPECIAL_FIELDS, split_list
from .registry import CompiledEndpoint, CompiledSchema, Snapshot, changed, compile_endpoint, snapshot

# Conduit's numbering (the index of each name), so Conduit clients keep working.
OPERATIONS = ("GET", "POST", "PUT", "DELETE", "PATCH")
LOCATIONS = ("body", "query", "urlParams")
COMPARISONS = ("eq", "ne", "gt", "gte", "lt", "lte", "in", "nin", "contains")
ACTIONS = ("set", "increment", "decrement", "append", "remove")
VALUE_TYPES = ("Input", "Context", "Custom")
INPUT_TYPES = tuple(t for t in TYPES if t != "Relation")
ENDPOINT_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,99}$")
INPUT_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,62}$")
CONTEXT_PATH = re.compile(r"^user(\.[A-Za-z_][A-Za-z0-9_]*)+$")
RUNTIME_PARAMS = ("skip", "limit", "sort", "populate", "scope")
CONDITION_KEYS = ("schemaField", "operation", "comparisonField")
MAX_QUERY_NODES = 100
# The Swagger tag of every custom-endpoint operation, admin routes and callers' paths alike: the name of
# the admin routes' blueprint (routes.py), so the request-time paths join the same group.
ENDPOINTS_TAG = "database-custom-endpoints"
REQUIRED = "Missing data for required field."


# ---- the shape (marshmallow) -----------------------------------------------------------------------------


class ConduitChoice(ma.Field):
    """One of ``names`` (any case) or Conduit's number for it (its index); loads as the name."""

    def __init__(self, names: Sequence[str], **kwargs: Any) -> None:
        self.names = tuple(names)
        numbers = f"0..{len(names) - 1}"
        super().__init__(
            validate=validate.OneOf(self.names, error=f"One of {', '.join(self.names)} (or {numbers})"),
            metadata={"type": "string", "description": f"or Conduit's number {numbers}, in this order"},
            **kwargs,
        )

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> Any:
        if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < len(self.names):
            return self.names[value]
        if isinstance(value, str):
            return next((name for name in self.names if name.upper() == value.upper()), value)
        return value  # OneOf refuses it


class EndpointAssignedValueSchema(Schema):
    """Where a value comes from: an input, the caller (``user._id``) or a constant."""

    type = ma.String(required=True, validate=validate.OneOf(VALUE_TYPES))
    value = ma.Raw(
        allow_none=True,
        metadata={"description": "Input: the input's name; Context: a path into the caller; Custom: the value"},
    )

    @validates_schema
    def _value_fits_the_type(self, data: dict[str, Any], **_: Any) -> None:
        value = data.get("value")
        if data["type"] == "Context" and not (isinstance(value, str) and CONTEXT_PATH.match(value)):
            raise ValidationError("A path into the caller, such as user._id", "value")
        # Looked up among the inputs' names later: a list or an object there is a wrong shape, not a name.
        if data["type"] == "Input" and not isinstance(value, str):
            raise ValidationError("The name of one of the endpoint's inputs", "value")


class EndpointComparedValueSchema(EndpointAssignedValueSchema):
    like = JsonBoolean(metadata={"description": "on `eq` of a String field: case-insensitive substring"})


class EndpointQueryNodeSchema(Schema):
    """A group ``{AND: [node, …]}`` / ``{OR: [node, …]}``, or a condition ``{schemaField, operation,
    comparisonField}``."""

    AND = BoundedList(ma.Nested(lambda: EndpointQueryNodeSchema()))
    OR = BoundedList(ma.Nested(lambda: EndpointQueryNodeSchema()))
    schemaField = ma.String(metadata={"description": "a field of the schema, `_id`, `createdAt` or `updatedAt`"})
    operation = ConduitChoice(COMPARISONS)
    comparisonField = ma.Nested(EndpointComparedValueSchema)

    @validates_schema(pass_original=True, skip_on_field_errors=False)
    def _group_or_condition(self, _data: dict[str, Any], original: Any, **_: Any) -> None:
        if not isinstance(original, dict):
            return
        groups = [key for key in ("AND", "OR") if key in original]
        given = [key for key in CONDITION_KEYS if key in original]
        if groups:
            if len(groups) > 1 or given:
                raise ValidationError("A group is exactly one of AND or OR with a list")
        elif not given:
            raise ValidationError(
                "A query node is {AND: [...]}, {OR: [...]} or {schemaField, operation, comparisonField}"
            )
        elif len(given) < len(CONDITION_KEYS):
            raise ValidationError({key: [REQUIRED] for key in CONDITION_KEYS if key not in given})


class EndpointInputSchema(Schema):
    name = ma.String(
        required=True,
        validate=[
            validate.Regexp(INPUT_NAME, error="Letters, digits and _, starting with a letter (at most 63)"),
            validate.NoneOf(RUNTIME_PARAMS, error="Reserved for pagination, sorting, populate and scope"),
        ],
    )
    type = ma.String(required=True, validate=validate.OneOf(INPUT_TYPES))
    location = ConduitChoice(LOCATIONS, required=True)
    optional = JsonBoolean(load_default=False)
    array = JsonBoolean(load_default=False, metadata={"description": "query: `a,b` or the parameter repeated"})

    @validates_schema
    def _url_parameter_is_single(self, data: dict[str, Any], **_: Any) -> None:
        if data["location"] == "urlParams":
            for flag in ("optional", "array"):
                if data[flag]:
                    raise ValidationError("A URL parameter is a single required value", flag)


class EndpointAssignmentSchema(Schema):
    schemaField = ma.String(required=True)
    action = ConduitChoice(ACTIONS, required=True)
    assignmentField = ma.Nested(EndpointAssignedValueSchema, required=True)


class PathErrorsSchema(Schema):
    """Errors keyed by path (``inputs.0.name``) rather than nested objects; a node's own error by its path."""

    def handle_error(self, error: ValidationError, data: Any, **kwargs: Any) -> None:
        raise ValidationError(by_path(error.normalized_messages()), data=error.data, valid_data=error.valid_data)


def by_path(messages: Any, prefix: str = "") -> dict[str, list[Any]]:
    """marshmallow's nested messages → ``{"query.AND.0.operation": [reason, …]}``."""
    out: dict[str, list[Any]] = {}
    if not isinstance(messages, dict):
        out[prefix or "_schema"] = messages if isinstance(messages, list) else [messages]
        return out
    for key, value in messages.items():
        path = prefix if key == "_schema" else f"{prefix}.{key}" if prefix else str(key)
        for inner, reasons in by_path(value, path).items():
            out.setdefault(inner, []).extend(reasons)
    return out


class EndpointBody(PathErrorsSchema):
    """A custom endpoint (Conduit's body). Enumerations take their names or Conduit's numbers."""

    whole = True  # changes are checked once merged over the current definition

    name = ma.String(
        required=True,
        validate=validate.Regexp(ENDPOINT_NAME, error="Letters, digits, _ and -, starting with a letter (at most 100)"),
    )
    operation = ConduitChoice(OPERATIONS, required=True)
    selectedSchema = ma.String(metadata={"description": "schema id or name"})
    selectedSchemaName = ma.String(metadata={"description": "Conduit's name for selectedSchema"})
    inputs = BoundedList(
        ma.Nested(EndpointInputSchema), metadata={"description": "URL parameters follow the name, in order"}
    )
    query = ma.Nested(
        EndpointQueryNodeSchema,
        allow_none=True,
        metadata={"description": "GET: optional; PUT, PATCH, DELETE: needed; POST: none"},
    )
    assignments = BoundedList(
        ma.Nested(EndpointAssignmentSchema), metadata={"description": "POST (set only), PUT, PATCH: at least one"}
    )
    authentication = JsonBoolean(metadata={"description": "callers need a user Bearer token"})
    paginated = JsonBoolean(metadata={"description": "GET: `skip` and `limit`"})
    sorted = JsonBoolean(metadata={"description": "GET: `sort`"})
    enabled = JsonBoolean()

    @pre_load
    def _empty_query_is_none(self, data: Any, **_: Any) -> Any:
        if isinstance(data, dict) and data.get("query") == {}:
            return {**data, "query": None}
        return data

    @validates_schema
    def _rules_between_fields(self, data: dict[str, Any], **_: Any) -> None:
        if not self.whole:
            return
        errors: dict[str, list[str]] = {}
        operation, query, assignments = data["operation"], data.get("query"), data.get("assignments") or []
        for flag in ("paginated", "sorted"):
            if operation != "GET" and data.get(flag):
                errors[flag] = ["Only GET endpoints paginate or sort"]
        if operation == "POST" and query is not None:
            errors["query"] = ["A POST endpoint creates a document; it has no query"]
        elif operation not in ("GET", "POST") and query is None:
            errors["query"] = [f"A {operation} endpoint needs a query (it would touch every document)"]
        elif query is not None and sum(1 for _ in _nodes(query)) > MAX_QUERY_NODES:
            errors["query"] = [f"At most {MAX_QUERY_NODES} conditions"]
        if operation in ("GET", "DELETE") and assignments:
            errors["assignments"] = [f"A {operation} endpoint has no assignments"]
        elif operation not in ("GET", "DELETE") and not assignments:
            errors["assignments"] = [f"A {operation} endpoint needs at least one assignment"]
        for index, assignment in enumerate(assignments):
            if operation == "POST" and assignment["action"] != "set":
                errors[f"assignments.{index}.action"] = ["A POST endpoint only sets fields"]
        names: set[str] = set()
        for index, item in enumerate(data.get("inputs") or []):
            if item["name"] in names:
                errors[f"inputs.{index}.name"] = ["Input names are unique"]
            names.add(item["name"])
        for path, source in value_sources(data):
            if source["type"] == "Input" and source.get("value") not in names:
                errors[f"{path}.value"] = [f"No input named {source.get('value')!r}"]
        if errors:
            raise ValidationError(errors)


class EndpointChangesBody(EndpointBody):
    """Changes: merged over the current definition, then checked as a whole."""

    whole = False

    name = ma.String(validate=validate.Regexp(ENDPOINT_NAME, error="Letters, digits, _ and -, starting with a letter"))
    operation = ConduitChoice(OPERATIONS)


class EndpointRecordSchema(Schema):
    _id = ma.String(required=True)
    name = ma.String(required=True)
    operation = ma.String(required=True, validate=validate.OneOf(OPERATIONS))
    selectedSchema = ma.String(required=True)
    selectedSchemaName = ma.String(allow_none=True)
    inputs = ma.List(ma.Nested(EndpointInputSchema))
    query = ma.Nested(EndpointQueryNodeSchema, allow_none=True)
    assignments = ma.List(ma.Nested(EndpointAssignmentSchema))
    authentication = JsonBoolean()
    paginated = JsonBoolean()
    sorted = JsonBoolean()
    enabled = JsonBoolean()
    path = ma.String(metadata={"description": "where the endpoint is served"})
    createdAt = ma.String(allow_none=True)
    updatedAt = ma.String(allow_none=True)
    version = ma.Integer(data_key="__v", attribute="__v")


EndpointListSchema = list_schema("DatabaseCustomEndpointList", "customEndpoints", EndpointRecordSchema)


def _nodes(node: dict[str, Any], path: str = "query") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every node of a loaded query tree with its path, groups before their children."""
    yield path, node
    for kind in ("AND", "OR"):
        for index, child in enumerate(node.get(kind, ())):
            yield from _nodes(child, f"{path}.{kind}.{index}")


def _conditions(query: dict[str, Any] | None) -> Iterator[tuple[str, dict[str, Any]]]:
    if query is not None:
        yield from ((path, node) for path, node in _nodes(query) if "schemaField" in node)


def value_sources(data: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for path, node in _conditions(data.get("query")):
        yield f"{path}.comparisonField", node["comparisonField"]
    for index, assignment in enumerate(data.get("assignments") or []):
        yield f"assignments.{index}.assignmentField", assignment["assignmentField"]


# ---- checks against the schema registry ----------------------------------------------------------------


def normalise(body: dict[str, Any], snap: Snapshot, current: CompiledEndpoint | None = None) -> dict[str, Any]:
    """A loaded create body (or changes, merged over ``current`` and loaded again) → the stored definition."""
    if current is not None:
        merged = {**as_body(current), **body}
        if "selectedSchemaName" in body and "selectedSchema" not in body:
            del merged["selectedSchema"]
        try:
            body = EndpointBody().load(merged)
        except ValidationError as exc:
            raise _invalid(exc.normalized_messages()) from None
    selected = body.get("selectedSchema") or body.get("selectedSchemaName")
    schema = snap.by_id.get(selected) or snap.by_name.get(selected) if selected else None
    if schema is None or schema.table is None:
        raise _invalid({"selectedSchema": ["No schema with documents has this id or name"]})
    errors = _registry_errors(body, schema)
    if errors:
        raise _invalid(errors)
    return {
        "name": body["name"],
        "operation": body["operation"],
        "schema_id": schema.id,
        "inputs": body.get("inputs") or [],
        "query": body.get("query"),
        "assignments": body.get("assignments") or [],
        "authentication": body.get("authentication", False),
        "paginated": body.get("paginated", False),
        "sorted": body.get("sorted", False),
        "enabled": body.get("enabled", True),
    }


def _invalid(errors: dict[str, Any]) -> Exception:
    errors = by_path(errors)
    key, reasons = next(iter(errors.items()))
    return bad_request(f"Invalid custom endpoint: {key}: {reasons[0]}", errors)


def as_body(endpoint: CompiledEndpoint) -> dict[str, Any]:
    return {
        "name": endpoint.name,
        "operation": endpoint.operation,
        "selectedSchema": endpoint.schema_id,
        "inputs": list(endpoint.inputs),
        "query": endpoint.query,
        "assignments": list(endpoint.assignments),
        "authentication": endpoint.authentication,
        "paginated": endpoint.paginated,
        "sorted": endpoint.sorted,
        "enabled": endpoint.enabled,
    }


def _registry_errors(body: dict[str, Any], schema: CompiledSchema) -> dict[str, list[str]]:
    errors: dict[str, list[str]] = {}
    for path, node in _conditions(body.get("query")):
        field = schema_field(schema, node["schemaField"])
        if field is None:
            errors[f"{path}.schemaField"] = [f"Not a field of {schema.name}"]
            continue
        reason = _operation_misfit(field, node["operation"])
        if reason:
            errors[f"{path}.operation"] = [reason]
            continue
        element = Field(name=field.name, type=field.type) if field.array else field
        many = node["operation"] in ("in", "nin")
        _check_custom(node["comparisonField"], element, many, f"{path}.comparisonField.value", errors)
    for index, assignment in enumerate(body.get("assignments") or []):
        path, name, action = f"assignments.{index}", assignment["schemaField"], assignment["action"]
        field = schema.fields.get(name)
        if field is None:
            errors[f"{path}.schemaField"] = [f"Not a field of {schema.name}"]
            continue
        if action in ("increment", "decrement") and not (field.type == "Number" and not field.array):
            errors[f"{path}.action"] = [f"{action} needs a Number field"]
            continue
        if action in ("append", "remove") and not field.array:
            errors[f"{path}.action"] = [f"{action} needs an array field"]
            continue
        target = assigned_field(field, action)
        _check_custom(assignment["assignmentField"], target, False, f"{path}.assignmentField.value", errors)
    return errors


def _operation_misfit(field: Field, operation: str) -> str | None:
    if field.type == "JSON":
        return f"{field.name} is JSON and cannot be compared"
    if field.array and operation in ("gt", "gte", "lt", "lte"):
        return f"{field.name} is an array: use eq, ne, in, nin or contains"
    if not field.array and operation == "contains" and field.type not in ("String", "ObjectId", "Relation"):
        return f"contains needs a text or array field; {field.name} is {field.type}"
    if field.type == "Boolean" and operation in ("gt", "gte", "lt", "lte"):
        return f"{field.name} is Boolean: only eq, ne, in and nin apply"
    return None


def _check_custom(source: dict[str, Any], field: Field, many: bool, key: str, errors: dict[str, list[str]]) -> None:
    if source["type"] != "Custom":
        return
    value = source.get("value")
    try:
        for item in split_list(value) if many else [value]:
            coerce(field, item)
    except FieldError as exc:
        errors[key] = [str(exc)]


def schema_field(schema: CompiledSchema, name: str) -> Field | None:
    """A field a query may name: the schema's own, or ``_id``, ``createdAt``, ``updatedAt``."""
    if name in SPECIAL_FIELDS:
        return SPECIAL_FIELDS[name][0]
    return schema.fields.get(name)


def assigned_field(field: Field, action: str) -> Field:
    """What an assignment's value must be: an element for append/remove, any JSON for setting an array."""
    if action in ("append", "remove"):
        return Field(name=field.name, type=field.type)
    return Field(name=field.name, type="JSON") if field.array else field


def coerce(field: Field, value: Any) -> Any:
    """A constant or an input's text → the field's type (FieldError if it does not convert)."""
    if field.type == "JSON":
        return check_json(value)
    return coerce_query_value(field.type, value)


# ---- admin writes -----------------------------------------------------------------------------------


def create(body: dict[str, Any]) -> dict[str, Any]:
    """Store a new endpoint from a body loaded by ``EndpointBody``."""
    snap = snapshot()
    values = normalise(body, snap)
    if values["name"] in snap.endpoints:
        raise conflict(f"A custom endpoint named {values['name']!r} exists", {"name": ["Already taken"]})
    now = utcnow()
    row = CustomEndpointRecord(id=new_id(), version=0, created_at=now, updated_at=now, **values)
    audit.record("database", "customEndpoint.create", row.id, body)
    return _save(row, snap)


def update(endpoint_id: str, body: dict[str, Any]) -> dict[str, Any]:
    """Apply changes loaded by ``EndpointChangesBody`` (checked once merged over the current definition)."""
    snap = snapshot()
    current = find(snap, endpoint_id)
    values = normalise(body, snap, current)
    other = snap.endpoints.get(values["name"])
    if other is not None and other.id != current.id:
        raise conflict(f"A custom endpoint named {values['name']!r} exists", {"name": ["Already taken"]})
    row = db.session.get_one(CustomEndpointRecord, current.id)
    for key, value in values.items():
        setattr(row, key, value)
    row.version += 1
    row.updated_at = utcnow()
    audit.record("database", "customEndpoint.update", row.id, body)
    return _save(row, snap)


def _save(row: CustomEndpointRecord, snap: Snapshot) -> dict[str, Any]:
    db.session.add(row)
    try:
        db.session.flush()
    except IntegrityError:
        db.session.rollback()
        raise conflict(f"A custom endpoint named {row.name!r} exists", {"name": ["Already taken"]}) from None
    out = record(compile_endpoint(row), snap)
    changed()
    db.session.commit()
    return out


def delete(endpoint_id: str) -> str:
    endpoint = find(snapshot(), endpoint_id)
    db.session.execute(sa.delete(CustomEndpointRecord).where(CustomEndpointRecord.id == endpoint.id))
    audit.record("database", "customEndpoint.delete", endpoint.id, {"name": endpoint.name})
    changed()
    db.session.commit()
    return endpoint.id


def find(snap: Snapshot, endpoint_id: str) -> CompiledEndpoint:
    for endpoint in snap.endpoints.values():
        if endpoint.id == endpoint_id or endpoint.name == endpoint_id:
            return endpoint
    raise not_found(f"No custom endpoint with id {endpoint_id!r}")


def record(endpoint: CompiledEndpoint, snap: Snapshot) -> dict[str, Any]:
    schema = snap.by_id.get(endpoint.schema_id)
    return {
        "_id": endpoint.id,
        **as_body(endpoint),
        "selectedSchemaName": schema.name if schema else None,
        "path": path_of(endpoint),
        "createdAt": format_datetime(endpoint.created_at) if endpoint.created_at else None,
        "updatedAt": format_datetime(endpoint.updated_at) if endpoint.updated_at else None,
        "__v": endpoint.version,
    }


def path_of(endpoint: CompiledEndpoint) -> str:
    url = [f"{{{i['name']}}}" for i in endpoint.inputs if i["location"] == "urlParams"]
    return "/".join([f"/database/function/{endpoint.name}", *url])


def declares_scope(endpoint: CompiledEndpoint) -> bool:
    """An endpoint defined before ``scope`` was reserved (RUNTIME_PARAMS) may take an input of that name:
    it keeps it, and cannot act as a team."""
    return any(item["name"] == "scope" for item in endpoint.inputs)
