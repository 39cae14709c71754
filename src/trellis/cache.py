"""Shared cache generations: how every process learns, before its next request, that one changed a cache.

Each process keeps derived data (validated configs, compiled schemas, the GraphQL schema) beside the
generation number it was built from (:meth:`Generations.stamp`). A writer bumps the generation of its
cache in the same transaction as its change (:meth:`Generations.bump`); the generations table is the
truth.

Reading that table on every request would cost a database round trip, so a *change token* in Redis
says whether it moved: a writer sets a fresh random token after its commit and before its response
leaves; a process compares the token once per request (the first time a cache is used) and re-reads
the table only when it differs from the one it last saw. Tokens are never reused, so a token equal
to the last one seen means no change was acknowledged since this process last read the table: a
change acknowledged to any caller is in force on every process for every request that starts after.

Reading the token is itself a Redis round trip, a large part of a get by id under eventlet
(``bench/results/core.md#change-token-lease``). So a token read
is a *lease* (``TRELLIS_CACHE_LEASE_SECONDS``, default 0.2 s): it vouches for the caches until that
long after the read began, a background thread renews it every third of that while requests come, and
a writer waits one lease after setting the new token before it answers. Any lease taken before the
new token existed has then ended, so the next request anywhere reads the new token (from a renewal,
or itself when the lease lapsed): requests pay nothing, changes of configs and schemas pay 0.2 s.
With ``TRELLIS_CACHE_LEASE_SECONDS=0`` each request reads the token instead.

Without Redis (not configured, down, or its circuit open) the table itself is read once per request:
still exact, one small query dearer. A writer whose token could not be set retries before its next
check, and a process that lost Redis re-reads the table once it is back. Answers "not found" for a
name re-read the table first (:meth:`Generations.refresh`), whatever the token says.

``TRELLIS_CACHE_SHARED=false`` declares the process alone on its database (no other process changes
configs or schemas): it skips the per-request check and follows only its own commits. The benchmark
uses it to price the check (bench/scaleout_bench.py).
"""

from __future__ import annotations

import hashlib
import logging
import secrets
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

from flask import current_app, has_request_context
from redis.exceptions import RedisError
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from . import background, current, db, reads
from .models import CacheGeneration
from .server.token_reader import TokenReader
from .shared_reads import SharedReads

log = logging.getLogger(__name__)

_CHECKED = "_trellis_generations_checked"  # attribute set on the request object once it has checked
_ALONE = b"alone"  # the token of a process that shares its caches with nobody
_REDIS_FAULTS = (RedisError, OSError)
# After a Redis fault, the table is read without trying Redis for this long: exact all the same, and
# an unreachable Redis does not cost every request a connection attempt.
RETRY_SECONDS = 1.0
IDLE_SECONDS = 10.0  # a process without requests for this long stops renewing its lease


_READ_GENERATIONS = f"SELECT name, generation FROM {CacheGeneration.__tablename__}"


def token_key(database_url: str) -> str:
    """The Redis key of the change token: one per database (several deployments may share a Redis)."""
    return "trellis:" + hashlib.sha1(database_url.encode()).hexdigest()[:12] + ":cache-token"


