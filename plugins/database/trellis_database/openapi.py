"""OpenAPI paths of the generated routes, computed per ``/openapi.json`` request from the current schemas.

For every CMS-enabled schema: its document routes (only the enabled operations, with the security
they need) with request and response schemas derived from the fields, and the list route's filters
(``price[$lt]`` …) as declared query parameters; for every enabled custom endpoint: its path, method
and inputs. Merged into the static document by the core, where they replace the generic
``/database/{schemaName}…`` family they stand for (a generator gets one typed function per schema
and operation, and no path is ambiguous). Every operation has an ``operationId`` (``listProduct``,
``createProduct`` …) and lists every credential it accepts.

A schema under access control also shows it: a ``scope`` query parameter on its document routes and
custom endpoints, its sharing routes (``/database/<Name>/{id}/grants``), and the 403 a caller gets for a
document it may read but not change (or a team scope it is not in).
"""

from __future__ import annotations

from typing import Any

from flask import Flask

from . import search as full_text
from .document_access import opted_in
from .endpoint_definitions import ENDPOINTS_TAG, declares_scope, path_of
from .fields import Field
from .registry import CompiledEndpoint, CompiledSchema, registry

ERROR = {"$ref": "#/components/schemas/Error"}
# The generic routes the per-schema paths stand for (see routes.py).
GENERIC_DOCUMENT_PATHS = (
    "/database/{schemaName}",
    "/database/{schemaName}/many",
    "/database/{schemaName}/{docId}",
    "/database/{schemaName}/changes",
    "/database/{schemaName}/aggregate",
    "/database/{schemaName}/{docId}/grants",
)
ADMIN = [{"masterkey": []}, {"bearerAuth": []}]
ANYONE = [{}, {"bearerAuth": []}, {"masterkey": []}]
USER_OR_ADMIN = [{"bearerAuth": []}, {"masterkey": []}]
JSON_TYPES = {
    "String": {"type": "string"},
    "Number": {"type": "number"},
    "Boolean": {"type": "boolean"},
    "Date": {"type": "string", "format": "date-time"},
    "ObjectId": {"type": "string"},
    "JSON": {},
}


def paths(app: Flask) -> dict[str, Any]:
    snap = registry(app).current()
    out: dict[str, Any] = {"paths": {}, "schemas": {}, "tags": [], "replaces": list(GENERIC_DOCUMENT_PATHS)}
    _generic_function_paths(out)
    for schema in snap.schemas:
        if schema.cms_enabled:
            _schema_paths(schema, out)
    for endpoint in sorted(snap.endpoints.values(), key=lambda e: e.name):
        schema = snap.by_id.get(endpoint.schema_id)
        if endpoint.enabled and schema is not None and schema.table is not None:
            _endpoint_path(endpoint, schema, out)
    return out


def _value_schema(field: Field) -> dict[str, Any]:
    if field.type == "Relation":
        base: dict[str, Any] = {
            "type": "string",
            "description": f"id of a {field.model} document (the document itself when populated)",
        }
    else:
        base = dict(JSON_TYPES[field.type])
    if field.description:
        base["description"] = field.description
    return {"type": "array", "items": base} if field.array else base


def _names(schema: CompiledSchema) -> tuple[str, str, str]:
    return (f"Database{schema.name}Document", f"Database{schema.name}Input", f"Database{schema.name}List")


def _responses(
    status: int, content: dict[str, Any] | None, description: str, *errors: int, access: bool = False
) -> dict[str, Any]:
    """A success response and the error ones; ``access``: the schema is under access control (a 403 for
    what the caller may read but not change, or a scope team it is not in; every answer may be one)."""
    if access:
        errors = tuple(sorted({*errors, 400, 403}))
    responses: dict[str, Any] = {str(status): {"description": description}}
    if content is not None:
        responses[str(status)]["content"] = {"application/json": {"schema": content}}
    texts = {
        400: "Invalid request",
        401: "A user token is needed",
        403: "Not allowed by the schema's permissions",
        404: "Not found",
        405: "The endpoint answers another method (see Allow)",
        409: "A unique value is taken",
        415: "The body is not declared JSON (Content-Type: application/json)",
        410: "RESYNC_REQUIRED: the event log no longer holds every event after since",
    }
    if access:
        texts[403] = "Not allowed: you may read the document but not do this, or you are not in the scope team"
        texts[404] = "Not found (also a document you may not read: the same answer)"
    for code in errors:
        responses[str(code)] = {"description": texts[code], "content": {"application/json": {"schema": ERROR}}}
    return responses


