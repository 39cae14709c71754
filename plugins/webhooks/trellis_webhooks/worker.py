"""The background work of one serving process: queueing events as deliveries, and sending due deliveries.

Two green threads (``Module.background``, started by ``trellis.serve``): the dispatcher turns new events of
the event log into delivery rows, woken by ``events.subscribe`` and by a poll; the delivery loop claims due
deliveries for up to ``senders`` attempts in flight, each on a thread of its own so that one slow receiver
(up to 10 s) does not hold up the others. Every process runs both; the database decides who does what.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from flask import Flask

from trellis.module_config import get as get_config

from . import deliveries
from .deliveries import Claimed
from .settings import DeliverySettings

log = logging.getLogger(__name__)
WARN_EVERY_SECONDS = 60.0


class _Warner:
    """Logs a failing loop's error at most once a minute (a database outage must not flood the log)."""

    def __init__(self, what: str) -> None:
        self.what = what
        self._at = -WARN_EVERY_SECONDS

    def __call__(self) -> None:
        now = time.monotonic()
        if now - self._at >= WARN_EVERY_SECONDS:
            self._at = now
            log.warning("webhooks: %s failed; trying again (warned once a minute)", self.what, exc_info=True)


class Worker:
    def __init__(self, app: Flask, settings: DeliverySettings) -> None:
        self.app = app
        self.settings = settings
        self.delivery_wanted = threading.Event()
        self.dispatch_wanted = threading.Event()
        self._in_flight = 0
        self._lock = threading.Lock()
        self._soonest_retry = float("inf")  # monotonic time of the earliest retry this process scheduled

    def start(self) -> None:
        for target, name in ((self._delivery_loop, "webhooks-delivery"), (self._dispatch_loop, "webhooks-dispatch")):
            threading.Thread(target=target, name=name, daemon=True).start()

    # --- sending ---------------------------------------------------------------------------------------

    def _delivery_loop(self) -> None:
        warn = _Warner("claiming due deliveries")
        while True:
            self.delivery_wanted.clear()
            free = self.settings.senders - self._in_flight
            claimed: list[Claimed] = []
            if free > 0:
                try:
                    with self.app.app_context():
                        if get_config("webhooks")["active"]:
                            claimed = deliveries.claim_due(free)
                except Exception:
                    warn()
            for one in claimed:
                with self._lock:
                    self._in_flight += 1
                threading.Thread(target=self._send, args=(one,), name="webhooks-send", daemon=True).start()
            if claimed and len(claimed) == free:
                self.delivery_wanted.wait(self.settings.poll_seconds)  # a finished send wakes the loop
            elif not claimed:
                self.delivery_wanted.wait(self._idle_seconds())

    def _idle_seconds(self) -> float:
        """Until the next poll, or sooner when a retry this process scheduled falls due first."""
        wait = self.settings.poll_seconds
        soonest = self._soonest_retry - time.monotonic()
        if soonest < wait:
            self._soonest_retry = float("inf")
            wait = max(soonest, 0.0)
        return wait

    def _send(self, claimed: Claimed) -> None:
        try:
            with self.app.app_context():
                allow_private = bool(get_config("webhooks")["allowPrivateTargets"])
                status = deliveries.deliver(claimed, allow_private)
            if status == deliveries.RETRYING:
                # The jittered delay is at least 90 % of the schedule's; the claim finds it due from then on.
                due = time.monotonic() + self.settings.retry_seconds[claimed.attempts - 1] * (1 - deliveries.JITTER)
                self._soonest_retry = min(self._soonest_retry, due)
        except Exception:  # the lease runs out and another attempt follows: nothing is lost
            log.warning("webhooks: delivery %s could not be attempted or recorded", claimed.id, exc_info=True)
        finally:
            with self._lock:
                self._in_flight -= 1
            self.delivery_wanted.set()

    # --- queueing events -----------------------------------------------------------------------------------

    def _dispatch_loop(self) -> None:
        from .dispatcher import dispatch, subscribe

        warn = _Warner("queueing events as deliveries")
        with self.app.app_context():
            unsubscribe: Callable[[], None] | None = None
            while unsubscribe is None:
                try:
                    unsubscribe = subscribe(self.dispatch_wanted.set)
                except Exception:
                    warn()
                    time.sleep(self.settings.poll_seconds)
        while True:
            self.dispatch_wanted.clear()
            busy = False
            try:
                with self.app.app_context():
                    queued, busy = dispatch()
                if queued:
                    self.delivery_wanted.set()
            except Exception:
                warn()
            # Another process holds the cursor: it may be finishing just before our event, so look again soon.
            self.dispatch_wanted.wait(0.02 if busy else self.settings.poll_seconds)


def start(app: Flask) -> None:
    """``Module.background``: this process's dispatcher and delivery loop."""
    Worker(app, deliveries.runtime_of(app).settings).start()