class Generations:
    def __init__(self, redis: Callable[[], Any], key: str, shared: bool = True, lease: float = 0.0) -> None:
        """``redis`` returns the shared client or None (no Redis configured); ``key`` holds the token;
        ``shared=False``: no other process writes, skip the per-request check; ``lease`` > 0: a token
        read vouches for that long (renewed in the background), writers wait that long."""
        self._shared = shared
        self._lease = lease
        self._lease_token: bytes | None = None
        self._lease_until = float("-inf")
        self._leasing = False
        self._last_used = float("-inf")
        self._redis = redis
        self._key = key
        self._seen: dict[str, int] = {}
        self._token: bytes | None = None  # the token seen when ``_seen`` was read; None: read the table
        self._unpublished = False  # a commit of ours whose token could not be set
        self._epoch = 0
        self._lock = threading.Lock()
        self._warning = background.ThrottledWarning(log)  # with Redis down every request would log one
        self._reader: TokenReader | None = None
        self._table_reads = SharedReads()  # concurrent requests share a table read: one connection at most
        self._retry_at = float("-inf")

    def stamp(self, name: str) -> tuple[int, int]:
        """What a cache built from ``name`` must remember and compare (``!=`` means rebuild)."""
        return self._epoch, self.current(name)

    def current(self, name: str) -> int:
        """The generation of ``name``, checked at most once per request (committed values only)."""
        current = _current_request()
        if current is None or not getattr(current, _CHECKED, False):
            self._check()
            if current is not None:
                setattr(current, _CHECKED, True)
        return self._seen.get(name, 0)

    def refresh(self) -> None:
        """Re-read the table now, whatever the token says: call it before answering 404 for a name."""
        token = self._shared_token()
        self._load(token)
        current = _current_request()
        if current is not None:
            setattr(current, _CHECKED, True)

    def reset(self) -> None:
        """Invalidate every cache in this process (tests call it after rolling a transaction back)."""
        with self._lock:
            self._epoch += 1
            self._token = None

    def _check(self) -> None:
        token = self._shared_token()
        if token is None or token != self._token:
            self._load(token)

    def _load(self, token: bytes | None) -> None:
        # The token was read before the table: a change committed in between sets a newer token,
        # so the next check reads the table again.
        rows = self._read(self._table_reads)
        with self._lock:
            self._seen = {name: generation for name, generation in rows}
            self._token = token

    def _shared_token(self) -> bytes | None:
        """The change token in Redis, or None when the table must be read (no Redis, Redis fault)."""
        if not self._shared:
            return _ALONE
        now = time.monotonic()
        self._last_used = now
        if now < self._lease_until:
            return self._lease_token
        client = self._redis()
        if client is None or now < self._retry_at:
            return None
        self._keep_leasing(client)
        return self._read_token(client)

    def _read_token(self, client: Any) -> bytes | None:
        """Read the token; it vouches for this process's caches until ``lease`` after the read began."""
        began = time.monotonic()
        try:
            if self._unpublished:
                self._publish(client)
            reader = self._reader
            if reader is None or reader.client is not client:
                reader = self._reader = TokenReader(client)
            token = reader.get(self._key)
            if token is None:  # first start, or Redis lost its data: agree on a token, then read the table
                client.set(self._key, _new_token(), nx=True)
                token = client.get(self._key)
        except _REDIS_FAULTS as exc:
            self._warn(exc)
            return None
        if self._lease > 0:
            self._lease_token, self._lease_until = token, began + self._lease
        return token

    def _keep_leasing(self, client: Any) -> None:
        """Start the thread (green under eventlet) that renews the lease while requests come."""
        if self._lease <= 0 or self._leasing:
            return
        with self._lock:
            if self._leasing:
                return
            self._leasing = True
        threading.Thread(
            target=_renew, args=(weakref.ref(self), client), daemon=True, name="trellis-cache-lease"
        ).start()

    def _publish(self, client: Any) -> None:
        client.set(self._key, _new_token())
        self._unpublished = False

    @staticmethod
    def _read(shared: SharedReads) -> list[tuple[str, int]]:
        return shared.read(_read_table)

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
        db.after_commit(self._committed, key=self)  # one token per commit, however many bumps it holds

    def _committed(self) -> None:
        """After a bump commits: this process re-reads the table, the others learn it from a new token."""
        with self._lock:
            self._token = None
        current = _current_request()
        if current is not None:
            setattr(current, _CHECKED, False)
        client = self._redis() if self._shared else None
        if client is None:
            return
        try:
            self._publish(client)
            # A lease taken before the new token was set ends within ``lease``: wait it out, so
            # every request that starts after this one is answered finds the change.
            time.sleep(self._lease)
        except _REDIS_FAULTS as exc:
            # The others read the table while Redis is unreachable; once it answers again this
            # process sets a new token before its next check.
            self._unpublished = True
            self._warn(exc)
            # Leases other processes took before Redis failed still vouch for their caches: they end
            # within one lease, after which those processes find Redis failing and read the table.
            time.sleep(self._lease)

    def _warn(self, exc: BaseException) -> None:
        self._warning(
            "cache token unavailable (%s); reading cache generations from the database", exc.__class__.__name__
        )
        with self._lock:
            self._token = None  # when Redis answers again, re-read the table once
            self._retry_at = time.monotonic() + RETRY_SECONDS
            self._lease_until = float("-inf")


