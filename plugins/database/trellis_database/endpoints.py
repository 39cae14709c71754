"""Custom endpoints (Conduit's body, CONTRACT.md): definition checks and execution.

An endpoint names a schema, an HTTP operation, its inputs (body, query string or URL segments), a
query tree over the schema's fields whose values come from inputs, the caller (``Context``) or
constants (``Custom``), and for writes a list of assignments. It runs through the same compiler and
document functions as the generated routes.
"""

from __future__ import annotations

import copy
import re
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError

from trellis import audit, db
from trellis.credentials import Identity
from trellis.db import new_id, utcnow
from trellis.errors import APIError, bad_request, conflict, not_found, unauthorized

from . import documents
from .access import check_permission
from .fields import TYPES, Field, FieldError, check_json, check_scalar, coerce_query_value, format_datetime
from .models import CustomEndpointRecord
from .query import SPECIAL_FIELDS, Condition, Group, parse_populate, split_list
from .registry import CompiledEndpoint, CompiledSchema, Snapshot, changed, compile_endpoint, snapshot

# Conduit's numbering, so Conduit clients keep working.
OPERATIONS = {0: "GET", 1: "POST", 2: "PUT", 3: "DELETE", 4: "PATCH"}
LOCATIONS = {0: "body", 1: "query", 2: "urlParams"}
COMPARISONS = ("eq", "ne", "gt", "gte", "lt", "lte", "in", "nin", "contains")
ACTIONS = ("set", "increment", "decrement", "append", "remove")
VALUE_TYPES = ("Input", "Context", "Custom")
INPUT_TYPES = tuple(t for t in TYPES if t != "Relation")
ENDPOINT_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,99}$")
INPUT_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,62}$")
RUNTIME_PARAMS = ("skip", "limit", "sort", "populate")
MAX_AFFECTED = 1000
MAX_QUERY_NODES = 100


class Invalid(Exception):
    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key, self.message = key, message


# ---- definitions ------------------------------------------------------------------------------------


def normalise(body: dict[str, Any], snap: Snapshot, current: CompiledEndpoint | None = None) -> dict[str, Any]:
    """Validate a create (or, merged over ``current``, an update) body → the stored definition."""
    merged = _as_body(current) if current else {}
    merged.update(body)
    merged = copy.deepcopy(merged)  # the checks normalise nodes in place
    try:
        return _normalise(merged, snap)
    except Invalid as exc:
        raise bad_request(f"Invalid custom endpoint: {exc.key}: {exc.message}", {exc.key: [exc.message]}) from None


def _as_body(endpoint: CompiledEndpoint) -> dict[str, Any]:
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


def _normalise(body: dict[str, Any], snap: Snapshot) -> dict[str, Any]:
    name = body.get("name")
    if not isinstance(name, str) or not ENDPOINT_NAME.match(name):
        raise Invalid("name", "Letters, digits, _ and -, starting with a letter (at most 100)")
    operation = _enum(body.get("operation"), OPERATIONS, "operation")
    selected = body.get("selectedSchema") or body.get("selectedSchemaName")
    schema = snap.by_id.get(selected) or snap.by_name.get(selected) if isinstance(selected, str) else None
    if schema is None or schema.table is None:
        raise Invalid("selectedSchema", "No schema with documents has this id or name")
    flags = {}
    for flag in ("authentication", "paginated", "sorted", "enabled"):
        value = body.get(flag, flag == "enabled")
        if not isinstance(value, bool):
            raise Invalid(flag, "Must be true or false")
        flags[flag] = value
    if operation != "GET" and (flags["paginated"] or flags["sorted"]):
        raise Invalid("paginated" if flags["paginated"] else "sorted", "Only GET endpoints paginate or sort")
    inputs = _inputs(body.get("inputs") or [], flags)
    query = body.get("query")
    if operation == "POST":
        if query:
            raise Invalid("query", "A POST endpoint creates a document; it has no query")
        query = None
    elif query is None or query == {}:
        if operation != "GET":
            raise Invalid("query", f"A {operation} endpoint needs a query (it would touch every document)")
        query = None
    else:
        counter = [0]
        _check_query(query, schema, inputs, "query", counter)
    assignments = body.get("assignments") or []
    if operation in ("GET", "DELETE"):
        if assignments:
            raise Invalid("assignments", f"A {operation} endpoint has no assignments")
    elif not assignments:
        raise Invalid("assignments", f"A {operation} endpoint needs at least one assignment")
    assignments = [_assignment(a, schema, inputs, operation, f"assignments.{i}") for i, a in enumerate(assignments)]
    return {
        "name": name,
        "operation": operation,
        "schema_id": schema.id,
        "inputs": inputs,
        "query": query,
        "assignments": assignments,
        **flags,
    }


