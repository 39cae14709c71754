"""Trellis Authorization module: who may read and change each document (see docs/access.md).

Relation tuples (``User:1 owner Task:9``), resource definitions (which relations grant which permission,
with one-hop inheritance through Relation fields), the subjects a request acts as (its user, its teams
and their ancestors, ``User:*``, ``*``), and the SQL condition that restricts a document query to what a
caller may read. The Database module reaches it only through ``trellis.access.control()``.
"""

from __future__ import annotations

from pathlib import Path

from flask import Flask

from trellis import ConsolePage, EventTopic, Module, access
from trellis.project import taking_part

from . import definitions, models  # noqa: F401  (the tables belong to the shared metadata)
from .control import Control, Hooks
from .project_part import ResourcesPart
from .routes import blp


def _init_app(app: Flask) -> None:
    definitions.init_app(app)
    access.provide(app, Control())


# A grant's and a revoke's payload (read back with trellis.access.LiveAudiences.grant_change).
GRANT_PAYLOAD = {
    "resource": "<Schema>:<documentId>",
    "subject": "User:<id>, Team:<id>, User:* or *",
    "relation": "the relation granted or revoked",
}

# The files of the module's page in the admin console (see ConsolePage).
CONSOLE = Path(__file__).parent / "console"

module = Module(
    name="authorization",
    requires=("authentication",),
    blueprints=(blp,),
    console_pages=(ConsolePage("access", "Access control", str(CONSOLE / "access.html"), str(CONSOLE / "access.js")),),
    description="Per-document access control: relation tuples, resource definitions, teams as subjects",
    migrations=str(Path(__file__).parent / "migrations" / "versions"),
    hooks=(Hooks(), taking_part(ResourcesPart())),
    init_app=_init_app,
    events=(
        EventTopic(
            "authorization.*.grant",
            "A relation on a document of the schema named by the middle segment was granted",
            GRANT_PAYLOAD,
        ),
        EventTopic("authorization.*.revoke", "A relation on a document of the schema was revoked", GRANT_PAYLOAD),
    ),
)
