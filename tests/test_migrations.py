"""Alembic: an empty database upgrades to heads, matches the models, and downgrades to nothing."""

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect

from trellis import create_app, db, events
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


def test_upgrade_keeps_child_rows_of_a_table_that_sqlite_batch_mode_recreates(app_config, empty_database_url):
    """webhooks_0002 changes a column's nullability: SQLite's batch mode copies ``webhooks`` to a new table
    and drops the old one. With foreign keys on, that DROP deletes every row first, cascading to
    ``webhooks_deliveries``: an upgrade from webhooks_0001 must keep the deliveries."""
    app = create_app({**app_config, "DATABASE_URL": empty_database_url})
    engine = app.extensions["trellis"].engine
    upgrade(app, "webhooks_0001")
    stamp = "2026-11-01 00:00:00"
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "INSERT INTO webhooks (id, url, events, secret, active, created_at, updated_at) "
            f"VALUES ('w1', 'http://127.0.0.1/x', '[]', 's', true, '{stamp}', '{stamp}')"
        )
        conn.exec_driver_sql(
            "INSERT INTO webhooks_deliveries (id, webhook_id, event, body, status, attempts, next_attempt_at, "
            f"created_at) VALUES ('d1', 'w1', 'e', '{{}}', 'pending', 0, '{stamp}', '{stamp}')"
        )
    upgrade(app)
    with engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT count(*) FROM webhooks_deliveries").scalar() == 1
        assert conn.exec_driver_sql("SELECT active_since IS NOT NULL FROM webhooks").scalar()
        if conn.dialect.name == "sqlite":
            assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
    engine.dispose()


def test_upgrade_to_the_pending_table_keeps_unnumbered_events_and_numbers_them_in_order(app_config, empty_database_url):
    """core_0007: events a PostgreSQL sequencer had not numbered yet (NULL event_id) move to
    core_events_pending and are numbered after the last number, in insert order; the downgrade puts pending
    events back as unnumbered rows."""
    app = create_app({**app_config, "DATABASE_URL": empty_database_url})
    engine = app.extensions["trellis"].engine
    upgrade(app, "core_0006")
    postgresql = engine.dialect.name == "postgresql"
    columns = "(id, event_id, topic, family, payload, created_at)"
    stamp = "2026-11-01 00:00:00"
    with engine.begin() as conn:
        conn.exec_driver_sql(f"INSERT INTO core_events {columns} VALUES (1, 1, 'a.b.c', 'a.b', '{{}}', '{stamp}')")
        if postgresql:  # SQLite numbered every event as it inserted it
            for row_id in (3, 2):
                conn.exec_driver_sql(
                    f"INSERT INTO core_events {columns} VALUES ({row_id}, NULL, 'a.b.n{row_id}', 'a.b', '{{}}', '{stamp}')"
                )
            conn.exec_driver_sql("SELECT setval('core_events_id_seq', 3)")
    upgrade(app)
    with app.app_context():
        log = app.extensions["trellis_events"]
        numbered = log.sequence()
        assert [(e.id, e.topic) for e in numbered] == ([(2, "a.b.n2"), (3, "a.b.n3")] if postgresql else [])
        events.record("a.b.later", {})
        db.session.commit()
        log.sequence()
        assert [e.topic for e in events.read(0)] == [
            "a.b.c",
            *(["a.b.n2", "a.b.n3"] if postgresql else []),
            "a.b.later",
        ]
        assert [e.id for e in events.read(0)] == list(range(1, 5 if postgresql else 3))
        db.session.remove()
        log.stop()
    if postgresql:  # insert order is shared: the later event's row id follows the moved ones
        with engine.connect() as conn:
            assert conn.exec_driver_sql("SELECT id FROM core_events WHERE topic = 'a.b.later'").scalar() == 4
        with engine.begin() as conn:
            conn.exec_driver_sql(
                f"INSERT INTO core_events_pending (topic, family, payload, created_at) VALUES ('a.b.p', 'a.b', '{{}}', '{stamp}')"
            )
    downgrade(app, "core_0006")
    with engine.connect() as conn:
        unnumbered = conn.exec_driver_sql("SELECT topic FROM core_events WHERE event_id IS NULL").scalars().all()
    assert unnumbered == (["a.b.p"] if postgresql else [])
    engine.dispose()
