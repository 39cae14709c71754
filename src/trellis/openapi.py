"""OpenAPI: the flask-smorest Api, security schemes, local Swagger UI, request-time paths.

Static routes are documented by flask-smorest from their marshmallow schemas. Modules whose routes
depend on data (the Database module's generated routes) give ``Module.openapi_paths``; those paths
are computed on every ``/openapi.json`` request and merged into a copy of the static document.

The merged document then goes through ``finish()``, which makes it what client generators and strict
linters expect (openapi-python-client, openapi-typescript, Redocly's recommended-strict rules): a
unique ``operationId`` on every operation, ``security: []`` on public ones, error responses with an
example of their own status, summaries without reStructuredText markup, no ``nullable`` without a
``type``, no unused component.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from typing import Any

import flask_smorest
import swagger_ui_bundle
from flask import Flask, current_app, json, send_from_directory

from .errors import STATUS_NAMES, ErrorSchema, handle_http_exception

SWAGGER_ASSETS = "/swagger/assets/"


class TrellisApi(flask_smorest.Api):
    ERROR_SCHEMA = ErrorSchema

    def handle_http_exception(self, error: Any):  # one error shape everywhere
        return handle_http_exception(error)

    def _openapi_json(self):
        return current_app.response_class(json.dumps(document(current_app), indent=2), mimetype="application/json")


def api_config(app: Flask, version: str) -> None:
    app.config.setdefault("API_TITLE", "Trellis")
    app.config.setdefault("API_VERSION", version)
    app.config.setdefault("OPENAPI_VERSION", "3.0.3")
    app.config.setdefault("OPENAPI_URL_PREFIX", "/")
    app.config.setdefault("OPENAPI_JSON_PATH", "openapi.json")
    app.config.setdefault("OPENAPI_SWAGGER_UI_PATH", "/swagger")
    app.config.setdefault("OPENAPI_SWAGGER_UI_URL", SWAGGER_ASSETS)
    app.config.setdefault("OPENAPI_SWAGGER_UI_CONFIG", {"persistAuthorization": True, "deepLinking": True})
    app.config.setdefault(
        "API_SPEC_OPTIONS",
        {
            "info": {
                "description": "Trellis: a self-hosted modular backend. Admin routes take the "
                "`masterkey` header or an admin Bearer token from `POST /login`.",
                "license": {"name": "MIT", "url": "https://opensource.org/licenses/MIT"},
            },
            "servers": [{"url": "/"}],
        },
    )


def init_api(app: Flask, version: str) -> TrellisApi:
    api_config(app, version)
    api = TrellisApi(app)
    api.spec.components.security_scheme("masterkey", {"type": "apiKey", "in": "header", "name": "masterkey"})
    api.spec.components.security_scheme("bearerAuth", {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"})

    @app.route(SWAGGER_ASSETS + "<path:filename>")
    def swagger_assets(filename: str):
        return send_from_directory(swagger_ui_bundle.swagger_ui_path, filename, max_age=3600)

    return api


def document(app: Flask) -> dict[str, Any]:
    """The complete OpenAPI document: static routes plus every module's request-time paths."""
    ext = app.extensions["trellis"]
    doc = copy.deepcopy(ext.api.spec.to_dict())
    for provider in ext.openapi_providers:
        merge_paths(doc, provider(app))
    finish(doc, app)
    return doc


def merge_paths(doc: dict[str, Any], extra: dict[str, Any]) -> None:
    """Add a module's request-time paths; ``replaces`` names static paths they stand for (dropped)."""
    paths = doc.setdefault("paths", {})
    for path in extra.get("replaces") or ():
        paths.pop(path, None)
    for path, item in (extra.get("paths") or {}).items():
        paths.setdefault(path, {}).update(item)
    schemas = doc.setdefault("components", {}).setdefault("schemas", {})
    schemas.update(extra.get("schemas") or {})
    tags = doc.setdefault("tags", [])
    known = {tag["name"] for tag in tags}
    tags.extend(tag for tag in extra.get("tags") or [] if tag["name"] not in known)


OpenAPIProvider = Callable[[Flask], dict[str, Any]]

METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
_RST_LITERAL = re.compile(r"``([^`]+)``")
_RST_ROLE = re.compile(r":[a-z]+:`([^`]+)`")
_REF = re.compile(r'"#/components/schemas/([^"]+)"')


def operations(doc: dict[str, Any]):
    """(path, method, operation) of every operation in the document."""
    for path, item in doc.get("paths", {}).items():
        for method in METHODS:
            if method in item:
                yield path, method, item[method]


def finish(doc: dict[str, Any], app: Flask) -> None:
    """Make the merged document generator- and lint-friendly (see the module docstring)."""
    _operation_ids(doc, app)
    for _path, _method, operation in operations(doc):
        operation.setdefault("security", [])  # a route without a credential guard is public
        _clean_text(operation)
        _error_examples(operation)
    _drop_typeless_nullable(doc)
    _drop_unused_schemas(doc)
    _drop_unused_tags(doc)


