"""The ``trellis.Module`` this package exposes (entry point ``authentication``)."""
from __future__ import annotations

from pathlib import Path

from trellis import Module, OwnedSchema

from .cli import cli
from .config import AuthenticationConfig
from .hooks import UserTokens
from .routes import blp

USER_SCHEMA = OwnedSchema(
    name="User",
    fields={
        "email": {"type": "String", "required": True, "unique": True},
        "isActive": {"type": "Boolean", "default": True, "description": "false when blocked"},
        "isVerified": {"type": "Boolean", "default": False},
    },
    owner_module="authentication",
    can_modify="ExtensionOnly",
    extendable=True,
)

module = Module(
    name="authentication",
    description="Users, sign-in with email and password, access and refresh tokens, blocking",
    blueprints=(blp,),
    config_schema=AuthenticationConfig,
    migrations=str(Path(__file__).parent / "migrations" / "versions"),
    owned_schemas=(USER_SCHEMA,),
    hooks=(UserTokens(),),
    cli=cli,
)
