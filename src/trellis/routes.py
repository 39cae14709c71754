"""The host's own routes: admin login, module configuration, health, the site icon."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from flask import Flask, Response, current_app, send_from_directory
from marshmallow import Schema, fields
from sqlalchemy import select, text

from . import db
from .credentials import admin_required, issue_admin_token, master_key_required
from .errors import APIError, ErrorSchema, unauthorized
from .http import Blueprint, FreeFormSchema
from .models import Admin
from .passwords import verify_password
from .shared_redis import redis_client

blp = Blueprint("core", __name__, description="Administrator sign-in, module configuration, health")
STATIC = Path(__file__).parent / "static"
FAVICON_MAX_AGE = 7 * 24 * 3600


class LoginSchema(Schema):
    username = fields.String(required=True)
    password = fields.String(required=True, load_only=True)


class TokenSchema(Schema):
    token = fields.String(required=True)


class HealthSchema(Schema):
    status = fields.String(required=True)
    database = fields.String(required=True)
    redis = fields.String()


class ModuleConfigurationSchema(FreeFormSchema):
    """A module configuration: free-form here, validated by the module's own schema."""


class ModuleInfoSchema(Schema):
    name = fields.String(required=True)
    requires = fields.List(fields.String(), required=True)
    description = fields.String()
    active = fields.Boolean(required=True)


class ModulesSchema(Schema):
    modules = fields.List(fields.Nested(ModuleInfoSchema), required=True)
    count = fields.Integer(required=True)


@blp.route("/login", methods=["POST"])
@master_key_required
@blp.arguments(LoginSchema)
@blp.response(200, TokenSchema)
def login(body: dict[str, Any]):
    """Administrator sign-in (needs the master key)."""
    admin = db.session.execute(select(Admin).where(Admin.username == body["username"])).scalar_one_or_none()
    if not verify_password(admin.password_hash if admin else None, body["password"]) or admin is None:
        raise unauthorized("Wrong username or password")
    return {"token": issue_admin_token(admin)}


def _configs():
    return current_app.extensions["trellis"].configs


@blp.route("/config/<string:moduleName>", methods=["GET"])
@admin_required
@blp.response(200, ModuleConfigurationSchema)
def get_config(moduleName: str):
    """A module's configuration (stored values merged with the defaults); secret values show as `********`."""
    return _configs().shown(moduleName)


@blp.route("/config/<string:moduleName>/schema", methods=["GET"])
@admin_required
@blp.response(200, ModuleConfigurationSchema)
def get_config_schema(moduleName: str):
    """JSON Schema of a module's configuration (what PUT accepts), e.g. to build a form."""
    return _configs().json_schema(moduleName)


@blp.route("/config", methods=["GET"])
@admin_required
@blp.response(200, ModulesSchema)
def list_modules():
    """The loaded modules, in start-up order, with their `active` flag."""
    configs = _configs()
    modules = [
        {
            "name": m.name,
            "requires": list(m.requires),
            "description": m.description,
            "active": configs.is_active(m.name),
        }
        for m in current_app.extensions["trellis"].modules
    ]
    return {"modules": modules, "count": len(modules)}


@blp.route("/config/<string:moduleName>", methods=["PUT"])
@admin_required
@blp.arguments(ModuleConfigurationSchema)
@blp.response(200, ModuleConfigurationSchema)
@blp.alt_response(400, schema=ErrorSchema, description="The configuration does not validate; `errors` lists the fields")
def put_config(body: dict[str, Any], moduleName: str):
    """Change a module's configuration: the body is merged into the current one, then validated.

    A secret sent as `********` (as `GET` shows it) keeps its stored value.
    """
    return _configs().shown(moduleName, _configs().put(moduleName, body))


@blp.route("/health", methods=["GET"])
@blp.response(200, HealthSchema)
@blp.alt_response(503, schema=HealthSchema, description="A dependency is down")
def health():
    """Liveness and dependencies: database (and Redis when configured)."""
    result = {"status": "ok", "database": "ok"}
    try:
        db.session.execute(text("SELECT 1"))
    except Exception as exc:  # reported, not raised: health must answer
        current_app.logger.warning("health: database check failed: %s", exc.__class__.__name__)
        result.update(status="unavailable", database="unavailable")
    redis = redis_client()
    if redis is not None:
        try:
            redis.ping()
            result["redis"] = "ok"
        except Exception as exc:
            current_app.logger.warning("health: redis check failed: %s", exc.__class__.__name__)
            result.update(status="unavailable", redis="unavailable")
    if result["status"] != "ok":
        raise _Unavailable(result)
    return result


class _Unavailable(APIError):
    def __init__(self, result: dict[str, Any]) -> None:
        super().__init__(503, "A dependency is down")
        self.result = result


@blp.errorhandler(_Unavailable)
def _unavailable(error: _Unavailable):
    return error.result, 503


def serve_favicon(app: Flask) -> None:
    """``/favicon.ico``: browsers ask for it on every page (Swagger UI, the mailed pages), and a 404 is
    a console error each time. Not an API operation, so not in the OpenAPI document."""

    def favicon() -> Response:
        return send_from_directory(STATIC, "favicon.ico", mimetype="image/x-icon", max_age=FAVICON_MAX_AGE)

    app.add_url_rule("/favicon.ico", "favicon", favicon, methods=["GET"])
