"""The app's Redis client, when ``TRELLIS_REDIS_URL`` is set (production: shared by every process).

One client per app: redis-py keeps its own connection pool (green sockets under eventlet). Every
caller treats Redis as an accelerator (counts, rate limits, socket registry) or reports it (health),
so a Redis fault must cost milliseconds, not seconds:

- short timeouts (``REDIS_CONNECT_TIMEOUT`` 0.25 s, ``REDIS_TIMEOUT`` 0.5 s) and no redis-py retries
  (its default retries three times with back-off: a hung Redis cost 2 s per Database write);
- a circuit breaker: after a connection error or a timeout, every command fails at once with
  ``redis.ConnectionError`` for ``REDIS_BREAKER_SECONDS`` (5 s); then one command tries again.
  A hung (SIGSTOPped) Redis thus costs one request 0.5 s every 5 s and the others microseconds.

:func:`redis_options` gives the same settings to clients built elsewhere (the rate limiter's storage,
the Socket.IO message queue).
"""

from __future__ import annotations

import logging
import time
from typing import Any

import redis
from flask import Flask
from redis.backoff import NoBackoff
from redis.retry import Retry

from . import current
from .background import ThrottledWarning

log = logging.getLogger(__name__)

_KEY = "trellis_redis"


class CircuitBreaker:
    """Open for ``open_seconds`` after a failure; warns at most once a minute."""

    def __init__(self, open_seconds: float) -> None:
        self.open_seconds = open_seconds
        self.open_until = 0.0
        self._warning = ThrottledWarning(log)

    def check(self) -> None:
        if time.monotonic() < self.open_until:
            raise redis.ConnectionError("Redis is unavailable (circuit open after a recent failure)")

    def trip(self, error: BaseException) -> None:
        self.open_until = time.monotonic() + self.open_seconds
        self._warning(
            "Redis failed (%s: %s); commands fail fast for %.0f s at a time (warned once a minute)",
            error.__class__.__name__,
            error,
            self.open_seconds,
        )


_FAULTS = (redis.ConnectionError, redis.TimeoutError, OSError)


def _connection_class(breaker: CircuitBreaker, base: type[redis.Connection]) -> type[redis.Connection]:
    class BreakerConnection(base):  # type: ignore[valid-type, misc]
        """A connection that consults the breaker before using the network and trips it on a fault."""

        def connect_check_health(self, *args: Any, **kwargs: Any) -> None:
            if self._sock is None:
                breaker.check()
            try:
                super().connect_check_health(*args, **kwargs)
            except _FAULTS as exc:
                breaker.trip(exc)
                raise

        def send_packed_command(self, *args: Any, **kwargs: Any) -> None:
            breaker.check()
            try:
                super().send_packed_command(*args, **kwargs)
            except _FAULTS as exc:
                breaker.trip(exc)
                raise

        def read_response(self, *args: Any, **kwargs: Any) -> Any:
            try:
                return super().read_response(*args, **kwargs)
            except _FAULTS as exc:
                breaker.trip(exc)
                raise

    return BreakerConnection


def redis_options(app: Flask) -> dict[str, Any]:
    """Keyword arguments for ``redis.Redis.from_url``: short timeouts, no retries."""
    return {
        "socket_connect_timeout": app.config["REDIS_CONNECT_TIMEOUT"],
        "socket_timeout": app.config["REDIS_TIMEOUT"],
        "retry": Retry(NoBackoff(), 0),
    }


def make_pool(app: Flask, url: str) -> redis.ConnectionPool:
    """A connection pool for ``url`` with the app's timeouts and its circuit breaker."""
    breaker = app.extensions.get("trellis_redis_breaker")
    if breaker is None:
        breaker = app.extensions["trellis_redis_breaker"] = CircuitBreaker(app.config["REDIS_BREAKER_SECONDS"])
    pool = redis.ConnectionPool.from_url(url, **redis_options(app))
    pool.connection_class = _connection_class(breaker, pool.connection_class)
    return pool


def redis_client(app: Flask | None = None) -> Any:
    """A ``redis.Redis`` for the configured URL, or None when Redis is not configured."""
    app = app or current.app()
    client = app.extensions.get(_KEY)
    if client is None:
        url = app.config.get("REDIS_URL")
        if not url:
            return None
        client = app.extensions[_KEY] = redis.Redis(connection_pool=make_pool(app, url), retry=Retry(NoBackoff(), 0))
    return client