def _enum(value: Any, numbers: dict[int, str], key: str) -> str:
    names = {v.upper(): v for v in numbers.values()}
    if isinstance(value, int) and not isinstance(value, bool) and value in numbers:
        return numbers[value]
    if isinstance(value, str) and value.upper() in names:
        return names[value.upper()]
    raise Invalid(key, f"One of {', '.join(numbers.values())} (or {min(numbers)}..{max(numbers)})")


def _inputs(raw: Any, flags: dict[str, bool]) -> list[dict[str, Any]]:
    if not isinstance(raw, list):
        raise Invalid("inputs", "Must be a list")
    seen: set[str] = set()
    out = []
    for index, item in enumerate(raw):
        key = f"inputs.{index}"
        if not isinstance(item, dict) or set(item) - {"name", "type", "location", "optional", "array"}:
            raise Invalid(key, "An input is {name, type, location, optional?, array?}")
        name = item.get("name")
        if not isinstance(name, str) or not INPUT_NAME.match(name) or name in seen:
            raise Invalid(f"{key}.name", "A unique name of letters, digits and _")
        if name in RUNTIME_PARAMS:
            raise Invalid(f"{key}.name", f"{name!r} is reserved for pagination, sorting and populate")
        if item.get("type") not in INPUT_TYPES:
            raise Invalid(f"{key}.type", f"One of {', '.join(INPUT_TYPES)}")
        location = _enum(item.get("location"), LOCATIONS, f"{key}.location")
        optional, array = item.get("optional", False), item.get("array", False)
        if not isinstance(optional, bool) or not isinstance(array, bool):
            raise Invalid(key, "optional and array are true or false")
        if location == "urlParams" and (optional or array):
            raise Invalid(key, "A URL parameter is a single required value")
        seen.add(name)
        out.append({"name": name, "type": item["type"], "location": location, "optional": optional, "array": array})
    return out


def _schema_field(schema: CompiledSchema, name: Any, key: str) -> Field:
    if name in SPECIAL_FIELDS:
        return SPECIAL_FIELDS[name][0]
    if not isinstance(name, str) or name not in schema.fields:
        raise Invalid(key, f"Not a field of {schema.name}")
    return schema.fields[name]


def _check_query(node: Any, schema: CompiledSchema, inputs: list[dict[str, Any]], key: str, counter: list[int]) -> None:
    counter[0] += 1
    if counter[0] > MAX_QUERY_NODES:
        raise Invalid("query", f"At most {MAX_QUERY_NODES} conditions")
    if not isinstance(node, dict):
        raise Invalid(key, "A query node is {AND: [...]}, {OR: [...]} or a condition")
    groups = [k for k in ("AND", "OR") if k in node]
    if groups:
        if len(node) != 1 or not isinstance(node[groups[0]], list):
            raise Invalid(key, "A group is exactly one of AND or OR with a list")
        for index, child in enumerate(node[groups[0]]):
            _check_query(child, schema, inputs, f"{key}.{groups[0]}.{index}", counter)
        return
    if set(node) - {"schemaField", "operation", "comparisonField"}:
        raise Invalid(key, "A condition is {schemaField, operation, comparisonField}")
    field = _schema_field(schema, node.get("schemaField"), f"{key}.schemaField")
    operation = _enum(node.get("operation"), dict(enumerate(COMPARISONS)), f"{key}.operation")
    node["operation"] = operation
    _check_operation(field, operation, f"{key}.operation")
    _check_value_source(
        node.get("comparisonField"), field, inputs, f"{key}.comparisonField", many=operation in ("in", "nin")
    )


def _check_operation(field: Field, operation: str, key: str) -> None:
    if field.type == "JSON":
        raise Invalid(key, f"{field.name} is JSON and cannot be compared")
    if field.array and operation in ("gt", "gte", "lt", "lte"):
        raise Invalid(key, f"{field.name} is an array: use eq, ne, in, nin or contains")
    if not field.array and operation == "contains" and field.type not in ("String", "ObjectId", "Relation"):
        raise Invalid(key, f"contains needs a text or array field; {field.name} is {field.type}")
    if field.type == "Boolean" and operation in ("gt", "gte", "lt", "lte"):
        raise Invalid(key, f"{field.name} is Boolean: only eq, ne, in and nin apply")


