"""Core test helpers: apps built from hand-made modules that share the session's database."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from marshmallow import fields, validate
from sqlalchemy import create_engine
from sqlalchemy.engine import make_url

from trellis import Module, create_app
from trellis.credentials import require_user
from trellis.hooks import hookimpl
from trellis.http import Blueprint
from trellis.module_config import ModuleConfigSchema
from trellis.testing.plugin import database_kind


class GreeterConfig(ModuleConfigSchema):
    greeting = fields.String(load_default="hello")
    repeat = fields.Integer(load_default=1, validate=validate.Range(min=1, max=5))


greeter_blp = Blueprint("greeter", __name__, url_prefix="/greeter", description="test module")


@greeter_blp.route("/hello")
@greeter_blp.response(200)
def hello():
    from trellis.module_config import get

    config = get("greeter")
    return {"message": " ".join([config["greeting"]] * config["repeat"])}


@greeter_blp.route("/me")
@greeter_blp.response(200)
def me():
    return {"user": require_user().id}


@greeter_blp.route("/boom")
def boom():
    raise RuntimeError("secret internals: password=hunter2")


class FakeUsers:
    """Stands in for an authentication module: accepts user tokens whose subject is not 'blocked'."""

    @hookimpl
    def trellis_user_from_claims(self, claims: dict[str, Any]):
        from trellis.errors import forbidden

        if claims["sub"] == "blocked":
            raise forbidden("User is blocked")
        return {"_id": claims["sub"]}


GREETER = Module(name="greeter", blueprints=(greeter_blp,), config_schema=GreeterConfig, hooks=(FakeUsers(),))


@pytest.fixture()
def greeter_app(app_config, app):
    """A second app (think: another worker) on the same database, with the greeter module."""
    return create_app(app_config, modules=[GREETER])


@pytest.fixture()
def greeter_client(greeter_app, db):
    return greeter_app.test_client()


@pytest.fixture()
def make_user_token():
    """A user-kind JWT signed by the app (the greeter's fake user hook accepts it)."""
    from flask_jwt_extended import create_access_token

    def make(app, subject: str = "user-1") -> str:
        with app.app_context():
            return create_access_token(identity=subject, additional_claims={"kind": "user"})

    return make


@pytest.fixture()
def empty_database_url(tmp_path, trellis_database_url):
    """A second, empty database of the kind under test (dropped afterwards)."""
    if database_kind() == "sqlite":
        yield f"sqlite:///{tmp_path / 'empty.db'}"
        return
    url = make_url(trellis_database_url)
    name = f"trellis_mig_{uuid.uuid4().hex[:8]}"
    admin = create_engine(url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    try:
        yield url.set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()


@pytest.fixture()
def module_cli_env(tmp_path, empty_database_url) -> Callable[..., dict[str, str]]:
    """``make(*sources, modules="tiny")``: the environment of a ``flask trellis`` subprocess on an empty
    database, with the module packages at ``sources`` pip-installed into a private folder (never into the
    project's virtualenv) that it imports from."""

    def make(*sources: Path, modules: str = "tiny") -> dict[str, str]:
        env = {
            **os.environ,
            "TRELLIS_DATABASE_URL": empty_database_url,
            "TRELLIS_MASTER_KEY": "k",
            "TRELLIS_SECRET_KEY": "s" * 40,
            "TRELLIS_INSTANCE_PATH": str(tmp_path / "instance"),
            "TRELLIS_ASYNC_MODE": "threading",
            "TRELLIS_MODULES": modules,
        }
        if sources:
            target = tmp_path / "site"
            pip = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target)]
            subprocess.run([*pip, *map(str, sources)], check=True, capture_output=True)
            env["PYTHONPATH"] = str(target)
        return env

    return make
