"""Statements prepared once per connection on the server (``trellis.statements``, PostgreSQL): the same
answers as unprepared statements, through DDL that changes a prepared statement's result or parameter
types, a connection reused from the pool, a connection that lost its prepared statements (a pooler, a
``DISCARD ALL``), and a PostgreSQL restart (throwaway cluster)."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from trellis import statements
from trellis.testing.pg_cluster import BINARIES
from trellis.testing.plugin import database_kind

pytestmark = pytest.mark.skipif(database_kind() != "postgresql", reason="server-side preparation is PostgreSQL's")

_TABLE = sa.Table(
    "test_prepared",
    sa.MetaData(),
    sa.Column("id", sa.String(8), primary_key=True),
    sa.Column("n", sa.Integer, nullable=True),
)
_BELOW = sa.select(_TABLE.c.id, _TABLE.c.n).where(_TABLE.c.n < sa.bindparam("limit")).order_by(_TABLE.c.id)
_ADD = sa.insert(_TABLE).values(id=sa.bindparam("id"), n=sa.bindparam("n")).returning(_TABLE.c.id)


@pytest.fixture()
def engine(trellis_database_url):
    """An engine like the read connections' (autocommit), preparing, on a table of its own."""
    made = sa.create_engine(trellis_database_url, isolation_level="AUTOCOMMIT", pool_size=1, max_overflow=0)
    statements.prepare_statements(made)
    with made.connect() as connection:
        _TABLE.drop(connection, checkfirst=True)
        _TABLE.create(connection)
        connection.execute(sa.insert(_TABLE), [{"id": "a", "n": 1}, {"id": "b", "n": 5}, {"id": "c", "n": 9}])
    yield made
    with made.connect() as connection:
        _TABLE.drop(connection)
    made.dispose()


def _prepared_names(connection: sa.Connection) -> set[str]:
    return set(connection.exec_driver_sql("SELECT name FROM pg_prepared_statements").scalars())


def _below(connection: sa.Connection, limit: object, cache: dict) -> list[tuple]:
    return [tuple(row) for row in statements.execute_compiled(connection, _BELOW, {"limit": limit}, cache)]


def test_a_statement_is_prepared_once_per_connection_and_answers_as_before(engine):
    cache: dict = {}
    with engine.connect() as connection:
        assert _prepared_names(connection) == set()
        for _ in range(8):  # past the five custom plans: PostgreSQL's generic plan answers alike
            assert _below(connection, 6, cache) == [("a", 1), ("b", 5)]
        assert _below(connection, 100, cache) == [("a", 1), ("b", 5), ("c", 9)]
        names = _prepared_names(connection)
        assert len(names) == 1 and next(iter(names)).startswith("t_")
    with engine.connect() as connection:  # the same connection, back from the pool: still prepared
        assert _prepared_names(connection) == names
        assert _below(connection, 2, cache) == [("a", 1)]
        assert _prepared_names(connection) == names


def test_a_statement_in_a_transaction_is_not_prepared(trellis_database_url, engine):
    in_transactions = sa.create_engine(trellis_database_url, pool_size=1, max_overflow=0)
    statements.prepare_statements(in_transactions)
    try:
        with in_transactions.begin() as connection:
            assert _below(connection, 6, {}) == [("a", 1), ("b", 5)]
            assert _prepared_names(connection) == set()
    finally:
        in_transactions.dispose()


def test_a_failed_execute_leaves_its_prepared_statement_usable(engine):
    """A PREPARE is not undone by the EXECUTE after it failing (here a unique violation)."""
    cache: dict = {}
    with engine.connect() as connection:
        with pytest.raises(sa.exc.IntegrityError):
            statements.execute_compiled(connection, _ADD, {"id": "a", "n": 2}, cache)
        assert [tuple(r) for r in statements.execute_compiled(connection, _ADD, {"id": "d", "n": 2}, cache)] == [("d",)]
        assert _below(connection, 3, cache) == [("a", 1), ("d", 2)]


def test_ddl_that_changes_a_prepared_statements_types_is_met_by_preparing_again(engine):
    cache: dict = {}
    with engine.connect() as connection:
        for _ in range(6):
            assert _below(connection, 6, cache) == [("a", 1), ("b", 5)]
        # The result type changes ("cached plan must not change result type") and `n < $1` no longer
        # fits the parameter's integer type (text < integer): both cured by preparing again.
        connection.exec_driver_sql("ALTER TABLE test_prepared ALTER COLUMN n TYPE text")
        assert _below(connection, "10", cache) == [("a", "1")]  # compared as text now
        connection.exec_driver_sql("ALTER TABLE test_prepared ALTER COLUMN n TYPE bigint USING n::bigint")
        assert _below(connection, 6, cache) == [("a", 1), ("b", 5)]


