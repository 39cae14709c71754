"""OpenAPI paths of the generated routes, computed per ``/openapi.json`` request from the current schemas.

For every CMS-enabled schema: its document routes (only the enabled operations, with the security
they need) with request and response schemas derived from the fields; for every enabled custom
endpoint: its path, method and inputs. Merged into the static document by the core.
"""
from __future__ import annotations

from typing import Any

from flask import Flask

from .endpoints import path_of
from .fields import Field
from .registry import CompiledEndpoint, CompiledSchema, registry

ERROR = {"$ref": "#/components/schemas/Error"}
JSON_TYPES = {"String": {"type": "string"}, "Number": {"type": "number"}, "Boolean": {"type": "boolean"},
              "Date": {"type": "string", "format": "date-time"}, "ObjectId": {"type": "string"}, "JSON": {}}


def paths(app: Flask) -> dict[str, Any]:
    snap = registry(app).current()
    out: dict[str, Any] = {"paths": {}, "schemas": {}, "tags": []}
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
        base: dict[str, Any] = {"type": "string", "description": f"id of a {field.model} document "
                                "(the document itself when populated)"}
    else:
        base = dict(JSON_TYPES[field.type])
    if field.description:
        base["description"] = field.description
    return {"type": "array", "items": base} if field.array else base


def _names(schema: CompiledSchema) -> tuple[str, str, str]:
    return (f"Database{schema.name}Document", f"Database{schema.name}Input", f"Database{schema.name}List")


def _responses(status: int, content: dict[str, Any] | None, description: str, *errors: int) -> dict[str, Any]:
    responses: dict[str, Any] = {str(status): {"description": description}}
    if content is not None:
        responses[str(status)]["content"] = {"application/json": {"schema": content}}
    texts = {400: "Invalid request", 401: "A user token is needed", 403: "Not allowed by the schema's permissions",
             404: "Not found", 409: "A unique value is taken"}
    for code in errors:
        responses[str(code)] = {"description": texts[code], "content": {"application/json": {"schema": ERROR}}}
    return responses


def _schema_paths(schema: CompiledSchema, out: dict[str, Any]) -> None:
    doc_name, input_name, list_name = _names(schema)
    properties = {name: _value_schema(field) for name, field in schema.fields.items()}
    document = {"_id": {"type": "string"}, **properties, "__v": {"type": "integer"}}
    if schema.timestamps:
        document["createdAt"] = {"type": "string", "format": "date-time"}
        document["updatedAt"] = {"type": "string", "format": "date-time"}
    required = [name for name, field in schema.fields.items() if field.required]
    out["schemas"][doc_name] = {"type": "object", "properties": document, "required": ["_id", *required]}
    out["schemas"][input_name] = {"type": "object", "properties": properties, "additionalProperties": False,
                                  **({"required": required} if required else {})}
    out["schemas"][list_name] = {"type": "object", "required": ["documents", "count"], "properties": {
        "documents": {"type": "array", "items": {"$ref": f"#/components/schemas/{doc_name}"}},
        "count": {"type": "integer", "description": "total matching, before skip/limit"}}}
    tag = f"database: {schema.name}"
    out["tags"].append({"name": tag, "description": f"Documents of the {schema.name} schema"})
    ref = {"$ref": f"#/components/schemas/{doc_name}"}
    body = {"required": True, "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{input_name}"}}}}
    patch_body = {"required": True, "content": {"application/json": {"schema": {
        "type": "object", "properties": properties, "additionalProperties": False}}}}
    id_param = {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}

    def operation(op: str, summary: str, **spec: Any) -> dict[str, Any] | None:
        rule = schema.crud(op)
        if not rule.enabled:
            return {"summary": summary + " (administrators only: disabled for others)", "tags": [tag],
                    "security": [{"masterkey": []}, {"bearerAuth": []}], **spec}
        security = [{"bearerAuth": []}, {"masterkey": []}] if rule.authenticated else [{}, {"bearerAuth": []}]
        return {"summary": summary, "tags": [tag], "security": security, **spec}

    collection = f"/database/{schema.name}"
    out["paths"][collection] = {
        "get": operation("read", f"List {schema.name} documents", parameters=_list_parameters(schema),
                         responses=_responses(200, {"$ref": f"#/components/schemas/{list_name}"}, "Documents",
                                              400, 401, 404)),
        "post": operation("create", f"Create a {schema.name} document", requestBody=body,
                          responses=_responses(201, ref, "The created document", 400, 401, 403, 404, 409)),
    }
    out["paths"][f"{collection}/many"] = {
        "post": operation("create", f"Create many {schema.name} documents (all or nothing)", requestBody={
            "required": True, "content": {"application/json": {"schema": {"type": "object", "required": ["docs"],
                "properties": {"docs": {"type": "array", "maxItems": 1000,
                                        "items": {"$ref": f"#/components/schemas/{input_name}"}}}}}}},
            responses=_responses(201, {"type": "object", "properties": {
                "docs": {"type": "array", "items": ref}, "count": {"type": "integer"}}},
                "The created documents", 400, 401, 403, 404, 409)),
    }
    single = {"parameters": [id_param]}
    single["get"] = operation("read", f"One {schema.name} document", parameters=[
        {"name": "populate", "in": "query", "schema": {"type": "string"}},
        {"name": "select", "in": "query", "schema": {"type": "string"}}],
        responses=_responses(200, ref, "The document", 400, 401, 404))
    single["put"] = operation("update", f"Replace a {schema.name} document", requestBody=body,
                              responses=_responses(200, ref, "The new document", 400, 401, 404, 409))
    single["patch"] = operation("update", f"Change fields of a {schema.name} document (null removes)",
                                requestBody=patch_body,
                                responses=_responses(200, ref, "The new document", 400, 401, 404, 409))
    single["delete"] = operation("delete", f"Delete a {schema.name} document", responses=_responses(
        200, {"$ref": "#/components/schemas/Deleted"}, "Deleted", 401, 403, 404))
    out["paths"][f"{collection}/{{id}}"] = single


