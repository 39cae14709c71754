"""Custom endpoint calls: one request's inputs and caller, and running the endpoint's query and
assignments through the same compiler and document functions as the generated routes. Definitions
(their shape and checks, the admin writes) are ``endpoint_definitions.py``.

On a schema under access control an endpoint runs with the caller's access (``?scope=Team:<id>`` acts as
a team), as the generated routes do: GET reads only what the caller may read (exact count, populate
under access), POST makes the caller (or the scope team) the owner. PUT/PATCH and DELETE act on the
documents the query matches *among those the caller may read* (the others do not exist for it); when one
of those it may read may not be edited (deleted), the call is a 403 and writes nothing, as PUT/PATCH
(DELETE) of that one document would be — never a silent partial write.
"""

from __future__ import annotations

from typing import Any

from trellis import db
from trellis.access import Acting
from trellis.credentials import Identity
from trellis.errors import APIError, bad_request, forbidden, not_found, unauthorized
from trellis.http import DEFAULT_LIMIT, MAX_LIMIT, MAX_SKIP

from . import document_access, documents
from .crud_gate import check_permission
from .endpoint_definitions import assigned_field, coerce, declares_scope, schema_field
from .fields import Field, FieldError, check_array_length, check_scalar
from .query import Condition, Group, parse_populate, split_list
from .registry import CompiledEndpoint, CompiledSchema, Snapshot

MAX_AFFECTED = 1000


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
            value = self._context(source["value"])  # a definition names the path of every Context source
        else:
            value = raw
        try:
            if many:
                return True, [coerce(field, item) for item in split_list(value)]
            return True, coerce(field, value)
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
        convert = (lambda f, v: check_scalar(f.type, v)) if location == "body" else coerce
        try:
            if item["array"]:
                if not isinstance(raw, list):
                    raise FieldError("Must be an array")
                check_array_length(raw)  # before converting each element
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
    if not declares_scope(endpoint):
        names.append("scope")
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
    field = schema_field(schema, node["schemaField"])
    if field is None:
        raise bad_request(f"{node['schemaField']} is no longer a field of {schema.name}")
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
    scope = None if declares_scope(endpoint) else (args.get("scope") or None)
    acting = document_access.acting(schema, call.identity, scope)
    where = build_where(endpoint.query, call, schema)
    if endpoint.operation == "GET":
        return _get(snap, endpoint, schema, where, call, args, acting, scope), 200
    if endpoint.operation == "POST":
        check_permission(schema, "create")
        _require_owner(schema, call.identity)
        data = _apply(schema, {}, endpoint.assignments, call)
        doc = documents.create(snap, schema, [data], acting=acting)[0]
        db.commit()
        return doc, 201
    if endpoint.operation == "DELETE":
        check_permission(schema, "delete")
        _refuse_any_denied(schema, where, acting, "delete")
        count = documents.delete_matching(schema, where, acting)
        db.session.commit()
        return {"deleted": True, "count": count}, 200
    docs = _update_many(snap, schema, where, endpoint, call, acting)
    db.session.commit()
    return {"documents": docs, "count": len(docs)}, 200


def _require_owner(schema: CompiledSchema, identity: Identity | None) -> None:
    """A document under access control must have an owner: an anonymous create through an endpoint needs
    what REST's needs, the schema's ``create.authenticated`` switched off (set so when the schema opted in
    unless the admin said otherwise), whatever the endpoint's own ``authentication``."""
    if identity is None and document_access.opted_in(schema) and schema.crud("create").authenticated:
        raise unauthorized(
            f"Documents of {schema.name!r} are under access control: creating one needs a user Bearer token"
        )


def _refuse_any_denied(schema: CompiledSchema, where: Any, acting: Acting | None, permission: str) -> None:
    """403 when the caller may read a matched document but not ``permission`` it (see the docstring)."""
    if acting is None:
        return
    denied = documents.denied_matching(schema, where, acting, permission)
    if denied is not None:
        raise forbidden(
            f"You may read the {schema.name} document {denied!r} this endpoint matches but not {permission} it"
        )


def _get(
    snap: Snapshot,
    endpoint: CompiledEndpoint,
    schema: CompiledSchema,
    where: Any,
    call: Call,
    args: Any,
    acting: Acting | None,
    scope: str | None,
) -> dict[str, Any]:
    skip, limit = 0, MAX_AFFECTED
    if endpoint.paginated:
        skip = _int_arg(args, "skip", 0, 0, MAX_SKIP)
        limit = _int_arg(args, "limit", DEFAULT_LIMIT, 1, MAX_LIMIT)
    sort = args.get("sort") if endpoint.sorted else None
    tree = parse_populate(snap, schema, args.get("populate"))
    docs, count = documents.find(schema, where, sort, skip, limit, acting=acting)
    if tree:
        documents.populate(snap, schema, docs, tree, call.identity, scope)
    return {"documents": docs, "count": count}


def _int_arg(args: Any, name: str, default: int, low: int, high: int) -> int:
    raw = args.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise bad_request(f"{name} must be an integer", {name: ["Not a valid integer."]}) from None
    if not low <= value <= high:
        raise bad_request(
            f"{name} out of range",
            {name: [f"Must be greater than or equal to {low} and less than or equal to {high}."]},
        )
    return value


def _apply(schema: CompiledSchema, data: dict[str, Any], assignments: Any, call: Call) -> dict[str, Any]:
    out = dict(data)
    for assignment in assignments:
        name, action = assignment["schemaField"], assignment["action"]
        field = schema.fields.get(name)
        if field is None:
            raise bad_request(f"{name} is no longer a field of {schema.name}")
        present, value = call.source(assignment["assignmentField"], assigned_field(field, action), many=False)
        if not present:
            continue
        if action == "set":
            out[name] = value
        elif action in ("increment", "decrement"):
            current = out.get(name)
            base = current if isinstance(current, (int, float)) and not isinstance(current, bool) else 0
            out[name] = base + value if action == "increment" else base - value
        elif action == "append":
            out[name] = [*(out.get(name) or []), value]
        else:
            out[name] = [item for item in out.get(name) or [] if item != value]
    return out


def _update_many(
    snap: Snapshot, schema: CompiledSchema, where: Any, endpoint: CompiledEndpoint, call: Call, acting: Acting | None
) -> list[dict[str, Any]]:
    _refuse_any_denied(schema, where, acting, "edit")
    # Locked and filtered by read + edit in one statement: the rows are those the caller may change, so
    # the update itself needs no check per document.
    rows = documents.locked_matching(schema, where, MAX_AFFECTED + 1, acting)
    if len(rows) > MAX_AFFECTED:
        raise bad_request(f"The query matches more than {MAX_AFFECTED} documents; narrow it")
    changes = [
        (doc_id, _apply(schema, {k: v for k, v in data.items() if k in schema.fields}, endpoint.assignments, call))
        for doc_id, data in rows
    ]
    return documents.update(snap, schema, changes, "replace") if changes else []


def method_not_allowed(endpoint: CompiledEndpoint) -> APIError:
    return APIError(405, f"{endpoint.name} answers {endpoint.operation} only", headers={"Allow": endpoint.operation})