def _read_table() -> list[tuple[str, int]]:
    """The generations, committed values only. Concurrent requests share one read (``SharedReads``),
    so the fallback takes one read connection at most, not one more per request."""
    # A read connection, outside any open write: another greenlet's uncommitted bump must never become
    # this process's idea of the current generation. The driver's own cursor: SQLAlchemy's Result would
    # double the cost of this read (every request while Redis is down).
    provider = reads.provider()
    connection = provider.open()
    try:
        raw = connection.connection.dbapi_connection
        assert raw is not None  # a checked-out connection holds its driver's
        cursor = raw.cursor()
        try:
            cursor.execute(_READ_GENERATIONS)
            return list(cursor.fetchall())
        finally:
            cursor.close()
    except Exception:
        # SQLAlchemy never saw the driver's error, so it would pool a dead connection again (after a
        # PostgreSQL restart every later read failed with "connection already closed"): drop it.
        connection.invalidate()
        raise
    finally:
        provider.close(connection)


def _renew(ref: weakref.ref, client: Any) -> None:
    """Renew the lease every third of it while requests use it; stop when idle (or the app is gone)."""
    while True:
        generations = ref()
        if generations is None:
            return
        interval = generations._lease / 3
        if time.monotonic() - generations._last_used > IDLE_SECONDS:
            generations._leasing = False  # the next request reads the token itself and restarts this
            return
        if time.monotonic() >= generations._retry_at:
            generations._read_token(client)
        del generations
        time.sleep(interval)


def _new_token() -> bytes:
    return secrets.token_hex(16).encode()


def _current_request() -> Any:
    return current.request() if has_request_context() else None


# The names of every Remembered: a restore bumps them all, so an answer kept under a name that no row held
# yet (nothing had bumped it) is not kept over restored data.
REMEMBERED: set[str] = set()


class Remembered:
    """Answers a process keeps beside the generation of ``name`` they were read under (per app), so a
    change that bumps it in its transaction is in force for the next request everywhere.

    An answer read while a bump committed is stored into the dictionary of the generation it was read
    under, which the next check has already replaced: a stale answer is never kept under a new stamp.
    ``None`` answers are not kept (read again each time)."""

    def __init__(self, name: str, limit: int = 10_000) -> None:
        self.name = name
        self.limit = limit  # answers kept; then it starts over
        REMEMBERED.add(name)
        self._key = f"trellis_remembered:{name}"

    def get(self, key: Any, read: Callable[[], Any], usable: Callable[[Any], bool] | None = None) -> Any:
        """The answer kept for ``key``, else ``read()`` (kept unless None). ``usable``: a kept answer it
        refuses is read again (an answer that can go out of date by itself, like an expiry)."""
        extensions = current.app().extensions  # every user request: no proxy read
        stamp = extensions["trellis"].generations.stamp(self.name)
        kept = extensions.get(self._key)
        if kept is None or kept[0] != stamp or len(kept[1]) >= self.limit:
            kept = extensions[self._key] = (stamp, {})
        values: dict[Any, Any] = kept[1]
        found = values.get(key)
        if found is None or (usable is not None and not usable(found)):
            found = read()
            if found is not None:
                values[key] = found
        return found

    def bump(self) -> None:
        """Change the generation in the caller's transaction (the caller commits)."""
        current_app.extensions["trellis"].generations.bump(self.name)
