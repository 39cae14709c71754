"""database module: schemas under access control take creates from signed-in users only

Opting a schema in to access control now sets ``crudOperations.create.authenticated`` (a document under
access control must have an owner). Schemas opted in before kept the default ``false``, which cannot be
told from a choice: they get ``true``, as the rule has it; an administrator who wants anonymous creates
there says so with ``create: {authenticated: false}``. The downgrade leaves the switches as they are.

Revision ID: database_0004
Revises: database_0003
Create Date: 2026-11-29
"""

import json
from typing import Any

import sqlalchemy as sa
from alembic import op

import trellis.db

revision = "database_0004"
down_revision = "database_0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    connection = op.get_bind()
    update = sa.text("UPDATE database_schemas SET model_options = :options WHERE id = :id").bindparams(
        sa.bindparam("options", type_=trellis.db.JSONType)
    )
    for schema_id, stored in connection.execute(sa.text("SELECT id, model_options FROM database_schemas")).all():
        options = json.loads(stored) if isinstance(stored, str) else stored
        if _closes_anonymous_creates(options):
            connection.execute(update, {"options": options, "id": schema_id})


def _closes_anonymous_creates(options: Any) -> bool:
    """Set ``create.authenticated`` in ``options`` when the schema is under access control and it is off."""
    conduit = options.get("conduit") if isinstance(options, dict) else None
    if not isinstance(conduit, dict) or not (conduit.get("authorization") or {}).get("enabled"):
        return False
    create = ((conduit.get("cms") or {}).get("crudOperations") or {}).get("create")
    if not isinstance(create, dict) or create.get("authenticated"):
        return False
    create["authenticated"] = True
    return True


def downgrade() -> None:
    pass
