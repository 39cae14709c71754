"""Exact list counts, remembered in Redis until the schema's documents change.

A list answers ``count``, the number of matches before skip/limit. The page is 20 rows read from an
index; the count reads every match (an index-only scan over half the table costs PostgreSQL ~4 ms of
CPU at 100,000 documents; see bench/results/database.md). With Redis configured
(``TRELLIS_REDIS_URL``, which a production deployment has) a count is kept per query until a write
to the schema commits, in any process; without Redis every list counts.

Why it stays exact: each document table has a version in Redis, a random token replaced after every
commit that wrote to it (a Session ``after_commit`` listener; writes mark their table in
:func:`touched`). Counts live in a hash per table *and version*, and a count is stored under the
version read *before* its query ran: a count that may predate a commit lands in a hash nobody reads
once that commit's new version is set (the store script also skips it when the version has moved).
Tokens are never reused, so a version key lost to eviction or a failover cannot revive an old hash.
Between a commit and its new version (the writer sets it before its own response leaves) another
client may still read the previous count. Every hash expires ``TTL_SECONDS`` after it was created,
which also bounds writes made behind Trellis's back (plain SQL) and a version change that failed.

Redis being down costs nothing but the counting: errors are logged and the database counts.
"""
from __future__ import annotations

import hashlib
import logging
import random
import time
from collections.abc import Callable
from typing import Any

from flask import Flask, current_app, has_app_context
from redis.exceptions import RedisError
from sqlalchemy import event
from sqlalchemy.orm import Session

from trellis.shared_redis import redis_client

log = logging.getLogger(__name__)

# The longest a count lives: it also bounds writes behind Trellis's back and a version change that failed.
TTL_SECONDS = 120
VERSION_TTL_SECONDS = 86_400  # a version key outlives every count stored under it
MAX_COUNTS = 10_000  # per table and version: clients choose the queries, memory stays bounded
_TOUCHED = "trellis_database_touched"
_PREFIX = "trellis_database_counts_prefix"
_SCRIPTS = "trellis_database_counts_scripts"

# KEYS[1] version key; ARGV: counts key prefix, the query's field, a fresh version token, version ttl
# → {version, count or nil}. A table without a version gets the fresh token: versions are random,
# never reused, so a lost or evicted version key cannot bring back an old hash.
_READ = """
local version = redis.call('GET', KEYS[1])
if not version then
  version = ARGV[3]
  redis.call('SET', KEYS[1], version, 'EX', ARGV[4])
end
return {version, redis.call('HGET', ARGV[1] .. version, ARGV[2])}
"""
# KEYS[1] version key; ARGV: counts key prefix, version read before counting, field, count, ttl, max,
# version ttl
# The hash's expiry is set when it is created and never pushed back: TTL_SECONDS bounds how long any
# count lives, whatever else is stored beside it.
_STORE = """
if redis.call('GET', KEYS[1]) ~= ARGV[2] then return 0 end
local key = ARGV[1] .. ARGV[2]
local size = redis.call('HLEN', key)
if size >= tonumber(ARGV[6]) then return 0 end
redis.call('HSET', key, ARGV[3], ARGV[4])
if size == 0 then redis.call('EXPIRE', key, ARGV[5]) end
redis.call('EXPIRE', KEYS[1], ARGV[7])
return 1
"""


def init_app(app: Flask) -> None:
    # Keys carry the database's identity: two deployments (or test runs) may share one Redis.
    database = app.extensions["trellis"].engine.url.render_as_string(hide_password=True)
    app.extensions[_PREFIX] = "trellis:" + hashlib.sha1(database.encode()).hexdigest()[:12] + ":dbcount:"
    if not event.contains(Session, "after_commit", _after_commit):
        event.listen(Session, "after_commit", _after_commit)


def touched(session: Session, table: str) -> None:
    """Mark ``table`` written in ``session``'s transaction: its counts are dropped once it commits."""
    session.info.setdefault(_TOUCHED, set()).add(table)


def cached(table: str, query: tuple[Any, ...], count: Callable[[], int]) -> int:
    """The count of ``query`` on ``table``: from Redis when known for the current data, else ``count()``."""
    redis = redis_client()
    if redis is None:
        return count()
    prefix = current_app.extensions[_PREFIX]
    version_key, counts_prefix = f"{prefix}{table}:v", f"{prefix}{table}:c:"
    field = hashlib.sha1(repr(query).encode()).hexdigest()
    try:
        read, store = _scripts(redis)
        version, known = read(keys=[version_key], args=[counts_prefix, field, _token(), VERSION_TTL_SECONDS])
    except RedisError as exc:  # Redis only accelerates lists: never fail one for it
        _warn_now_and_then(f"count cache unavailable ({exc.__class__.__name__}); counting in the database")
        return count()
    if known is not None:
        return int(known)
    total = count()
    try:
        store(keys=[version_key],
              args=[counts_prefix, version, field, total, TTL_SECONDS, MAX_COUNTS, VERSION_TTL_SECONDS])
    except RedisError as exc:
        _warn_now_and_then(f"count cache unavailable ({exc.__class__.__name__}); count not kept")
    return total


_last_warning = [float("-inf")]


def _warn_now_and_then(message: str, level: int = logging.WARNING) -> None:
    """One warning a minute per process: with Redis down, every list and write would log one."""
    now = time.monotonic()
    if now - _last_warning[0] >= 60:
        _last_warning[0] = now
        log.log(level, message)


def _token() -> str:
    """A new version: 64 random bits (Python's generator, OS-seeded; no system call per list)."""
    return f"{random.getrandbits(64):016x}"


def _scripts(redis: Any) -> tuple[Any, Any]:
    """The two Lua scripts, run by their SHA (EVALSHA: the text is sent once, not per list)."""
    scripts = current_app.extensions.get(_SCRIPTS)
    if scripts is None:  # the app's client never changes (see trellis.shared_redis)
        scripts = current_app.extensions[_SCRIPTS] = (redis.register_script(_READ), redis.register_script(_STORE))
    return scripts


def _after_commit(session: Session) -> None:
    tables = session.info.pop(_TOUCHED, None)
    if not tables or not has_app_context():
        return
    redis = redis_client()
    if redis is None:
        return
    prefix = current_app.extensions[_PREFIX]
    try:
        with redis.pipeline(transaction=False) as pipe:
            for table in tables:
                pipe.set(f"{prefix}{table}:v", _token(), ex=VERSION_TTL_SECONDS)
            pipe.execute()
    except RedisError as exc:
        # Counts of these tables may now be stale until their entries expire: say so loudly.
        _warn_now_and_then(f"count cache: could not invalidate {', '.join(sorted(tables))} "
                           f"({exc.__class__.__name__})", logging.ERROR)
