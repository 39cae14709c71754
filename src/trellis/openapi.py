"""OpenAPI: the flask-smorest Api, security schemes, local Swagger UI, request-time paths.

Static routes are documented by flask-smorest from their marshmallow schemas. Modules whose routes
depend on data (the Database module's generated routes) give ``Module.openapi_paths``; those paths
are computed on every ``/openapi.json`` request and merged into a copy of the static document.
"""
from __future__ import annotations

import copy
from typing import Any, Callable

import flask_smorest
import swagger_ui_bundle
from flask import Flask, current_app, json, send_from_directory

from .errors import ErrorSchema, handle_http_exception

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
            "info": {"description": "Trellis: a self-hosted modular backend. Admin routes take the "
                     "`masterkey` header or an admin Bearer token from `POST /login`."},
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
    return doc


def merge_paths(doc: dict[str, Any], extra: dict[str, Any]) -> None:
    paths = doc.setdefault("paths", {})
    for path, item in (extra.get("paths") or {}).items():
        paths.setdefault(path, {}).update(item)
    schemas = doc.setdefault("components", {}).setdefault("schemas", {})
    schemas.update(extra.get("schemas") or {})
    tags = doc.setdefault("tags", [])
    known = {tag["name"] for tag in tags}
    tags.extend(tag for tag in extra.get("tags") or [] if tag["name"] not in known)


OpenAPIProvider = Callable[[Flask], dict[str, Any]]
