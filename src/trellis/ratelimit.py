"""Rate limits through flask-limiter's storage (Redis when ``TRELLIS_REDIS_URL`` is set, else memory).

Modules call :func:`check` with their own keys (an IP, an email …), so one route can carry several
limits and a breach is rendered in the contract's error shape (429 ``RATE_LIMITED``).
"""
from __future__ import annotations

import time

from flask import Flask, current_app, request
from flask_limiter import Limiter
from flask_limiter.util import get_remote_address
from limits import parse

from .errors import APIError


def init_limiter(app: Flask) -> Limiter:
    app.config.setdefault("RATELIMIT_ENABLED", True)
    storage = app.config.get("REDIS_URL") or "memory://"
    return Limiter(get_remote_address, app=app, storage_uri=storage, key_prefix="trellis", headers_enabled=False)


def client_ip() -> str:
    return request.remote_addr or "unknown"


def check(scope: str, key: str, limit: str) -> None:
    """Count one hit of ``key`` in ``scope`` against ``limit`` (e.g. ``"10/minute"``); 429 when over."""
    limiter: Limiter = current_app.extensions["trellis"].limiter
    if not current_app.config.get("RATELIMIT_ENABLED", True):
        return
    item = parse(limit)
    if not limiter.limiter.hit(item, scope, key):
        reset_at, _remaining = limiter.limiter.get_window_stats(item, scope, key)
        retry_after = max(1, int(reset_at - time.time()))
        raise APIError(429, f"Too many requests; retry in {retry_after} s", headers={"Retry-After": str(retry_after)})
