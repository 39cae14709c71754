"""Shared cache generations: how one worker learns that another changed configs or schemas.

Each process keeps derived data (validated configs, compiled schemas, the GraphQL schema) beside the
generation number it was built from. Writers bump the generation in the same transaction as their
change. Readers re-read the small generations table at most every ``CACHE_CHECK_SECONDS`` (and at
most once per request), so a change made in one worker is seen by the others within that bound.
"""
from __future__ import annotations

import threading
import time
from typing import Any

from flask import has_request_context, request
from sqlalchemy import event, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from . import db
from .models import CacheGeneration


class Generations:
    def __init__(self, check_seconds: float) -> None:
        self.check_seconds = check_seconds
        self._seen: dict[str, int] = {}
        self._checked_at = float("-inf")
        self._epoch = 0
        self._lock = threading.Lock()

    def stamp(self, name: str) -> tuple[int, int]:
        """What a cache built from ``name`` must remember and compare (``!=`` means rebuild)."""
        return self._epoch, self.current(name)

    def reset(self) -> None:
        """Invalidate every cache in this process (tests call it after rolling a transaction back)."""
        with self._lock:
            self._epoch += 1
            self._checked_at = float("-inf")

    def current(self, name: str) -> int:
        """The generation of ``name`` as last read from the database (committed values only)."""
        if self._stale():
            rows = self._read()
            with self._lock:
                self._seen = {row.name: row.generation for row in rows}
                self._checked_at = time.monotonic()
            if has_request_context():
                request.environ.setdefault("trellis", {})["generations_read"] = True
        return self._seen.get(name, 0)

    @staticmethod
    def _read() -> list:
        statement = select(CacheGeneration.name, CacheGeneration.generation)
        session = db.session()
        if session.bind is not None:  # pinned to one connection (the tests' outer transaction): read there
            return session.execute(statement).all()
        # Its own connection, outside any open write: another greenlet's uncommitted bump must never
        # become this process's idea of the current generation.
        with db.engine().connect() as connection:
            return connection.execute(statement).all()

    def _stale(self) -> bool:
        if time.monotonic() - self._checked_at < self.check_seconds:
            return False  # the common case first: no context lookups
        return not (has_request_context() and request.environ.get("trellis", {}).get("generations_read"))

    def bump(self, name: str) -> None:
        """Increment ``name`` inside the caller's transaction (the caller commits)."""
        session = db.session
        dialect = session.get_bind().dialect.name
        insert = pg_insert if dialect == "postgresql" else sqlite_insert
        stmt = insert(CacheGeneration).values(name=name, generation=1)
        stmt = stmt.on_conflict_do_update(
            index_elements=[CacheGeneration.name], set_={"generation": CacheGeneration.generation + 1}
        )
        session.execute(stmt)
        # Once committed, this process must not trust its copy any more, whatever the check interval.
        event.listen(session(), "after_commit", self._forget, once=True)

    def _forget(self, _session: Any = None) -> None:
        with self._lock:
            self._checked_at = float("-inf")
        if has_request_context():
            request.environ.get("trellis", {}).pop("generations_read", None)

