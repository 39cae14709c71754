"""Durable consumers of the event log (``trellis.events.consumer``): a named cursor in the database, moved
in the consumer's transaction, found again after a restart; and the Webhooks cursor carried over."""

from __future__ import annotations

import sqlalchemy as sa

from trellis import create_app, db, events
from trellis.migrate import downgrade, upgrade
from trellis.models import EventConsumer

table = EventConsumer.__table__


def _forget(app) -> None:
    with app.extensions["trellis"].engine.begin() as connection:
        connection.execute(table.delete().where(table.c.name == "test-consumer"))


def test_a_consumer_resumes_where_its_last_commit_left_it(app, app_config):
    _forget(app)
    try:
        with app.app_context():
            cursor = events.consumer("test-consumer")
            assert cursor.position() is None  # never ran
            assert cursor.lock() == 0  # the first lock creates it: from the start of what the log keeps
            cursor.advance(7)
            db.session.commit()
            assert cursor.lock() == 7
            cursor.advance(9)
            db.session.rollback()  # the work failed: the cursor stays with it
            db.session.remove()
        restarted = create_app(app_config)  # another process, or this one after a restart
        with restarted.app_context():
            assert events.consumer("test-consumer").lock() == 7
            db.session.rollback()
            db.session.remove()
    finally:
        _forget(app)


def test_the_core_migration_carries_over_the_webhooks_cursor(app_config, empty_database_url):
    app = create_app({**app_config, "DATABASE_URL": empty_database_url})
    engine = app.extensions["trellis"].engine
    try:
        upgrade(app)
        downgrade(app, "webhooks_0002")  # a deployment from before: the Webhooks module's own cursor
        downgrade(app, "core_0003")
        with engine.begin() as connection:
            connection.execute(sa.text("INSERT INTO webhooks_cursor (name, last_event_id) VALUES ('events', 42)"))
        upgrade(app)
        with engine.connect() as connection:
            rows = connection.execute(sa.select(table.c.name, table.c.last_event_id)).all()
            assert [tuple(row) for row in rows] == [("webhooks", 42)]
            assert not sa.inspect(connection).has_table("webhooks_cursor")
        downgrade(app, "webhooks_0002")  # and back: the position returns to the module's table
        with engine.connect() as connection:
            assert connection.execute(sa.text("SELECT last_event_id FROM webhooks_cursor")).scalar() == 42
    finally:
        engine.dispose()
