"""Alembic environment for Trellis: the core's versions plus each loaded module's branch.

Run through ``flask --app wsgi trellis db upgrade`` (see ``trellis.migrate``), which hands us the
app's engine; every module's models are imported by then, so ``Base.metadata`` is complete.
"""

from alembic import context

from trellis.db import SQLITE_FOREIGN_KEYS_OFF, Base, foreign_key_violation
from trellis.migrate import include_object

config = context.config
target_metadata = Base.metadata


def _run(connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        # SQLite cannot ALTER most things; batch mode recreates tables instead.
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
        # `flask trellis db revision --module NAME` compares that module's tables only.
        include_object=include_object(config.attributes.get("include_tables")),
    )
    with context.begin_transaction():
        context.run_migrations()
        broken = foreign_key_violation(connection)
        if broken is not None:
            raise RuntimeError(f"the migrations left {broken}; nothing was changed")


def run_migrations_online() -> None:
    given = config.attributes.get("connection")
    if given is not None:  # a restore's transaction (trellis.backups.restore): it commits or rolls back
        _run(given)
        return
    with config.attributes["engine"].connect() as connection:
        _run(connection.execution_options(**{SQLITE_FOREIGN_KEYS_OFF: True}))
        connection.commit()


if context.is_offline_mode():
    raise SystemExit("Trellis migrations run online only: flask --app wsgi trellis db upgrade")
run_migrations_online()
