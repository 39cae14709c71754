"""Recording: an event row is written in the transaction of the change it describes (a transactional
outbox), so it commits with the change or not at all; its commit bumps the family's change counter and
pokes the sequencer."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from .. import db, statements
from ..models import EventRecord, PendingEvent
from .counters import Counted, counted_by
from .log import current_log
from .records import family_of, payload_text

_table = EventRecord.__table__
_pending = PendingEvent.__table__
_VALUES = {
    "topic": sa.bindparam("topic"),
    "family": sa.bindparam("family"),
    "payload": sa.bindparam("payload"),
    "created_at": sa.bindparam("created_at", type_=_table.c.created_at.type),
}
# PostgreSQL commits in another order than it inserts: an event waits in the pending table for the
# sequencer, which numbers it once committed.
_INSERT_PENDING = sa.insert(_pending).values(**_VALUES)
# SQLite has one writer, holding the lock from its first write to its commit: commit order is insert
# order, so an event is numbered as it is inserted (a rolled-back number is given again to the next one).
# A separate numbering transaction would hurt there: SQLite does not wait (no busy handler) when a
# transaction that has read tries to write while another connection holds the write lock, it fails.
_INSERT_NUMBERED = sa.insert(_table).values(
    **_VALUES, event_id=sa.select(sa.func.coalesce(sa.func.max(_table.c.event_id), 0) + 1).scalar_subquery()
)
_COMPILED: dict[Any, Any] = {}  # execute_compiled's forms of the single-row INSERTs


def record(topic: str, payload: dict | str) -> None:
    """Insert the event in the current ``db.session`` transaction (the caller commits).

    ``payload`` is a dict or its JSON text already made (serialised once, never re-encoded here).
    """
    record_many(topic, [payload])


def record_many(topic: str, payloads: Sequence[dict[str, Any] | str]) -> None:
    """:func:`record` for several events of one topic: one statement (``/many`` writes 1,000 documents)."""
    log_ = current_log()
    if not log_.enabled:
        return
    if log_.strict:
        log_.check_declared(topic, payloads)
    family, now = family_of(topic), db.utcnow()
    rows = [
        {"topic": topic, "family": family, "payload": payload_text(payload), "created_at": now} for payload in payloads
    ]
    session = db.session
    connection = session.connection()
    postgresql = connection.dialect.name == "postgresql"
    if len(rows) == 1:  # one event per write (create, update): the DB-API cursor, SQL compiled once
        statements.execute_compiled(connection, _INSERT_PENDING if postgresql else _INSERT_NUMBERED, rows[0], _COMPILED)
    elif postgresql:  # a /many write: one statement (an unnest of column arrays)
        statements.insert_rows(connection, _pending, rows)
    else:
        connection.execute(_INSERT_NUMBERED, rows)
    db.before_commit(Counted(), key=Counted).families.add(family)
    db.after_commit(log_.poke, key=log_)  # one poke per commit, however many events it holds


def recorded_by(topic: str, rows: sa.CTE, payload: sa.ColumnElement[str], alone: bool) -> list[sa.CTE]:
    """PostgreSQL: what a write that is a single statement adds to it to record ``topic`` once per row of
    ``rows`` (a data-modifying CTE of the write): the pending event rows (``payload``: the JSON text, an SQL
    expression over ``rows`` or a bound parameter; ``created_at`` the bound parameter ``now``) and, when the
    statement commits ``alone`` (autocommit), the bump of the family's counter. Nothing when the log is
    off. The caller runs the statement, then :func:`written`.

    PostgreSQL runs a statement atomically, so the event rows commit with the write, with no transaction
    around it."""
    if not current_log().enabled:
        return []
    family = family_of(topic)
    insert = sa.insert(_pending).from_select(
        ["topic", "family", "payload", "created_at"],
        sa.select(
            db.sql_text(topic), db.sql_text(family), payload, sa.bindparam("now", type_=_table.c.created_at.type)
        ).select_from(rows),
    )
    parts = [insert.cte(f"{rows.name}_event")]
    if alone:
        parts.append(counted_by(family, rows))
    return parts


def written(topic: str, alone: bool) -> None:
    """After a statement built with :func:`recorded_by` ran: ``alone``, it has committed, so the sequencer
    numbers its event now; in the session's transaction, the family is counted and numbered at its commit."""
    log_ = current_log()
    if not log_.enabled:
        return
    if log_.strict:
        log_.check_declared(topic)
    if alone:
        log_.poke()
        return
    db.before_commit(Counted(), key=Counted).families.add(family_of(topic))
    db.after_commit(log_.poke, key=log_)


def recorded(after: int | sa.ColumnElement[int] | None = None) -> sa.Subquery:
    """Every recorded event row, numbered or still pending, as a subquery with the columns ``id`` (insert
    order), ``event_id`` (NULL while pending), ``topic``, ``family``, ``payload`` and ``created_at``: what
    a transaction sees it recorded before the sequencer numbered it (a module's tests of its events).
    ``after``: only the numbered events after that one (and every pending one); a condition on ``family``
    around it then reads the log's index of (family, event_id) from there on."""
    columns = ("topic", "family", "payload", "created_at")
    numbered = sa.select(_table.c.id, _table.c.event_id, *(_table.c[name] for name in columns))
    if after is not None:
        numbered = numbered.where(_table.c.event_id > after)
    pending = sa.select(
        _pending.c.id, sa.cast(sa.null(), sa.BigInteger).label("event_id"), *(_pending.c[name] for name in columns)
    )
    return sa.union_all(numbered, pending).subquery("recorded")


def enabled() -> bool:
    """Whether this app records events (``TRELLIS_EVENTS``, on unless turned off)."""
    return current_log().enabled