def _generic_function_paths(out: dict[str, Any]) -> None:
    """``/database/function/{endpointName}[/{params}]``: any custom endpoint by name (each enabled one also
    has its own typed path below)."""
    name = {"name": "endpointName", "in": "path", "required": True, "schema": {"type": "string"}}
    params = {
        "name": "params",
        "in": "path",
        "required": True,
        "schema": {"type": "string"},
        "description": "the endpoint's urlParams inputs, separated by /",
    }
    body = {"required": False, "content": {"application/json": {"schema": {"type": "object"}}}}
    for path, parameters, suffix in (
        ("/database/function/{endpointName}", [name], ""),
        ("/database/function/{endpointName}/{params}", [name, params], "WithParams"),
    ):
        item: dict[str, Any] = {"parameters": parameters}
        for method in ("get", "post", "put", "patch", "delete"):
            operation = {
                "operationId": f"callCustomEndpoint{suffix}{method.capitalize()}",
                "summary": f"Run a custom endpoint by name ({method.upper()} endpoints)",
                "tags": [ENDPOINTS_TAG],
                "security": ANYONE,
                "responses": _responses(
                    201 if method == "post" else 200,
                    {"$ref": "#/components/schemas/FunctionResult"},
                    "Result",
                    400,
                    401,
                    404,
                    405,
                    *{"get": (), "delete": (415,)}.get(method, (409, 415)),
                ),
            }
            if method != "get":
                operation["requestBody"] = body
            item[method] = operation
        out["paths"][path] = item