def _list_parameters(schema: CompiledSchema) -> list[dict[str, Any]]:
    params: list[dict[str, Any]] = [
        {"name": "skip", "in": "query", "schema": {"type": "integer", "minimum": 0, "default": 0}},
        {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 25}},
        {"name": "sort", "in": "query", "schema": {"type": "string"}, "description": "`-price,title`"},
        {"name": "select", "in": "query", "schema": {"type": "string"}},
        {"name": "populate", "in": "query", "schema": {"type": "string"},
         "description": "Relation fields: " + (", ".join(n for n, f in schema.fields.items() if f.type == "Relation")
                                               or "none")},
    ]
    for name, field in schema.fields.items():
        if field.type == "JSON":
            continue
        item = _value_schema(Field(name=name, type=field.type, model=field.model))
        ops = "$ne, $in, $nin, $contains, $exists" if field.array else (
            "$ne, $lt, $lte, $gt, $gte, $in, $nin, $exists" + (", $contains" if field.type == "String" else ""))
        params.append({"name": name, "in": "query", "schema": item, "required": False,
                       "description": f"equals (or {name}[$op]=… with {ops}; {name}<v, {name}>v)"})
    return params


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
            params.append({"name": item["name"], "in": "query", "required": not item["optional"], "schema": value,
                           **({"style": "form", "explode": False} if item["array"] else {})})
        else:
            body_props[item["name"]] = value
            if not item["optional"]:
                body_required.append(item["name"])
    if endpoint.operation == "GET":
        params.append({"name": "populate", "in": "query", "schema": {"type": "string"}})
    if endpoint.paginated:
        params += [{"name": "skip", "in": "query", "schema": {"type": "integer", "minimum": 0}},
                   {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 1000}}]
    if endpoint.sorted:
        params.append({"name": "sort", "in": "query", "schema": {"type": "string"}})
    listing = {"type": "object", "properties": {"documents": {"type": "array", "items": doc_ref},
                                                "count": {"type": "integer"}}}
    result, status = {
        "GET": (listing, 200), "POST": (doc_ref, 201), "PUT": (listing, 200), "PATCH": (listing, 200),
        "DELETE": ({"type": "object", "properties": {"deleted": {"type": "boolean"}, "count": {"type": "integer"}}}, 200),
    }[endpoint.operation]
    spec: dict[str, Any] = {
        "summary": f"Custom endpoint {endpoint.name} on {schema.name}",
        "tags": ["database: custom endpoints"],
        "security": [{"bearerAuth": []}] if endpoint.authentication else [{}, {"bearerAuth": []}],
        "parameters": params,
        "responses": _responses(status, result, "Result", 400, 401, 404),
    }
    if body_props:
        spec["requestBody"] = {"required": bool(body_required), "content": {"application/json": {"schema": {
            "type": "object", "properties": body_props, "additionalProperties": False,
            **({"required": body_required} if body_required else {})}}}}
    out["paths"].setdefault(path_of(endpoint), {})[endpoint.operation.lower()] = spec
    if not any(tag["name"] == "database: custom endpoints" for tag in out["tags"]):
        out["tags"].append({"name": "database: custom endpoints", "description": "Admin-defined endpoints"})
