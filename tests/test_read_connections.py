"""The read connections' idle list (``trellis.reads.ReadConnections``, PostgreSQL): a request's connection
is kept checked out for the next one, and given back to the pool when it idled too long or when a
connection was found dead (the pool then replaces every connection older than the disconnect)."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from sqlalchemy.exc import DBAPIError

from trellis import statements
from trellis.reads import ReadConnections
from trellis.testing.plugin import database_kind

pytestmark = pytest.mark.skipif(database_kind() != "postgresql", reason="SQLite reads use the main engine")


@pytest.fixture()
def reads(trellis_database_url):
    main = sa.create_engine(trellis_database_url, pool_size=1, max_overflow=0)
    provider = ReadConnections(main)
    yield provider
    provider.dispose()
    main.dispose()


def _backend(connection: sa.Connection) -> int:
    return connection.exec_driver_sql("SELECT pg_backend_pid()").scalar_one()


def test_a_closed_read_connection_serves_the_next_request_without_a_checkout(reads):
    first = reads.open()
    pid = _backend(first)  # SQLAlchemy begins its transaction object: given back, it is rolled back
    reads.close(first)
    assert reads.engine.pool.checkedout() == 1  # kept, not checked in
    again = reads.open()
    assert again is first and not again.in_transaction() and _backend(again) == pid
    other = reads.open()  # none idle: a second one from the pool
    assert other is not first and reads.engine.pool.checkedout() == 2
    reads.close(again)
    reads.close(other)
    assert reads.open() is other  # last in, first out
    reads.close(other)


def test_a_connection_idle_too_long_goes_back_to_the_pool(reads, monkeypatch):
    connection = reads.open()
    _backend(connection)
    reads.close(connection)
    monkeypatch.setattr(ReadConnections, "IDLE_SECONDS", 0.0)
    fresh = reads.open()
    assert fresh is not connection and connection.closed
    assert reads.engine.pool.checkedout() == 1  # the old one went back to the pool, the new one is out
    reads.close(fresh)


def test_a_dead_connection_gives_every_idle_one_back(reads):
    kept, dying = reads.open(), reads.open()
    reads.close(kept)
    victim = _backend(dying)
    with reads.engine.connect() as killer:
        killer.exec_driver_sql(f"SELECT pg_terminate_backend({victim})")
    # The hot path's way: the driver's cursor, the pool entry invalidated on a disconnect.
    with pytest.raises(DBAPIError) as failed:
        statements.execute_compiled(dying, sa.select(sa.literal(1)), {})
    assert failed.value.connection_invalidated
    reads.close(dying)
    assert dying.closed and kept.closed  # kept predates the disconnect: back to the pool with it
    assert reads.engine.pool.checkedout() == 0
    fresh = reads.open()
    assert fresh is not kept and _backend(fresh) != victim
    reads.close(fresh)


def test_read_one_gives_the_row_sqlalchemy_gives(app):
    """``reads.read_one`` runs on the driver's cursor: same values (a UTC timestamp through the column type's
    conversion), columns as attributes; no row is None."""
    from trellis import reads
    from trellis.models import Admin

    statement = sa.select(Admin.id, Admin.username, Admin.token_version, Admin.created_at).where(
        Admin.username == sa.bindparam("name")
    )
    with app.extensions["trellis"].engine.connect() as connection:
        name = connection.execute(sa.select(Admin.username)).scalars().first()
    with app.app_context():
        direct = reads.read_one(statement, name=name)
        missing = reads.read_one(statement, name="nobody-by-that-name")
    with app.extensions["trellis"].engine.connect() as connection:
        expected = connection.execute(statement, {"name": name}).one()
    assert direct is not None and not isinstance(direct, sa.Row)  # the cursor's row, not SQLAlchemy's
    assert tuple(direct) == tuple(expected)
    assert direct.created_at == expected.created_at and direct.created_at.tzinfo is not None
    assert direct.username == name and missing is None


def _in_block(connection: sa.Connection) -> bool:
    """Whether the server holds a transaction block open on the connection (autocommit: SQLAlchemy's view
    says nothing about what was opened by hand)."""
    return connection.connection.dbapi_connection.info.transaction_status != 0  # psycopg2: IDLE is 0


def test_a_snapshot_reads_one_state_and_gives_its_connection_back_outside_a_transaction(reads, trellis_database_url):
    writer = sa.create_engine(trellis_database_url)
    with writer.begin() as c:
        c.exec_driver_sql("CREATE TABLE snap_probe (n int)")
    try:
        with reads.snapshot() as connection:
            first = connection.exec_driver_sql("SELECT count(*) FROM snap_probe").scalar_one()
            with writer.begin() as c:
                c.exec_driver_sql("INSERT INTO snap_probe VALUES (1)")  # committed meanwhile
            assert connection.exec_driver_sql("SELECT count(*) FROM snap_probe").scalar_one() == first == 0
            with pytest.raises(DBAPIError):  # read only
                connection.exec_driver_sql("INSERT INTO snap_probe VALUES (2)")
        assert reads.engine.pool.checkedout() == 1  # no checkout of the main pool, and its own kept idle
        again = reads.open()
        assert again is connection and not _in_block(again)  # the failed block was rolled back
        assert again.exec_driver_sql("SELECT count(*) FROM snap_probe").scalar_one() == 1
        reads.close(again)
        with reads.snapshot() as connection:
            connection.exec_driver_sql("SELECT 1")
        assert not _in_block(reads.open())
    finally:
        with writer.begin() as c:
            c.exec_driver_sql("DROP TABLE snap_probe")
        writer.dispose()