def test_a_connection_that_lost_its_prepared_statements_prepares_them_again(engine):
    """What a pooler in transaction mode or a ``DISCARD ALL`` does: the names the pool entry remembers
    are no longer on the server connection."""
    cache: dict = {}
    with engine.connect() as connection:
        assert _below(connection, 6, cache) == [("a", 1), ("b", 5)]
        connection.exec_driver_sql("DEALLOCATE ALL")
        assert _below(connection, 6, cache) == [("a", 1), ("b", 5)]
        assert len(_prepared_names(connection)) == 1


def test_an_invalidated_connection_starts_with_nothing_prepared(engine):
    cache: dict = {}
    with engine.connect() as connection:
        assert _below(connection, 6, cache) == [("a", 1), ("b", 5)]
        connection.invalidate()
    with engine.connect() as connection:  # a new DBAPI connection in the same pool entry
        assert _prepared_names(connection) == set()
        assert _below(connection, 6, cache) == [("a", 1), ("b", 5)]
        assert len(_prepared_names(connection)) == 1


def test_a_statement_run_through_sqlalchemy_is_prepared_when_it_asks(engine):
    asking = _BELOW.execution_options(**statements.PREPARE)
    with engine.connect() as connection:
        assert connection.execute(_BELOW, {"limit": 6}).all() == [("a", 1), ("b", 5)]
        assert _prepared_names(connection) == set()
        for _ in range(7):
            assert connection.execute(asking, {"limit": 6}).all() == [("a", 1), ("b", 5)]
        assert len(_prepared_names(connection)) == 1


def test_a_statement_postgresql_cannot_prepare_runs_unprepared(engine):
    untyped = sa.text("SELECT :value IS NULL AS empty").execution_options(**statements.PREPARE)
    with engine.connect() as connection:
        assert connection.execute(untyped, {"value": None}).scalar() is True
        assert connection.execute(untyped, {"value": "x"}).scalar() is False
        assert _prepared_names(connection) == set()


def test_without_preparation_nothing_is_prepared(engine):
    statements.prepare_statements(engine, enabled=False)
    with engine.connect() as connection:
        assert _below(connection, 6, {}) == [("a", 1), ("b", 5)]
        assert _prepared_names(connection) == set()


# The leading statement sets a transaction-local setting that the statement reads: seen only when both
# ran in one implicit transaction, the leading one first (gone again once that transaction ended).
_LED = (
    sa.select(sa.func.current_setting("trellis.led", True).label("led"), _TABLE.c.id)
    .where(_TABLE.c.n < sa.bindparam("limit"))
    .order_by(_TABLE.c.id)
    .execution_options(**statements.preceded_by("SELECT set_config('trellis.led', 'yes', true)"))
)


def _led(connection: sa.Connection, cache: dict) -> list[tuple]:
    return [tuple(row) for row in statements.execute_compiled(connection, _LED, {"limit": 6}, cache)]


def _setting(connection: sa.Connection) -> str | None:
    return connection.exec_driver_sql("SELECT current_setting('trellis.led', true)").scalar() or None


@pytest.mark.parametrize("prepared", [True, False])
def test_a_leading_statement_runs_first_in_the_statements_own_transaction(engine, prepared):
    statements.prepare_statements(engine, enabled=prepared)
    cache: dict = {}
    with engine.connect() as connection:
        for _ in range(7):  # the PREPARE's run, then the EXECUTEs alone, past the five custom plans
            assert _led(connection, cache) == [("yes", "a"), ("yes", "b")]
            assert _setting(connection) is None
        assert len(_prepared_names(connection)) == (1 if prepared else 0)
        connection.exec_driver_sql("DEALLOCATE ALL")  # a pooler lost the name: prepared again, still led
        assert _led(connection, cache) == [("yes", "a"), ("yes", "b")]
        assert len(_prepared_names(connection)) == (1 if prepared else 0)


@pytest.mark.skipif(not BINARIES, reason="PostgreSQL server binaries are not installed")
def test_after_a_postgresql_restart_statements_are_prepared_again(pg_cluster):
    made = sa.create_engine(pg_cluster.url, isolation_level="AUTOCOMMIT", pool_size=1, max_overflow=0)
    statements.prepare_statements(made)
    cache: dict = {}
    try:
        with made.connect() as connection:
            _TABLE.create(connection)
            connection.execute(sa.insert(_TABLE), [{"id": "a", "n": 1}, {"id": "b", "n": 5}])
            assert _below(connection, 6, cache) == [("a", 1), ("b", 5)]
        pg_cluster.pg_ctl("restart")
        with made.connect() as connection, pytest.raises(sa.exc.DBAPIError) as lost:
            _below(connection, 6, cache)
        assert lost.value.connection_invalidated
        with made.connect() as connection:  # a fresh connection: nothing prepared there yet
            assert _prepared_names(connection) == set()
            assert _below(connection, 6, cache) == [("a", 1), ("b", 5)]
            assert len(_prepared_names(connection)) == 1
    finally:
        made.dispose()