def _camel(*words: str) -> str:
    parts = [p for word in words for p in re.split(r"[^A-Za-z0-9]+", word) if p]
    return "".join(p if i == 0 else p[0].upper() + p[1:] for i, p in enumerate(parts))


def _operation_ids(doc: dict[str, Any], app: Flask) -> None:
    """Every operation a unique ``operationId``: the view function's name in camelCase (prefixed with its
    blueprint when two blueprints use the same name); request-time paths bring their own (made unique
    with a number if two clash, e.g. schemas ``ManyFoo`` and ``Foo``: ``createManyFoo``)."""
    endpoints: dict[tuple[str, str], str] = {}
    for rule in app.url_map.iter_rules():
        path = re.sub(r"<(?:[^:<>]+:)?([^<>]+)>", r"{\1}", str(rule))
        for method in rule.methods or ():
            endpoints[(path, method.lower())] = rule.endpoint
    full = [
        endpoints.get((path, method), f"{method}_{path}")
        for path, method, operation in operations(doc)
        if "operationId" not in operation
    ]
    names = [endpoint.rsplit(".", 1)[-1] for endpoint in set(full)]
    clashes = {name for name in names if names.count(name) > 1}
    several_methods = {endpoint for endpoint in full if full.count(endpoint) > 1}
    taken: set[str] = set()
    for path, method, operation in operations(doc):
        candidate = operation.get("operationId")
        if candidate is None:
            endpoint = endpoints.get((path, method), f"{method}_{path}")
            blueprint, _, name = endpoint.rpartition(".")
            candidate = _camel(blueprint, name) if name in clashes and blueprint else _camel(name)
            if endpoint in several_methods:  # one view for PUT and PATCH …: the method tells them apart
                candidate = _camel(candidate, method)
        candidate = re.sub(r"[^A-Za-z0-9_]", "_", candidate)
        unique, n = candidate, 2
        while unique in taken:
            unique, n = f"{candidate}{n}", n + 1
        taken.add(unique)
        operation["operationId"] = unique


def _clean_text(operation: dict[str, Any]) -> None:
    """reST literals (````x````) as Markdown code in descriptions, and no markup at all in summaries."""
    summary = operation.get("summary") or _words(operation["operationId"])
    summary = _RST_ROLE.sub(r"\1", _RST_LITERAL.sub(r"\1", summary))
    operation["summary"] = summary.replace("`", "").strip().rstrip(".")
    if operation.get("description"):
        operation["description"] = _RST_ROLE.sub(r"`\1`", _RST_LITERAL.sub(r"`\1`", operation["description"]))


def _words(operation_id: str) -> str:
    text = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", operation_id).lower()
    return text[:1].upper() + text[1:]


def _error_examples(operation: dict[str, Any]) -> None:
    """Each documented error shows a body of its own status (not the Error schema's generic example)."""
    responses = operation.setdefault("responses", {})
    if not any(str(code).startswith("4") for code in responses):
        # Every route refuses a malformed request (NUL in the URL, bad parameters) with a 400.
        responses["400"] = {
            "description": "Invalid request",
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
        }
    for code, response in responses.items():
        status = int(code) if str(code).isdigit() else 0
        media = (response.get("content") or {}).get("application/json")
        if status < 400 or media is None or media.get("schema") != {"$ref": "#/components/schemas/Error"}:
            continue
        if "example" not in media:  # a new dict: modules may share one content object between statuses
            response["content"] = {
                **response["content"],
                "application/json": {
                    **media,
                    "example": {
                        "name": STATUS_NAMES.get(status, "ERROR"),
                        "status": status,
                        "message": response.get("description") or "Error",
                    },
                },
            }


def _drop_typeless_nullable(node: Any) -> None:
    """``nullable`` without ``type`` (a JSON-typed field) is invalid in 3.0: such a schema allows null anyway."""
    if isinstance(node, dict):
        if node.get("nullable") is True and "type" not in node and "$ref" not in node:
            del node["nullable"]
        for value in node.values():
            _drop_typeless_nullable(value)
    elif isinstance(node, list):
        for value in node:
            _drop_typeless_nullable(value)


def _drop_unused_tags(doc: dict[str, Any]) -> None:
    """Tags no operation carries (a page blueprint's; a module whose request-time paths are empty now)."""
    used = {tag for _path, _method, operation in operations(doc) for tag in operation.get("tags", ())}
    if "tags" in doc:
        doc["tags"] = [tag for tag in doc["tags"] if tag["name"] in used]


def _drop_unused_schemas(doc: dict[str, Any]) -> None:
    """Components no operation reaches (flask-smorest always adds PaginationMetadata)."""
    schemas = doc.get("components", {}).get("schemas", {})
    while True:
        used = set(_REF.findall(json.dumps(doc.get("paths", {})))) | {
            ref for name, schema in schemas.items() for ref in _REF.findall(json.dumps(schema)) if ref != name
        }
        unused = [name for name in schemas if name not in used]
        if not unused:
            return
        for name in unused:
            del schemas[name]