def _check_value_source(source: Any, field: Field, inputs: list[dict[str, Any]], key: str, many: bool) -> None:
    if not isinstance(source, dict) or set(source) - {"type", "value", "like"}:
        raise Invalid(key, "A value source is {type: Input|Context|Custom, value}")
    kind = source.get("type")
    if kind not in VALUE_TYPES:
        raise Invalid(f"{key}.type", f"One of {', '.join(VALUE_TYPES)}")
    if "like" in source and not isinstance(source["like"], bool):
        raise Invalid(f"{key}.like", "Must be true or false")
    value = source.get("value")
    if kind == "Input":
        if not any(i["name"] == value for i in inputs):
            raise Invalid(f"{key}.value", f"No input named {value!r}")
    elif kind == "Context":
        if not isinstance(value, str) or not re.match(r"^user(\.[A-Za-z_][A-Za-z0-9_]*)+$", value):
            raise Invalid(f"{key}.value", "A path into the caller, such as user._id")
    else:
        try:
            for item in split_list(value) if many else [value]:
                _coerce(field, item)
        except FieldError as exc:
            raise Invalid(f"{key}.value", str(exc)) from None


def _assignment(
    raw: Any, schema: CompiledSchema, inputs: list[dict[str, Any]], operation: str, key: str
) -> dict[str, Any]:
    if not isinstance(raw, dict) or set(raw) - {"schemaField", "action", "assignmentField"}:
        raise Invalid(key, "An assignment is {schemaField, action, assignmentField}")
    name = raw.get("schemaField")
    if name not in schema.fields:
        raise Invalid(f"{key}.schemaField", f"Not a field of {schema.name}")
    field = schema.fields[name]
    action = _enum(raw.get("action"), dict(enumerate(ACTIONS)), f"{key}.action")
    if operation == "POST" and action != "set":
        raise Invalid(f"{key}.action", "A POST endpoint only sets fields")
    if action in ("increment", "decrement") and not (field.type == "Number" and not field.array):
        raise Invalid(f"{key}.action", f"{action} needs a Number field")
    if action in ("append", "remove") and not field.array:
        raise Invalid(f"{key}.action", f"{action} needs an array field")
    element = Field(name=field.name, type=field.type) if action in ("append", "remove") else field
    source = raw.get("assignmentField")
    if isinstance(source, dict) and "like" in source:
        raise Invalid(f"{key}.assignmentField", "like only applies to queries")
    _check_value_source(
        source,
        element if not field.array or action != "set" else Field(name, "JSON"),
        inputs,
        f"{key}.assignmentField",
        many=False,
    )
    return {"schemaField": name, "action": action, "assignmentField": source}


def _coerce(field: Field, value: Any) -> Any:
    if field.type == "JSON":
        return check_json(value)
    return coerce_query_value(field.type, value)


# ---- admin writes -----------------------------------------------------------------------------------


def create(body: dict[str, Any]) -> dict[str, Any]:
    snap = snapshot()
    values = normalise(body, snap)
    if values["name"] in snap.endpoints:
        raise conflict(f"A custom endpoint named {values['name']!r} exists", {"name": ["Already taken"]})
    now = utcnow()
    row = CustomEndpointRecord(id=new_id(), version=0, created_at=now, updated_at=now, **values)
    audit.record("database", "customEndpoint.create", row.id, body)
    return _save(row, snap)


def update(endpoint_id: str, body: dict[str, Any]) -> dict[str, Any]:
    snap = snapshot()
    current = find(snap, endpoint_id)
    values = normalise(body, snap, current)
    other = snap.endpoints.get(values["name"])
    if other is not None and other.id != current.id:
        raise conflict(f"A custom endpoint named {values['name']!r} exists", {"name": ["Already taken"]})
    row = db.session.get(CustomEndpointRecord, current.id)
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
        "name": endpoint.name,
        "operation": endpoint.operation,
        "selectedSchema": endpoint.schema_id,
        "selectedSchemaName": schema.name if schema else None,
        "inputs": list(endpoint.inputs),
        "query": endpoint.query,
        "assignments": list(endpoint.assignments),
        "authentication": endpoint.authentication,
        "paginated": endpoint.paginated,
        "sorted": endpoint.sorted,
        "enabled": endpoint.enabled,
        "path": path_of(endpoint),
        "createdAt": format_datetime(endpoint.created_at) if endpoint.created_at else None,
        "updatedAt": format_datetime(endpoint.updated_at) if endpoint.updated_at else None,
        "__v": endpoint.version,
    }


