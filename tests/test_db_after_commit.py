"""``db.after_commit``: a callback runs once the session's transaction commits, for every transaction.

The pattern it replaces, ``event.listen(session, "after_commit", …, once=True)``, fires only for a
session's first transaction: SQLAlchemy keeps a ``once`` listener registered, so registering it again
for a later transaction does nothing (a deleted user's sockets stayed open).
"""

from __future__ import annotations

from sqlalchemy import text

from trellis import db as trellis_db


def _begin() -> None:
    trellis_db.session.execute(text("SELECT 1"))


def test_every_transaction_runs_its_own_callbacks(db):
    calls: list[str] = []
    for round_ in ("first", "second", "third"):
        _begin()
        trellis_db.after_commit(lambda round_=round_: calls.append(round_))
        trellis_db.session.commit()
    assert calls == ["first", "second", "third"]


def test_a_key_registers_once_per_transaction_and_order_is_kept(db):
    calls: list[str] = []
    _begin()
    trellis_db.after_commit(lambda: calls.append("plain"))
    for _ in range(3):
        trellis_db.after_commit(lambda: calls.append("keyed"), key="poke")
    trellis_db.after_commit(lambda: calls.append("last"))
    trellis_db.session.commit()
    assert calls == ["plain", "keyed", "last"]


def test_a_rollback_drops_the_callbacks(db):
    calls: list[str] = []
    _begin()
    trellis_db.after_commit(lambda: calls.append("rolled back"))
    trellis_db.session.rollback()
    _begin()
    trellis_db.session.commit()
    assert calls == []


def test_a_savepoint_waits_for_the_outer_commit(db):
    calls: list[str] = []
    _begin()
    with trellis_db.session.begin_nested():
        trellis_db.after_commit(lambda: calls.append("inner"))
    assert calls == []  # the savepoint's release is not a commit
    trellis_db.session.commit()
    assert calls == ["inner"]


def test_a_failing_callback_does_not_stop_the_others(db, caplog):
    calls: list[str] = []
    _begin()
    trellis_db.after_commit(lambda: 1 / 0)
    trellis_db.after_commit(lambda: calls.append("still runs"))
    trellis_db.session.commit()
    assert calls == ["still runs"]
    assert "a callback after the commit failed" in caplog.text
