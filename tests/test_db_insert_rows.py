"""``trellis.statements.insert_rows``: one statement for many rows (an unnest of column arrays on PostgreSQL), with
the same checks and values a plain INSERT gives."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
import sqlalchemy as sa
from sqlalchemy.exc import DBAPIError, IntegrityError

from trellis import db as trellis_db
from trellis.statements import insert_rows

_TABLE = sa.Table(
    "test_insert_rows",
    sa.MetaData(),
    sa.Column("id", sa.String(8), primary_key=True),
    sa.Column("label", sa.String(5), nullable=True),
    sa.Column("data", trellis_db.JSONType, nullable=True),
    sa.Column("at", trellis_db.UTCDateTime(), nullable=True),
    sa.Column("n", sa.Integer, nullable=True),
)


@pytest.fixture()
def table(db):
    connection = trellis_db.session.connection()
    _TABLE.create(connection)
    yield connection


def test_rows_go_in_with_their_types(table):
    at = datetime(2026, 11, 25, 4, 0, tzinfo=UTC)
    rows = [
        {"id": "a", "label": "x", "data": {"k": [1, "é"]}, "at": at, "n": 1},
        {"id": "b", "label": None, "data": [1, 2], "at": None, "n": None},  # a JSON list stays one value
        {"id": "c", "label": "yz", "data": None, "at": at, "n": 3},
    ]
    insert_rows(table, _TABLE, rows)
    found = table.execute(sa.select(_TABLE).order_by(_TABLE.c.id)).all()
    assert [tuple(row) for row in found] == [
        ("a", "x", {"k": [1, "é"]}, at, 1),
        ("b", None, [1, 2], None, None),
        ("c", "yz", None, at, 3),
    ]


def test_a_duplicate_key_is_an_integrity_error(table):
    insert_rows(table, _TABLE, [{"id": "a"}])
    with pytest.raises(IntegrityError):
        insert_rows(table, _TABLE, [{"id": "b"}, {"id": "a"}])


def test_a_value_too_long_is_refused_not_cut(table):
    if not trellis_db.is_postgresql(table):
        pytest.skip("SQLite does not enforce VARCHAR lengths")
    with pytest.raises(DBAPIError, match="too long"):
        insert_rows(table, _TABLE, [{"id": "a", "label": "much too long"}])