def path_of(endpoint: CompiledEndpoint) -> str:
    url = [f"{{{i['name']}}}" for i in endpoint.inputs if i["location"] == "urlParams"]
    return "/".join([f"/database/function/{endpoint.name}", *url])


# ---- execution ----------------------------------------------------------------------------------------


class Call:
    """One request to a custom endpoint: its inputs and its caller."""

    def __init__(
        self,
        endpoint: CompiledEndpoint,
        identity: Identity | None,
        user: dict[str, Any] | None,
        body: Any,
        args: Any,
        segments: list[str],
    ) -> None:
        self.endpoint, self.identity, self.user = endpoint, identity, user
        self.values = _collect_inputs(endpoint, body, args, segments)

    def source(self, source: dict[str, Any], field: Field, many: bool) -> tuple[bool, Any]:
        """(present, value) of a value source; an optional input that was not sent is not present."""
        kind, raw = source["type"], source.get("value")
        if kind == "Input":
            if raw not in self.values:
                return False, None
            value = self.values[raw]
        elif kind == "Context":
            value = self._context(raw)
        else:
            value = raw
        try:
            if many:
                return True, [_coerce(field, item) for item in split_list(value)]
            return True, _coerce(field, value)
        except FieldError as exc:
            raise bad_request(f"{raw}: {exc}", {str(raw): [str(exc)]}) from None

    def _context(self, path: str) -> Any:
        if self.user is None:
            raise unauthorized(f"This endpoint uses {path}: it needs a user Bearer token")
        value: Any = {"user": self.user}
        for part in path.split("."):
            if not isinstance(value, dict) or part not in value:
                raise bad_request(f"{path} is not known for this caller")
            value = value[part]
        return value


def _collect_inputs(endpoint: CompiledEndpoint, body: Any, args: Any, segments: list[str]) -> dict[str, Any]:
    body = body if body is not None else {}
    if not isinstance(body, dict):
        raise bad_request("The body of a custom endpoint is a JSON object")
    errors: dict[str, list[str]] = {}
    values: dict[str, Any] = {}
    url_inputs = [i for i in endpoint.inputs if i["location"] == "urlParams"]
    if len(segments) != len(url_inputs):
        raise not_found(f"{endpoint.name} takes {len(url_inputs)} URL parameter(s)")
    known_body = {i["name"] for i in endpoint.inputs if i["location"] == "body"}
    known_query = {i["name"] for i in endpoint.inputs if i["location"] == "query"} | set(_runtime(endpoint))
    for key in body:
        if key not in known_body:
            errors[key] = ["Unknown field"]
    for key in args:
        if key not in known_query:
            errors[key] = ["Unknown query parameter"]
    segment_values = dict(zip((i["name"] for i in url_inputs), segments))
    for item in endpoint.inputs:
        name, location = item["name"], item["location"]
        if location == "body":
            present, raw = name in body and body[name] is not None, body.get(name)
        elif location == "query":
            present = name in args
            raw = [v for value in args.getlist(name) for v in split_list(value)] if item["array"] else args.get(name)
        else:
            present, raw = True, segment_values[name]
        if not present:
            if not item["optional"]:
                errors[name] = ["Missing data for required field."]
            continue
        field = Field(name=name, type=item["type"])
        # JSON bodies carry typed values and must match; query and URL values are text to convert.
        convert = (lambda f, v: check_scalar(f.type, v)) if location == "body" else _coerce
        try:
            if item["array"]:
                if not isinstance(raw, list):
                    raise FieldError("Must be an array")
                values[name] = [convert(field, v) for v in raw]
            else:
                if isinstance(raw, list) and item["type"] != "JSON":
                    raise FieldError("Must be a single value")
                values[name] = convert(field, raw)
        except FieldError as exc:
            errors[name] = [str(exc)]
    if errors:
        raise bad_request(f"Invalid input for {endpoint.name}", errors)
    return values


def _runtime(endpoint: CompiledEndpoint) -> list[str]:
    names = ["populate"] if endpoint.operation == "GET" else []
    if endpoint.paginated:
        names += ["skip", "limit"]
    if endpoint.sorted:
        names.append("sort")
    return names


