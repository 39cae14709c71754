"""Alembic: an empty database upgrades to heads, matches the models, and downgrades to nothing."""

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect

from trellis import create_app
from trellis.db import Base
from trellis.migrate import downgrade, upgrade


def test_upgrade_matches_models_and_downgrade_removes_everything(app_config, empty_database_url):
    app = create_app({**app_config, "DATABASE_URL": empty_database_url})
    engine = app.extensions["trellis"].engine
    upgrade(app)
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn, opts={"compare_type": True}), Base.metadata)
    assert diff == [], f"models and migrations differ: {diff}"
    tables = set(inspect(engine).get_table_names())
    assert {"trellis_admins", "trellis_module_configs", "trellis_cache_generations"} <= tables
    # every loaded module's tables are there too
    assert {t.name for t in Base.metadata.sorted_tables} <= tables
    downgrade(app, "base")
    assert set(inspect(engine).get_table_names()) <= {"alembic_version"}
    engine.dispose()
