"""Trellis Database module: admin-defined schemas, JSON documents with a query language, custom
endpoints, GraphQL and request-time OpenAPI (see docs/database.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from flask import Flask
from marshmallow import fields as ma
from marshmallow import validate
from sqlalchemy import event

from trellis import ConsolePage, EventTopic, Module
from trellis.module_config import ModuleConfigSchema
from trellis.project import taking_part

from . import (
    counts,
    document_access,
    live,
    models,  # noqa: F401  (the tables belong to the shared metadata)
)
from .backup import BackupHooks
from .client_types import ClientTypes
from .graphql_http import graphql_blp
from .live_http import SETTINGS, changes_blp
from .live_sockets import namespace_factories
from .openapi import paths as openapi_paths
from .project_part import DatabasePart
from .registry import Registry
from .routes import documents_blp, endpoints_blp, schemas_blp


class DatabaseConfig(ModuleConfigSchema):
    graphqlMaxQueryLength = ma.Integer(
        load_default=20000,
        validate=validate.Range(min=100, max=1_000_000),
        metadata={"description": "characters of one GraphQL query"},
    )
    graphqlMaxTokens = ma.Integer(load_default=5000, validate=validate.Range(min=50, max=100_000))
    graphqlMaxDepth = ma.Integer(
        load_default=15,
        validate=validate.Range(min=2, max=50),
        metadata={"description": "nesting of selections (introspection needs ~12)"},
    )
    graphqlMaxFields = ma.Integer(
        load_default=1000,
        validate=validate.Range(min=10, max=100_000),
        metadata={"description": "selected fields, fragments expanded"},
    )
    graphqlMaxAliases = ma.Integer(load_default=30, validate=validate.Range(min=0, max=10_000))


def _sqlite_functions(dbapi_connection: Any, _record: Any) -> None:
    # Case-insensitive $contains with Unicode folding (SQLite's own lower() folds ASCII only).
    dbapi_connection.create_function(
        "trellis_lower", 1, lambda v: v.lower() if isinstance(v, str) else v, deterministic=True
    )


def init_app(app: Flask) -> None:
    app.extensions["trellis_database"] = Registry()
    counts.init_app(app)
    live.init_app(app)
    document_access.init_app(app)
    engine = app.extensions["trellis"].engine
    if engine.dialect.name == "sqlite":
        event.listen(engine, "connect", _sqlite_functions)
        engine.dispose()  # connections opened before this listener existed lack the function


# The files of the module's page in the admin console (see ConsolePage).
CONSOLE = Path(__file__).parent / "console"

module = Module(
    name="database",
    requires=("authentication",),
    # changes_blp before documents_blp: /database/<name>/changes is not a document id
    blueprints=(schemas_blp, changes_blp, documents_blp, endpoints_blp, graphql_blp),
    socket_namespaces=namespace_factories(),
    config_schema=DatabaseConfig,
    migrations=str(Path(__file__).parent / "migrations" / "versions"),
    console_pages=(ConsolePage("database", "Database", str(CONSOLE / "database.html"), str(CONSOLE / "database.js")),),
    openapi_paths=openapi_paths,
    settings=SETTINGS,
    init_app=init_app,
    hooks=(BackupHooks(), ClientTypes(), taking_part(DatabasePart())),
    # One <thing> per schema: database.<schemaName>.<action>.
    events=(
        EventTopic(
            "database.*.create",
            "Documents were created in the schema named by the middle segment",
            {"document": "the document as created, with its _id"},
        ),
        EventTopic(
            "database.*.update",
            "Documents of the schema were updated (with their previous version)",
            {"document": "the document after the update", "previous": "the document before it"},
        ),
        EventTopic(
            "database.*.delete",
            "Documents of the schema were deleted",
            {
                "document": "{_id} of the deleted document",
                "previous": "the document as it was",
                "grants": "under access control: [[subject, relation], ...], the grants removed with it",
            },
        ),
    ),
    description="Schemas, documents, custom endpoints and GraphQL",
)
