"""Exact list counts, remembered in Redis and keyed by the event log: nothing to invalidate.

A list answers ``count``, the number of matches before skip/limit. The page is 20 rows read from an
index; the count reads every match (an index-only scan, over half the table for a broad filter;
``bench/results/modules.md#counts``). With Redis configured
(``TRELLIS_REDIS_URL``, which a production deployment has) a count is kept per query and *change
number* of its schema; without Redis every list counts.

Why it stays exact: every document write records an event of its schema's family
(``database.<Schema>``) in its own transaction (``documents.change_events.record``), and
:func:`trellis.events.change_number` gives a number that grows with every such commit and never goes
back. The page statement reads it in the same round trip (a scalar subquery), and a count is stored
under the number read *before* it was computed. A list whose number is the same has seen the same
committed writes, so a remembered count is exact; after a write nobody asks for the old number again.
Schema changes are covered by the schema's version, also part of the key.

So writes pay nothing for counts (no Redis round trip, no lock, no row to update: the event they
record anyway is the invalidation), and a Redis outage or restart cannot bring back a stale count
(keys come from PostgreSQL; Redis only remembers). The one cost is the page's two index lookups on
``core_events``. Without the event log (``TRELLIS_EVENTS=false``) no count is kept.

Every hash expires ``TTL_SECONDS`` after it was created; that bounds writes made behind Trellis's
back (plain SQL, which records no event). Redis being down costs nothing but the counting: a warning
at most once a minute, and the database counts.

Each process also keeps what it read from Redis or stored there for ``LOCAL_SECONDS`` (a count under a
change number is a fact that never changes, so nothing can make it stale; a write gives the next list a
new number). A hit then costs no Redis round trip, and a user's list + count makes two (whether it reads
everything, then the count; same section). Writes behind
Trellis's back are then bounded by ``TTL_SECONDS + LOCAL_SECONDS``.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from time import monotonic
from typing import Any

from flask import Flask
from redis.exceptions import RedisError

from trellis import current, events
from trellis.background import ThrottledWarning
from trellis.shared_redis import redis_client

log = logging.getLogger(__name__)

TTL_SECONDS = 120  # the longest a count lives: it bounds writes behind Trellis's back
MAX_COUNTS = 10_000  # per table and change number: clients choose the queries, memory stays bounded
LOCAL_SECONDS = 5.0  # how long a process answers a count it read or kept from its own memory
MAX_LOCAL = 10_000  # counts a process keeps in memory (all of them dropped when full)
_KEY = "trellis_database_counts"

# KEYS[1] the counts hash; ARGV: field, count, ttl, max. The expiry is set when the hash is created and
# never pushed back: TTL_SECONDS bounds how long any count lives, whatever else is stored beside it.
_STORE = """
local size = redis.call('HLEN', KEYS[1])
if size >= tonumber(ARGV[4]) then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
if size == 0 then redis.call('EXPIRE', KEYS[1], ARGV[3]) end
return 1
"""


class CountCache:
    """One app's list counts (see the module's docstring)."""

    def __init__(self, app: Flask) -> None:
        self.app = app
        # Keys carry the database's identity: two deployments (or test runs) may share one Redis.
        database = app.extensions["trellis"].engine.url.render_as_string(hide_password=True)
        self.prefix = "trellis:" + hashlib.sha1(database.encode()).hexdigest()[:12] + ":dbcount:"
        self._store: Any = None
        self._warning = ThrottledWarning(log)  # with Redis down, every list would log one
        self._recent: dict[tuple[str, str], tuple[float, int]] = {}  # (key, field) → (until, count)

    @staticmethod
    def change_column(schema_name: str) -> Any:
        """The schema's change number as a column of the page statement (see the module's docstring)."""
        return events.change_number(family(schema_name))

    def usable(self, changes: str | int | None) -> bool:
        """Whether a count for ``changes`` may be kept: Redis configured, the number known, the log on."""
        return changes is not None and events.enabled() and redis_client(self.app) is not None

    def count(self, table: str, query: tuple[Any, ...], changes: Any, compute: Callable[[], int]) -> int:
        """The count of ``query`` on ``table``: from Redis when known for ``changes`` (the schema's change
        number, read before counting; None: unknown, so nothing is kept), else ``compute()``."""
        if not self.usable(changes):
            return compute()
        known = self.known(table, query, changes)
        if known is not None:
            return known
        total = compute()
        self.keep(table, query, changes, total)
        return total

    def known(self, table: str, query: tuple[Any, ...], changes: Any) -> int | None:
        """The number kept for ``query`` under ``changes`` (None: not kept, or Redis unavailable)."""
        redis = redis_client(self.app)
        if redis is None:
            return None
        key, field = self._key(table, changes), self._field(query)
        recent = self._recent.get((key, field))
        if recent is not None and recent[0] > monotonic():
            return recent[1]
        try:
            known = redis.hget(key, field)
        except RedisError as exc:  # Redis only accelerates lists: never fail one for it
            self._warning("count cache unavailable (%s); counting in the database", exc.__class__.__name__)
            return None
        if known is None:
            return None
        value = int(known)
        self._remember(key, field, value)
        return value

    def keep(self, table: str, query: tuple[Any, ...], changes: Any, value: int) -> None:
        """Keep ``value`` for ``query`` under ``changes``: a number true at that change number."""
        redis = redis_client(self.app)
        if redis is None:
            return
        key, field = self._key(table, changes), self._field(query)
        try:
            if self._store is None:  # EVALSHA: the script's text is sent once, not per list
                self._store = redis.register_script(_STORE)
            stored = self._store(keys=[key], args=[field, value, TTL_SECONDS, MAX_COUNTS])
        except RedisError as exc:
            self._warning("count cache unavailable (%s); count not kept", exc.__class__.__name__)
            return
        if stored:
            self._remember(key, field, value)

    def _remember(self, key: str, field: str, value: int) -> None:
        if len(self._recent) >= MAX_LOCAL:
            self._recent.clear()
        self._recent[(key, field)] = (monotonic() + LOCAL_SECONDS, value)

    def _key(self, table: str, changes: Any) -> str:
        return f"{self.prefix}{table}:{changes}"

    @staticmethod
    def _field(query: tuple[Any, ...]) -> str:
        return hashlib.sha1(repr(query).encode()).hexdigest()


def family(schema_name: str) -> str:
    """The event family of a schema's documents: ``database.Item`` (topics ``database.Item.create`` …)."""
    return f"database.{schema_name}"


def init_app(app: Flask) -> None:
    app.extensions[_KEY] = CountCache(app)


def cache() -> CountCache:
    return current.app().extensions[_KEY]
