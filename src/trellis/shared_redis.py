"""The app's Redis client, when ``TRELLIS_REDIS_URL`` is set (production: shared by every process).

One client per app: redis-py keeps its own connection pool (green sockets under eventlet). Short
timeouts, because callers treat Redis as an accelerator or report it (health) and must not hang.
"""
from __future__ import annotations

from typing import Any

from flask import Flask, current_app

_KEY = "trellis_redis"


def redis_client(app: Flask | None = None) -> Any:
    """A ``redis.Redis`` for the configured URL, or None when Redis is not configured."""
    app = app or current_app._get_current_object()  # type: ignore[attr-defined]
    client = app.extensions.get(_KEY)
    if client is None:
        url = app.config.get("REDIS_URL")
        if not url:
            return None
        import redis

        client = app.extensions[_KEY] = redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)
    return client
