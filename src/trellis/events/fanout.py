"""Fan-out: a numbered batch reaches every process's receiver, published on Redis (``TRELLIS_REDIS_URL``,
one channel per database) or, without Redis, handed to this process's receiver."""

from __future__ import annotations

import functools
import hashlib
import json
import threading
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import redis
import sqlalchemy as sa

from .. import background
from ..shared_redis import redis_client, redis_options
from .records import Event, Numbered
from .sequencer import PERIOD_SECONDS

if TYPE_CHECKING:
    from .log import EventLog

LISTEN_RETRY_SECONDS = 1.0


def channel_of(engine: sa.Engine) -> str:
    """The Redis channel of the log in ``engine``'s database: several deployments (or test runs) may share
    one Redis."""
    return "trellis:events:" + hashlib.sha1(engine.url.render_as_string(hide_password=True).encode()).hexdigest()[:12]


def publish(log_: EventLog, batch: list[Numbered]) -> None:
    """Hand a numbered batch to every process's receiver (Redis) or to this one."""
    if not batch:
        return
    app = log_.app()
    client = redis_client(app) if app is not None and log_.redis_url else None
    if client is None:
        if log_.receiver.listeners:
            log_.offer([numbered.event() for numbered in batch])
        return
    message = "[" + ",".join(numbered.wire() for numbered in batch) + "]"
    try:
        client.publish(log_.channel, message)
    except redis.RedisError:
        pass  # the breaker has warned; every receiver's poll reads the batch from the table


def listen(log_: EventLog, ref: weakref.ref[EventLog], stopped: Callable[[], bool]) -> threading.Thread:
    """Start the thread that hands every batch published on the log's channel to this process's receiver
    (``ref``: the log, held weakly)."""
    app = log_.app()
    assert log_.redis_url is not None  # the log listens only where Redis carries its batches
    listener = background.RedisListener(
        log_.redis_url,
        log_.channel,
        "event log",  # meanwhile the receiver's poll delivers from the table
        log_.warn_listen,
        connect_timeout=redis_options(app)["socket_connect_timeout"] if app is not None else 0.25,
        retry_seconds=LISTEN_RETRY_SECONDS,
        poll_seconds=PERIOD_SECONDS,  # wakes up to notice a stop
        stopped=stopped,
    )
    return listener.start("trellis-events-listen", functools.partial(heard, ref))


def heard(ref: weakref.ref[EventLog], message: dict[str, Any]) -> None:
    """A numbered batch published by any process, handed to this process's receiver."""
    log_ = ref()
    # A process nobody in listens to (no live subscription, no webhook) reads no payload
    # (``bench/results/event_log.md#process-without-consumers``).
    if log_ is not None and log_.receiver.listeners:
        log_.offer([Event(*item) for item in json.loads(message["data"])])
