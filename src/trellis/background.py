"""Background loops and throttled warnings: how the core and the modules keep work going in the background.

- :class:`ThrottledWarning` logs a recurring failure at most once a minute (with Redis or the database
  down, every request or every pass would log one otherwise);
- :func:`start_loop` runs a step over and over in a daemon thread (green under eventlet); a step that
  raises is warned about (throttled) and the loop goes on after a pause;
- :class:`PollingWorker` is such a loop for queued work: woken by :meth:`PollingWorker.wake`, else polling;
- :class:`RedisListener` receives one Redis pub/sub channel for ever, subscribing again after any failure.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import redis
from flask import Flask

WARN_EVERY_SECONDS = 60.0


def never() -> bool:
    return False


class ThrottledWarning:
    """Logs a warning on ``logger`` at most once every ``every`` seconds; the others are dropped.

    ``clock`` is the time source (tests pass their own)."""

    def __init__(
        self,
        logger: logging.Logger,
        *,
        every: float = WARN_EVERY_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.logger = logger
        self.every = every
        self.clock = clock
        self._at: float | None = None
        self._lock = threading.Lock()

    def due(self) -> bool:
        """Whether a warning may be logged now; if so, the next one waits ``every`` seconds."""
        now = self.clock()
        with self._lock:
            if self._at is not None and now - self._at < self.every:
                return False
            self._at = now
            return True

    def __call__(self, message: str, *args: Any, exc_info: bool = False) -> bool:
        """Log ``message % args`` unless a warning was logged less than ``every`` seconds ago; whether it was."""
        if not self.due():
            return False
        self.logger.warning(message, *args, exc_info=exc_info)
        return True


def run_loop(
    what: str,
    step: Callable[[], object],
    warning: ThrottledWarning,
    *,
    retry_seconds: float,
    stopped: Callable[[], bool] = never,
    pause: Callable[[float], object] = time.sleep,
) -> None:
    """Call ``step()`` until ``stopped()``. A step that raises is logged (``warning``: at most once a
    minute, with its traceback) and the loop goes on after ``pause(retry_seconds)``; a step waits for
    its own next turn."""
    while not stopped():
        try:
            step()
        except Exception as exc:
            # a dependency down (the database restarting, Redis gone) is expected and says all in one line;
            # anything else is ours, and its traceback is what finds it
            warning(
                "%s failed (%s: %s); trying again (warned once a minute)",
                what,
                exc.__class__.__name__,
                exc,
                exc_info=not _dependency_down(exc),
            )
            pause(retry_seconds)


def _dependency_down(exc: BaseException) -> bool:
    from .errors import database_unavailable  # errors imports the app's modules; only needed on a failure

    return database_unavailable(exc) or isinstance(exc, redis.RedisError)


def start_loop(
    name: str, what: str, step: Callable[[], object], warning: ThrottledWarning, **options: Any
) -> threading.Thread:
    """:func:`run_loop` in a daemon thread called ``name`` (green under eventlet), started."""
    thread = threading.Thread(target=run_loop, args=(what, step, warning), kwargs=options, name=name, daemon=True)
    thread.start()
    return thread


class PollingWorker:
    """``threads`` background threads, each running ``step()`` in an app context until it reports no work
    done. A step that raises is logged (throttled) and tried again on the next poll.

    Only the first thread polls (every ``poll_seconds``); the others wait to be woken: by :meth:`wake`
    (work queued in this process: it rouses one waiting thread) or by a thread whose step found work
    while others were waiting, so that a backlog draws every thread in one by one, and an idle queue is
    polled once a period instead of once per thread: an idle server's CPU went mostly to those polls
    (``bench/results/core.md#one-poller``)."""

    def __init__(
        self,
        app: Flask,
        name: str,
        step: Callable[[], bool],
        *,
        threads: int = 1,
        poll_seconds: float = 1.0,
        logger: logging.Logger | None = None,
    ) -> None:
        self.app = app
        self.name = name
        self.step = step
        self.threads = threads
        self.poll_seconds = poll_seconds
        self._wakes = threading.Semaphore(0)
        self._waiting = 0  # threads waiting for a wake without a timeout (read unlocked: a stale read costs
        # one wake too many, a claim that finds nothing, or one too few, left to the next poll)
        self._stopped = False
        self._warn = ThrottledWarning(logger or logging.getLogger(__name__))

    def start(self) -> None:
        for n in range(self.threads):
            poller = n == 0
            start_loop(
                f"{self.name}-{n}",
                self.name,
                functools.partial(self._step, poller),
                self._warn,
                retry_seconds=self.poll_seconds,
                stopped=lambda: self._stopped,
                pause=self._wait,
            )

    def wake(self) -> None:
        self._wakes.release()

    def stop(self) -> None:
        """End the threads after their current step (an app being discarded, e.g. in tests)."""
        self._stopped = True
        self._wakes.release(self.threads)

    def _step(self, poller: bool) -> None:
        with self.app.app_context():
            worked = self.step()
        if worked:
            if self._waiting:
                self._wakes.release()  # more may be due: one more thread joins
        elif poller:
            self._wait(self.poll_seconds)
        else:
            self._waiting += 1
            try:
                self._wakes.acquire()
            finally:
                self._waiting -= 1

    def _wait(self, seconds: float) -> None:
        self._wakes.acquire(timeout=seconds)


class RedisListener:
    """Receives the Redis pub/sub ``channel`` at ``url`` until ``stopped()``.

    It subscribes, yields each message (redis-py's dict: ``type``, ``channel``, ``data``) and, after any
    failure (Redis down or restarting, the connection killed), warns at most once a minute and
    subscribes again ``retry_seconds`` later: a fixed short delay, so messages cross processes again
    soon after an outage, whatever its length; it costs one connection attempt per delay while Redis is
    down. Messages published while it was not subscribed are lost (pub/sub keeps nothing): its users
    read what they missed elsewhere, or accept the loss as with any outage.

    The connection has a connect timeout but no read timeout (it waits for messages by design; a
    health check every 30 s finds a dead peer); it wakes every ``poll_seconds`` to notice a stop."""

    def __init__(
        self,
        url: str,
        channel: str,
        what: str,
        warning: ThrottledWarning,
        *,
        connect_timeout: float = 0.25,
        retry_seconds: float = 1.0,
        poll_seconds: float = 1.0,
        stopped: Callable[[], bool] = never,
    ) -> None:
        self.url = url
        self.channel = channel
        self.what = what
        self.warning = warning
        self.connect_timeout = connect_timeout
        self.retry_seconds = retry_seconds
        self.poll_seconds = poll_seconds
        self.stopped = stopped
        self.client_name = "trellis-listen:" + channel

    def messages(self) -> Iterator[dict[str, Any]]:
        while not self.stopped():
            pubsub = None
            try:
                client = redis.Redis.from_url(
                    self.url,
                    socket_connect_timeout=self.connect_timeout,
                    socket_keepalive=True,
                    health_check_interval=30,
                    client_name=self.client_name,  # CLIENT LIST shows each listener's channel
                )
                pubsub = client.pubsub(ignore_subscribe_messages=True)
                pubsub.subscribe(self.channel)
                while not self.stopped():
                    message = pubsub.get_message(timeout=self.poll_seconds)
                    if message is not None:
                        yield message
            except Exception as exc:  # any failure of the listening connection: subscribe again shortly
                self.warning(
                    "%s: cannot receive from Redis (%s: %s); retrying every %g s (warned once a minute)",
                    self.what,
                    exc.__class__.__name__,
                    exc,
                    self.retry_seconds,
                )
                time.sleep(self.retry_seconds)
            finally:
                if pubsub is not None:
                    pubsub.close()

    def run(self, on_message: Callable[[dict[str, Any]], object]) -> None:
        """Hand every message to ``on_message`` until stopped; one that raises is warned about (throttled)."""
        for message in self.messages():
            try:
                on_message(message)
            except Exception as exc:
                self.warning(
                    "%s: a message could not be handled (%s: %s) (warned once a minute)",
                    self.what,
                    exc.__class__.__name__,
                    exc,
                    exc_info=True,
                )

    def start(self, name: str, on_message: Callable[[dict[str, Any]], object]) -> threading.Thread:
        """:meth:`run` in a daemon thread called ``name`` (green under eventlet), started."""
        thread = threading.Thread(target=self.run, args=(on_message,), name=name, daemon=True)
        thread.start()
        return thread
