"""The OpenAPI paths of custom endpoints: the generic callers by name, and each enabled endpoint's own typed
path with its inputs."""

from __future__ import annotations

from typing import Any

from .document_access import opted_in
from .endpoint_definitions import ENDPOINTS_TAG, declares_scope, path_of
from .openapi_common import ANYONE, JSON_TYPES, SCOPE_PARAMETER, USER_OR_ADMIN, component_names, responses
from .registry import CompiledEndpoint, CompiledSchema


def generic_function_paths(out: dict[str, Any]) -> None:
    """``/database/function/{endpointName}[/{params}]``: any custom endpoint by name (each enabled one also
    has its own typed path: ``endpoint_path``)."""
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
                "responses": responses(
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


def endpoint_path(endpoint: CompiledEndpoint, schema: CompiledSchema, out: dict[str, Any]) -> None:
    """The endpoint's own path: its urlParams in the path, query and body inputs typed, the result shape."""
    doc_ref = (
        {"$ref": f"#/components/schemas/{component_names(schema)[0]}"} if schema.cms_enabled else {"type": "object"}
    )
    params = []
    body_props: dict[str, Any] = {}
    body_required = []
    for item in endpoint.inputs:
        value: dict[str, Any] = dict(JSON_TYPES[item["type"]])
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
    outcomes: dict[str, tuple[dict[str, Any], int]] = {
        "GET": (listing, 200),
        "POST": (doc_ref, 201),
        "PUT": (listing, 200),
        "PATCH": (listing, 200),
        "DELETE": (
            {"type": "object", "properties": {"deleted": {"type": "boolean"}, "count": {"type": "integer"}}},
            200,
        ),
    }
    result, status = outcomes[endpoint.operation]
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
        "responses": responses(status, result, "Result", *errors, access=access),
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