def build_where(node: dict[str, Any] | None, call: Call, schema: CompiledSchema) -> Any:
    if node is None:
        return None
    for kind in ("AND", "OR"):
        if kind in node:
            items = [build_where(child, call, schema) for child in node[kind]]
            items = [item for item in items if item is not None]
            return Group(kind.lower(), tuple(items)) if items else None
    field = _schema_field(schema, node["schemaField"], "query")
    operation = node["operation"]
    source = node["comparisonField"]
    element = Field(name=field.name, type=field.type) if field.array else field
    present, value = call.source(source, element, many=operation in ("in", "nin"))
    if not present:
        return None  # an optional input that was not sent drops its condition (as in Conduit)
    if source.get("like") and operation == "eq" and field.type == "String":
        operation = "contains"
    return Condition(field.name, operation, value)


def run(snap: Snapshot, endpoint: CompiledEndpoint, call: Call, args: Any) -> tuple[Any, int]:
    schema = snap.by_id.get(endpoint.schema_id)
    if schema is None or schema.table is None:
        raise not_found(f"The schema of {endpoint.name} no longer exists")
    where = build_where(endpoint.query, call, schema)
    if endpoint.operation == "GET":
        return _get(snap, endpoint, schema, where, call, args), 200
    if endpoint.operation == "POST":
        check_permission(schema, "create")
        data = _apply(schema, {}, endpoint.assignments, call)
        doc = documents.create(snap, schema, [data])[0]
        db.session.commit()
        return doc, 201
    if endpoint.operation == "DELETE":
        check_permission(schema, "delete")
        count = documents.delete_matching(schema, where)
        db.session.commit()
        return {"deleted": True, "count": count}, 200
    docs = _update_many(snap, schema, where, endpoint, call)
    db.session.commit()
    return {"documents": docs, "count": len(docs)}, 200


def _get(
    snap: Snapshot, endpoint: CompiledEndpoint, schema: CompiledSchema, where: Any, call: Call, args: Any
) -> dict[str, Any]:
    skip, limit = 0, MAX_AFFECTED
    if endpoint.paginated:
        skip = _int_arg(args, "skip", 0, 0, None)
        limit = _int_arg(args, "limit", 25, 1, 1000)
    sort = args.get("sort") if endpoint.sorted else None
    tree = parse_populate(snap, schema, args.get("populate"))
    docs, count = documents.find(schema, where, sort, skip, limit)
    if tree:
        documents.populate(snap, schema, docs, tree, call.identity)
    return {"documents": docs, "count": count}


def _int_arg(args: Any, name: str, default: int, low: int, high: int | None) -> int:
    raw = args.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise bad_request(f"{name} must be an integer", {name: ["Not a valid integer."]}) from None
    if value < low or (high is not None and value > high):
        raise bad_request(
            f"{name} out of range",
            {name: [f"Must be between {low} and {high}." if high else f"Must be at least {low}."]},
        )
    return value


def _apply(schema: CompiledSchema, data: dict[str, Any], assignments: Any, call: Call) -> dict[str, Any]:
    out = dict(data)
    for assignment in assignments:
        name, action = assignment["schemaField"], assignment["action"]
        field = schema.fields.get(name)
        if field is None:
            raise bad_request(f"{name} is no longer a field of {schema.name}")
        if action == "set":
            source_field = field if not field.array else Field(name=name, type="JSON")
            present, value = call.source(assignment["assignmentField"], source_field, many=False)
            if present:
                out[name] = value
            continue
        element = Field(name=name, type=field.type)
        present, value = call.source(assignment["assignmentField"], element, many=False)
        if not present:
            continue
        if action in ("increment", "decrement"):
            current = out.get(name)
            base = current if isinstance(current, (int, float)) and not isinstance(current, bool) else 0
            out[name] = base + value if action == "increment" else base - value
        elif action == "append":
            out[name] = [*(out.get(name) or []), value]
        else:
            out[name] = [item for item in out.get(name) or [] if item != value]
    return out


def _update_many(
    snap: Snapshot, schema: CompiledSchema, where: Any, endpoint: CompiledEndpoint, call: Call
) -> list[dict[str, Any]]:
    rows = documents.locked_matching(schema, where, MAX_AFFECTED + 1)
    if len(rows) > MAX_AFFECTED:
        raise bad_request(f"The query matches more than {MAX_AFFECTED} documents; narrow it")
    changes = [
        (doc_id, _apply(schema, {k: v for k, v in data.items() if k in schema.fields}, endpoint.assignments, call))
        for doc_id, data in rows
    ]
    return documents.update(snap, schema, changes, "replace") if changes else []


def method_not_allowed(endpoint: CompiledEndpoint) -> APIError:
    return APIError(405, f"{endpoint.name} answers {endpoint.operation} only", headers={"Allow": endpoint.operation})