def _schema_paths(schema: CompiledSchema, out: dict[str, Any]) -> None:
    doc_name, input_name, list_name = _names(schema)
    properties = {name: _value_schema(field) for name, field in schema.fields.items()}
    document = {"_id": {"type": "string"}, **properties, "__v": {"type": "integer"}}
    if schema.timestamps:
        document["createdAt"] = {"type": "string", "format": "date-time"}
        document["updatedAt"] = {"type": "string", "format": "date-time"}
    required = [name for name, field in schema.fields.items() if field.required]
    out["schemas"][doc_name] = {"type": "object", "properties": document, "required": ["_id", *required]}
    out["schemas"][input_name] = {
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
        **({"required": required} if required else {}),
    }
    out["schemas"][list_name] = {
        "type": "object",
        "required": ["documents"],
        "properties": {
            "documents": {"type": "array", "items": {"$ref": f"#/components/schemas/{doc_name}"}},
            "count": {"type": "integer", "description": "total matching, before skip/limit; absent with `count=none`"},
        },
    }
    tag = f"database: {schema.name}"
    out["tags"].append({"name": tag, "description": f"Documents of the {schema.name} schema"})
    ref = {"$ref": f"#/components/schemas/{doc_name}"}
    body = {
        "required": True,
        "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{input_name}"}}},
    }
    patch_body = {
        "required": True,
        "content": {
            "application/json": {"schema": {"type": "object", "properties": properties, "additionalProperties": False}}
        },
    }
    id_param = {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}
    access = opted_in(schema)
    scoped = [SCOPE_PARAMETER] if access else []

    def operation(op: str, operation_id: str, summary: str, **spec: Any) -> dict[str, Any] | None:
        rule = schema.crud(op)
        ids = {"operationId": f"{operation_id}{schema.name}"}
        if not rule.enabled:
            return {
                **ids,
                "summary": summary + " (administrators only: disabled for others)",
                "tags": [tag],
                "security": ADMIN,
                **spec,
            }
        security = USER_OR_ADMIN if rule.authenticated else ANYONE
        return {**ids, "summary": summary, "tags": [tag], "security": security, **spec}

    collection = f"/database/{schema.name}"
    out["paths"][collection] = {
        "get": operation(
            "read",
            "list",
            f"List {schema.name} documents",
            parameters=[*_list_parameters(schema), *scoped],
            responses=_responses(
                200, {"$ref": f"#/components/schemas/{list_name}"}, "Documents", 400, 401, 404, access=access
            ),
        ),
        "post": operation(
            "create",
            "create",
            f"Create a {schema.name} document",
            requestBody=body,
            parameters=scoped,
            responses=_responses(201, ref, "The created document", 400, 401, 403, 404, 409, 415, access=access),
        ),
    }
    out["paths"][f"{collection}/many"] = {
        "post": operation(
            "create",
            "createMany",
            f"Create many {schema.name} documents (all or nothing)",
            parameters=scoped,
            requestBody={
                "required": True,
                "content": {
                    "application/json": {
                        "schema": {
                            "type": "object",
                            "required": ["docs"],
                            "properties": {
                                "docs": {
                                    "type": "array",
                                    "maxItems": 1000,
                                    "items": {"$ref": f"#/components/schemas/{input_name}"},
                                }
                            },
                        }
                    }
                },
            },
            responses=_responses(
                201,
                {
                    "type": "object",
                    "properties": {"docs": {"type": "array", "items": ref}, "count": {"type": "integer"}},
                },
                "The created documents",
                400,
                401,
                403,
                404,
                409,
                415,
                access=access,
            ),
        ),
    }
    single = {"parameters": [id_param]}
    single["get"] = operation(
        "read",
        "get",
        f"One {schema.name} document",
        parameters=[
            {"name": "populate", "in": "query", "schema": {"type": "string"}},
            {"name": "select", "in": "query", "schema": {"type": "string"}},
            *scoped,
        ],
        responses=_responses(200, ref, "The document", 400, 401, 404, access=access),
    )
    single["put"] = operation(
        "update",
        "replace",
        f"Replace a {schema.name} document",
        requestBody=body,
        parameters=scoped,
        responses=_responses(200, ref, "The new document", 400, 401, 404, 409, 415, access=access),
    )
    single["patch"] = operation(
        "update",
        "update",
        f"Change fields of a {schema.name} document (null removes)",
        requestBody=patch_body,
        parameters=scoped,
        responses=_responses(200, ref, "The new document", 400, 401, 404, 409, 415, access=access),
    )
    single["delete"] = operation(
        "delete",
        "delete",
        f"Delete a {schema.name} document",
        parameters=scoped,
        responses=_responses(200, {"$ref": "#/components/schemas/Deleted"}, "Deleted", 401, 403, 404, access=access),
    )
    out["paths"][f"{collection}/{{id}}"] = single
    if access:
        out["paths"][f"{collection}/{{id}}/grants"] = _grant_paths(schema, operation, id_param, out)
    changes = operation(
        "read",
        "streamChanges",
        f"Changes of {schema.name} documents as Server-Sent Events",
        parameters=[
            *_list_parameters(schema)[_LIST_PAGING:],  # the field filters only
            {"name": "since", "in": "query", "schema": {"type": "integer", "minimum": 0}},
            {"name": "events", "in": "query", "schema": {"type": "string"}, "example": "create,update,enter,leave"},
            {"name": "Last-Event-ID", "in": "header", "schema": {"type": "string"}},
        ],
        responses=_responses(200, None, "An endless stream: `id:`, `event:`, `data:` per change", 400, 401, 404, 410),
    )
    changes["responses"]["200"]["content"] = {"text/event-stream": {"schema": {"type": "string"}}}
    out["paths"][f"{collection}/changes"] = {"get": changes}
    out["schemas"][f"Database{schema.name}Aggregate"] = _aggregate_schema(schema)
    out["paths"][f"{collection}/aggregate"] = {
        "get": operation(
            "read",
            "aggregate",
            f"Groups of {schema.name} documents: count, sum, avg, min, max",
            parameters=[*_aggregate_parameters(schema), *_list_parameters(schema)[_LIST_PAGING:], *scoped],
            responses=_responses(
                200,
                {"$ref": f"#/components/schemas/Database{schema.name}Aggregate"},
                "The groups (only the operations asked for) and how many there are before limit",
                400,
                401,
                404,
                access=access,
            ),
        )
    }


