"""${message}

Revision ID: ${up_revision}
Revises: ${down_revision | comma,n}
Create Date: ${create_date}
"""

import sqlalchemy as sa
from alembic import op

import trellis.db
${imports if imports else ""}
<%!
    import json

    def literal(value):
        """Ids as the formatter writes them: double quotes (tuples of ids stay tuples)."""
        if isinstance(value, (tuple, list)):
            return "(" + ", ".join(json.dumps(v) for v in value) + ("," if len(value) == 1 else "") + ")"
        return "None" if value is None else json.dumps(value)
%>
revision = ${literal(up_revision)}
down_revision = ${literal(down_revision)}
branch_labels = ${literal(branch_labels)}
depends_on = ${literal(depends_on)}


def upgrade() -> None:
    ${upgrades if upgrades else "pass"}


def downgrade() -> None:
    ${downgrades if downgrades else "pass"}
