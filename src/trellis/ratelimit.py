"""Rate limits on the `limits` library (the engine of flask-limiter): Redis when ``TRELLIS_REDIS_URL``
is set, else memory.

Modules call :func:`check` with their own keys (an IP, an email …), so one route can carry several
limits and a breach is rendered in the contract's error shape (429 ``RATE_LIMITED``). flask-limiter's
Flask extension is not used: it hooks a check into every request of the app, which cost a quarter of
the throughput of the fastest routes while no route uses its decorators.
"""
from __future__ import annotations

import logging
import time

from flask import Flask, current_app, request
from limits import parse
from limits.storage import storage_from_string
from limits.strategies import FixedWindowRateLimiter, RateLimiter
from redis.exceptions import RedisError

from .errors import APIError

KEY_PREFIX = "trellis"
log = logging.getLogger(__name__)


def init_limiter(app: Flask) -> RateLimiter:
    app.config.setdefault("RATELIMIT_ENABLED", True)
    return FixedWindowRateLimiter(storage_from_string(app.config.get("REDIS_URL") or "memory://"))


def client_ip() -> str:
    return request.remote_addr or "unknown"


def check(scope: str, key: str, limit: str) -> None:
    """Count one hit of ``key`` in ``scope`` against ``limit`` (e.g. ``"10/minute"``); 429 when over."""
    if not current_app.config.get("RATELIMIT_ENABLED", True):
        return
    limiter: RateLimiter = current_app.extensions["trellis"].limiter
    item = parse(limit)
    try:
        allowed = limiter.hit(item, KEY_PREFIX, scope, key)
    except (RedisError, OSError) as exc:
        # The limit store is down: serve (fail open) rather than refuse everybody; Redis's health shows it.
        log.warning("rate limit store unavailable (%s); %s not limited", exc.__class__.__name__, scope)
        return
    if not allowed:
        reset_at, _remaining = limiter.get_window_stats(item, KEY_PREFIX, scope, key)
        retry_after = max(1, int(reset_at - time.time()))
        raise APIError(429, f"Too many requests; retry in {retry_after} s", headers={"Retry-After": str(retry_after)})


def reset(app: Flask) -> None:
    """Forget every count (tests start each case with empty limits)."""
    app.extensions["trellis"].limiter.storage.reset()