def _aggregate_parameters(schema: CompiledSchema) -> list[dict[str, Any]]:
    """The aggregate's own query parameters (aggregates.py); the field filters follow them."""
    numbers = [name for name, field in schema.fields.items() if field.type == "Number" and not field.array]
    dates = ["createdAt", "updatedAt"] if schema.timestamps else []
    dates += [name for name, field in schema.fields.items() if field.type == "Date" and not field.array]
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


def _aggregate_schema(schema: CompiledSchema) -> dict[str, Any]:
    values = {"type": "object", "additionalProperties": {"nullable": True}}
    group = {
        "type": "object",
        "required": ["key"],
        "properties": {
            "key": {"type": "object", "description": "`{<field>: value}`; a bucket is the ISO time it starts"},
            "count": {"type": "integer"},
            "sum": {"type": "object", "additionalProperties": {"type": "number"}},
            "avg": {"type": "object", "additionalProperties": {"type": "number", "nullable": True}},
            "min": values,
            "max": values,
        },
    }
    return {
        "type": "object",
        "required": ["groups", "count"],
        "properties": {
            "groups": {"type": "array", "items": group},
            "count": {"type": "integer", "description": "the number of groups before `limit`"},
        },
    }


SCOPE_PARAMETER = {
    "name": "scope",
    "in": "query",
    "required": False,
    "schema": {"type": "string", "maxLength": 100},
    "description": "`Team:<id>`: act as a team you are a member of (its grants only; not a member: 403)",
}
GRANT_SCHEMAS = {
    "DatabaseGrantInput": {
        "type": "object",
        "required": ["subject", "relation"],
        "properties": {
            "subject": {"type": "string", "maxLength": 100, "description": "`User:<id>`, `Team:<id>`, `User:*` or `*`"},
            "relation": {"type": "string", "maxLength": 32, "description": "`owner`, `editor`, `reader`, …"},
        },
    },
    "DatabaseGrant": {
        "type": "object",
        "required": ["subject", "relation", "resource"],
        "properties": {
            "subject": {"type": "string"},
            "relation": {"type": "string"},
            "resource": {"type": "string", "description": "`<Schema>:<documentId>`"},
        },
    },
    "DatabaseGrantEntries": {
        "type": "object",
        "required": ["grants", "count"],
        "properties": {
            "grants": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["subject", "relation"],
                    "properties": {"subject": {"type": "string"}, "relation": {"type": "string"}},
                },
            },
            "count": {"type": "integer"},
        },
    },
}


def _grant_paths(schema: CompiledSchema, operation: Any, id_param: dict[str, Any], out: dict[str, Any]) -> dict:
    """``/database/<Name>/{id}/grants``: who holds what on a document (needs ``read``), share (``share``),
    revoke (``share``). A document the caller may not read is the 404 of a missing one."""
    out["schemas"].update(GRANT_SCHEMAS)
    grant = {"$ref": "#/components/schemas/DatabaseGrant"}
    text = {"type": "string", "maxLength": 100}
    return {
        "parameters": [id_param],
        "get": operation(
            "read",
            "listGrants",
            f"Who holds which relation on a {schema.name} document",
            parameters=[SCOPE_PARAMETER],
            responses=_responses(
                200, {"$ref": "#/components/schemas/DatabaseGrantEntries"}, "The grants", 401, 404, access=True
            ),
        ),
        "post": operation(
            "read",
            "share",
            f"Share a {schema.name} document (needs share; only relations you hold, unless you own it)",
            parameters=[SCOPE_PARAMETER],
            requestBody={
                "required": True,
                "content": {"application/json": {"schema": {"$ref": "#/components/schemas/DatabaseGrantInput"}}},
            },
            responses=_responses(201, grant, "The grant", 401, 404, 409, 415, access=True),
        ),
        "delete": operation(
            "read",
            "revoke",
            f"Revoke a grant on a {schema.name} document (needs share)",
            parameters=[
                {"name": "subject", "in": "query", "required": True, "schema": text},
                {"name": "relation", "in": "query", "required": True, "schema": {"type": "string", "maxLength": 32}},
                SCOPE_PARAMETER,
            ],
            responses=_responses(200, grant, "The revoked grant", 401, 404, access=True),
        ),
    }


