"""Rate limits on the `limits` library (the engine of flask-limiter): Redis when ``TRELLIS_REDIS_URL``
is set, else memory.

When Redis fails (down, hung: the shared client's timeouts and circuit breaker make that quick), the
limits are counted in this process's memory instead, with a warning at most once a minute: sign-in
and form submission keep working, and keep a limit, while Redis is away.

Modules call :func:`check` with their own keys (an IP, an email …), so one route can carry several
limits and a breach is rendered in the contract's error shape (429 ``RATE_LIMITED``). flask-limiter's
Flask extension is not used: it hooks a check into every request of the app, which cost a quarter of
the throughput of the fastest routes while no route uses its decorators.
"""

from __future__ import annotations

import logging
import time

from flask import Flask, current_app, request
from limits import RateLimitItem, parse
from limits.errors import StorageError
from limits.storage import MemoryStorage, storage_from_string
from limits.strategies import FixedWindowRateLimiter, RateLimiter

from .background import ThrottledWarning
from .errors import APIError
from .shared_redis import redis_client

log = logging.getLogger(__name__)

KEY_PREFIX = "trellis"
_FALLBACK = "trellis_ratelimit_fallback"


def init_limiter(app: Flask) -> RateLimiter:
    app.extensions[_FALLBACK] = _Fallback()
    client = redis_client(app)
    if client is None:
        return FixedWindowRateLimiter(storage_from_string("memory://"))
    # The app's shared pool: its timeouts and circuit breaker; errors arrive as StorageError.
    storage = storage_from_string(app.config["REDIS_URL"], connection_pool=client.connection_pool, wrap_exceptions=True)
    return FixedWindowRateLimiter(storage)


class _Fallback:
    """The in-memory limiter used while the Redis storage fails."""

    def __init__(self) -> None:
        self.limiter = FixedWindowRateLimiter(MemoryStorage())
        self.warning = ThrottledWarning(log)

    def use(self, error: Exception) -> RateLimiter:
        self.warning(
            "rate limits counted in memory: the Redis storage failed (%s); warned once a minute",
            error.__class__.__name__,
        )
        return self.limiter


def _hit(item: RateLimitItem, scope: str, key: str) -> tuple[bool, RateLimiter]:
    limiter: RateLimiter = current_app.extensions["trellis"].limiter
    try:
        return limiter.hit(item, KEY_PREFIX, scope, key), limiter
    except StorageError as exc:
        fallback = current_app.extensions[_FALLBACK].use(exc.storage_error)
        return fallback.hit(item, KEY_PREFIX, scope, key), fallback


def valid_rate(value: str) -> None:
    """A config field's validator: a rate limit such as ``10/minute`` or ``100/hour``."""
    from marshmallow import ValidationError

    try:
        parse(value)
    except ValueError:
        raise ValidationError("Not a rate limit such as '10/minute' or '100/hour'.") from None


def client_ip() -> str:
    return request.remote_addr or "unknown"


def check(scope: str, key: str, limit: str) -> None:
    """Count one hit of ``key`` in ``scope`` against ``limit`` (e.g. ``"10/minute"``); 429 when over."""
    if not current_app.config["RATELIMIT_ENABLED"]:
        return
    item = parse(limit)
    allowed, limiter = _hit(item, scope, key)
    if not allowed:
        try:
            reset_at, _remaining = limiter.get_window_stats(item, KEY_PREFIX, scope, key)
        except StorageError:
            reset_at = time.time() + item.get_expiry()
        retry_after = max(1, int(reset_at - time.time()))
        raise APIError(429, f"Too many requests; retry in {retry_after} s", headers={"Retry-After": str(retry_after)})


def reset(app: Flask) -> None:
    """Forget every count (tests start each case with empty limits)."""
    app.extensions["trellis"].limiter.storage.reset()
    app.extensions[_FALLBACK].limiter.storage.reset()
