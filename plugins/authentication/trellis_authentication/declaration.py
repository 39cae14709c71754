"""The ``trellis.Module`` this package exposes (entry point ``authentication``)."""

from __future__ import annotations

from pathlib import Path

from flask import Flask

from trellis import ConsolePage, EventTopic, Module, OwnedSchema, connections

from . import (  # noqa: F401  (their routes join blp)
    lifecycle_routes,
    oauth_routes,
    self_service_routes,
    team_admin_routes,
    team_routes,
)
from .cli import cli
from .config import AuthenticationConfig
from .delivery import create_templates_on_start
from .hooks import UserTokens
from .pages import pages
from .routes import blp
from .teams import TEAM_EVENTS
from .users import user_id_of

USER_SCHEMA = OwnedSchema(
    name="User",
    fields={
        "email": {"type": "String", "unique": True, "description": "null for a user who signs in by phone"},
        "isActive": {"type": "Boolean", "default": True, "description": "false when blocked"},
        "isVerified": {"type": "Boolean", "default": False},
        "phoneNumber": {"type": "String", "unique": True},
        "twoFaEnabled": {"type": "Boolean", "default": False},
        "providers": ["String"],
    },
    owner_module="authentication",
    can_modify="ExtensionOnly",
    extendable=True,
)


def _init_app(app: Flask) -> None:
    # A blocked or deleted user's sockets and streams end in every process (this one ends them at once).
    for action in ("block", "delete"):
        connections.end_users_on(app, f"authentication.user.{action}", user_id_of)
    create_templates_on_start(app)


# Every user event carries the user (read back with users.user_id_of).
USER_PAYLOAD = {"user": "the user as the API shows it (no secrets)"}

# The files of the module's page in the admin console (see ConsolePage).
CONSOLE = Path(__file__).parent / "console"

module = Module(
    name="authentication",
    # Mail (verification, reset, magic link, invites) and SMS codes go through these modules' service
    # functions; without them those routes answer 400 naming the module (delivery.require_module).
    uses=("email", "sms"),
    description="Users, sign-in by password, magic link, phone or external providers, two-factor, tokens, blocking",
    blueprints=(blp, pages),
    config_schema=AuthenticationConfig,
    migrations=str(Path(__file__).parent / "migrations" / "versions"),
    console_pages=(
        ConsolePage("users", "Users", str(CONSOLE / "users.html")),
        ConsolePage("teams", "Teams", str(CONSOLE / "teams.html"), str(CONSOLE / "teams.js")),
    ),
    owned_schemas=(USER_SCHEMA,),
    hooks=(UserTokens(),),
    cli=cli,
    init_app=_init_app,
    events=(
        EventTopic(
            "authentication.user.create", "A user was created (sign-up, admin, phone or provider sign-in)", USER_PAYLOAD
        ),
        EventTopic("authentication.user.block", "A user was blocked: their sessions and connections end", USER_PAYLOAD),
        EventTopic("authentication.user.unblock", "A blocked user was unblocked", USER_PAYLOAD),
        EventTopic("authentication.user.delete", "A user was deleted", USER_PAYLOAD),
        *TEAM_EVENTS,
    ),
)