_LIST_PAGING = 6  # skip, limit, sort, select, populate, count: the first parameters of a list


def _list_parameters(schema: CompiledSchema) -> list[dict[str, Any]]:
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
            + (", ".join(n for n, f in schema.fields.items() if f.type == "Relation") or "none"),
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
    searchable = full_text.searchable_fields(schema.fields) if (schema.storage or {}).get("search") else []
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
    for name, field in schema.fields.items():
        if field.type == "JSON":
            params.append(_operator_parameter(name, "$exists", {"type": "boolean"}, "the field is present"))
            continue
        item = _value_schema(Field(name=name, type=field.type, model=field.model))
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


def _endpoint_path(endpoint: CompiledEndpoint, schema: CompiledSchema, out: dict[str, Any]) -> None:
    doc_ref = {"$ref": f"#/components/schemas/{_names(schema)[0]}"} if schema.cms_enabled else {"type": "object"}
    params = []
    body_props: dict[str, Any] = {}
    body_required = []
    for item in endpoint.inputs:
        value = dict(JSON_TYPES[item["type"]])
        if item["array"]:
            value = {"type": "array", "items": value}
        if item["location"] == "urlParams":
            params.append({"name": item["name"], "in": "path", "required": True, "schema": value})
        elif item["location"] == "query":
            params.append(
                {
                    "name": item["name"],
                    "in": "query",
                    "required": not item["optional"],
                    "schema": value,
                    **({"style": "form", "explode": False} if item["array"] else {}),
                }
            )
        else:
            body_props[item["name"]] = value
            if not item["optional"]:
                body_required.append(item["name"])
    if endpoint.operation == "GET":
        params.append({"name": "populate", "in": "query", "schema": {"type": "string"}})
    if endpoint.paginated:
        params += [
            {"name": "skip", "in": "query", "schema": {"type": "integer", "minimum": 0}},
            {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 1000}},
        ]
    if endpoint.sorted:
        params.append({"name": "sort", "in": "query", "schema": {"type": "string"}})
    access = opted_in(schema)
    if access and not declares_scope(endpoint):
        params.append(SCOPE_PARAMETER)
    listing = {
        "type": "object",
        "properties": {"documents": {"type": "array", "items": doc_ref}, "count": {"type": "integer"}},
    }
    result, status = {
        "GET": (listing, 200),
        "POST": (doc_ref, 201),
        "PUT": (listing, 200),
        "PATCH": (listing, 200),
        "DELETE": (
            {"type": "object", "properties": {"deleted": {"type": "boolean"}, "count": {"type": "integer"}}},
            200,
        ),
    }[endpoint.operation]
    errors = [400, 401, 404]
    if endpoint.operation in ("POST", "PUT", "PATCH"):
        errors.append(409)  # the documents written must keep unique fields unique
    if body_props:
        errors.append(415)
    spec: dict[str, Any] = {
        "operationId": f"customEndpoint{endpoint.name[:1].upper()}{endpoint.name[1:]}",
        "summary": f"Custom endpoint {endpoint.name} on {schema.name}",
        "tags": [ENDPOINTS_TAG],
        "security": USER_OR_ADMIN if endpoint.authentication else ANYONE,
        "parameters": params,
        "responses": _responses(status, result, "Result", *errors, access=access),
    }
    if body_props:
        spec["requestBody"] = {
            "required": bool(body_required),
            "content": {
                "application/json": {
                    "schema": {
                        "type": "object",
                        "properties": body_props,
                        "additionalProperties": False,
                        **({"required": body_required} if body_required else {}),
                    }
                }
            },
        }
    out["paths"].setdefault(path_of(endpoint), {})[endpoint.operation.lower()] = spec
