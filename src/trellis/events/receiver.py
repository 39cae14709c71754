"""The receiver: each process delivers the numbered events it hears to its consumers (:func:`subscribe`)
strictly in ``event_id`` order, once each. A gap is read from the table, and a poll of ``max(event_id)``
every period catches a lost last message. Each delivered run of events (what arrived together, or one read
of the table) is one batch: a batch consumer gets it whole, and its socket writes go out together
(``socket_fanout.gathered_writes``), so a backlog is held a read at a time. Nothing holds a database
connection while idle."""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass

from flask import Flask

from ..server.socket_fanout import gathered_writes
from .reading import BATCH, LogReader
from .records import Event, matches
from .sequencer import PERIOD_SECONDS

log = logging.getLogger("trellis.events")  # one logger for the whole event log: what operators filter on

# A batch that arrives before an earlier one (two processes number in turn and publish after their
# commits, in either order) waits this long for it before the gap is read from the table.
GAP_WAIT_SECONDS = 0.05


class Receiver:
    """One process's delivery to its consumers, on a thread of its own (never on the caller's: the Redis
    listener reads on, the sequencer numbers on)."""

    def __init__(self, app: weakref.ref[Flask], reader: LogReader, redis_url: str | None) -> None:
        self._app = app
        self.reader = reader
        self.redis_url = redis_url
        self.listeners: list[Listener] = []
        self.received = threading.Event()  # set by an offer: the receiver thread's turn
        self._inbox: list[Event] = []  # offered, not yet taken by the receiver thread
        self._inbox_lock = threading.Lock()
        self._early: dict[int, Event] = {}  # received after a gap: waiting for the events before them
        self._gap_since: float | None = None
        self._deliver_lock = threading.RLock()
        self._delivered: int | None = None  # the last event_id handed to consumers
        self._polled: int | None = None  # the highest event_id at the last poll (see poll)
        self._next_poll = 0.0

    def subscribe(self, entry: Listener) -> Callable[[], None]:
        """Add a consumer; returns the function that removes it."""
        with self._deliver_lock:
            if self._delivered is None:  # from now on: what committed before is for read() (replay)
                self._delivered = self.reader.latest()
            self.listeners.append(entry)

        def unsubscribe() -> None:
            with self._deliver_lock:
                if entry in self.listeners:
                    self.listeners.remove(entry)
                if not self.listeners:  # a later first consumer starts from then, as the first one did
                    self._delivered = None

        return unsubscribe

    def reset(self) -> None:
        """Forget the position (after the table was emptied: tests wipe their data)."""
        with self._deliver_lock:
            self._delivered = None
            self._early.clear()
            self._gap_since = None

    def offer(self, batch: list[Event]) -> None:
        """Hand a numbered batch (ascending) to the receiver thread, which delivers it."""
        with self._inbox_lock:
            self._inbox += batch
        self.received.set()

    def turn(self) -> tuple[threading.Event, float]:
        """Deliver what was offered; poll the table once a period; then wait for the next offer (shortly,
        while a gap waits)."""
        self.received.clear()
        self.receive()
        if time.monotonic() >= self._next_poll:
            self._next_poll = time.monotonic() + PERIOD_SECONDS
            self.poll()
        return self.received, GAP_WAIT_SECONDS if self._early else PERIOD_SECONDS

    def receive(self) -> None:
        """The receiver thread's turn: deliver what was offered, in ``event_id`` order, once each.

        Whatever arrived meanwhile is delivered together (its socket writes gathered: one per socket), so
        a busy process writes less, not later. An event after a gap waits for the batch before it, up to
        GAP_WAIT_SECONDS, then the gap is read from the table."""
        with self._inbox_lock:
            items, self._inbox = self._inbox, []
        with self._deliver_lock:
            if self._delivered is None and items:
                # A receiver starts at the head of the log: what came before is for read() (replay).
                self._delivered = min(item.id for item in items) - 1
            for item in items:
                if self._delivered is not None and item.id > self._delivered:
                    self._early[item.id] = item
            self._deliver_following()
            if not self._early:
                self._gap_since = None
                return
            now = time.monotonic()
            if self._gap_since is None:
                self._gap_since = now
            elif now - self._gap_since >= GAP_WAIT_SECONDS:
                first = min(self._early)
                self.catch_up(first - 1)
                delivered = self._delivered
                if delivered is not None and delivered < first - 1:  # not in the table (pruned, or it went back)
                    log.warning(
                        "events %d to %d are not in the log; delivering from %d", delivered + 1, first - 1, first
                    )
                    self._delivered = first - 1
                self._deliver_following()
                self._gap_since = None if not self._early else now

    def _deliver_following(self) -> None:
        """Deliver the early events that follow the last delivered one, as one batch; drop the ones it passed."""
        if self._delivered is None:  # nothing received yet (the receiver's first turn at start-up)
            return
        for passed in [key for key in self._early if key <= self._delivered]:
            del self._early[passed]
        run: list[Event] = []
        while (item := self._early.pop(self._delivered + len(run) + 1, None)) is not None:
            run.append(item)
        self._deliver(run)

    def catch_up(self, through: int | None = None) -> None:
        """Deliver what the table holds after the last delivered event (up to ``through``)."""
        with self._deliver_lock:
            if self._delivered is None:
                self._delivered = self.reader.latest()
                return
            if through is None and self._delivered > (latest := self.reader.latest()):
                # The table went back (emptied, or restored from a backup): start again from what it holds.
                log.warning("the event log went back from %d to %d; delivering from its start", self._delivered, latest)
                self._delivered = 0
            while through is None or self._delivered < through:
                batch = self.reader.read(self._delivered, limit=BATCH)
                if through is not None:
                    batch = [e for e in batch if e.id <= through]
                if not batch:
                    return
                if batch[0].id != self._delivered + 1:  # pruned meanwhile: carry on from what is kept
                    log.warning("events %d to %d were pruned before delivery", self._delivered + 1, batch[0].id - 1)
                self._deliver(batch)

    def poll(self) -> None:
        """The receiver's safety net, once a period: deliver what the table holds and no publication brought.

        With Redis, only what was numbered by the previous poll already: a publication arrives within
        milliseconds, and delivering it from here instead read the table and ran every consumer on this
        thread while the message was on its way (``bench/results/event_log.md#receiver-poll-with-redis``).
        A restart's state and a table that went back are handled at once, as without Redis."""
        if not self.listeners:
            # Nobody to deliver to (publications are dropped unread: see fanout.heard); a first consumer
            # starts at the head of the log (subscribe).
            with self._deliver_lock:
                if not self.listeners:
                    self._delivered = None
                    return
        if not self.redis_url:
            self.catch_up()
            return
        latest = self.reader.latest()
        earlier, self._polled = self._polled, latest
        with self._deliver_lock:
            if self._delivered is None or self._delivered > latest:
                self.catch_up()
            elif earlier is not None and self._delivered < earlier:
                self.catch_up(earlier)
                self._deliver_following()

    def _deliver(self, batch: list[Event]) -> None:
        """Hand ``batch`` (contiguous, following the last delivered event) to the consumers, its socket
        writes gathered: one write per socket for the batch."""
        if not batch:
            return
        app = self._app()
        listeners = list(self.listeners)
        self._delivered = batch[-1].id
        if app is None or not listeners:
            return
        with app.app_context(), gathered_writes():
            for listener in listeners:
                listener.deliver(batch)


@dataclass(frozen=True, eq=False)  # compared by identity: the same callback may subscribe twice
class Listener:
    """Who hears which events: ``callback(event)`` for each event whose topic matches one of ``patterns``,
    or, when ``batched``, ``callback(events)`` once per delivered batch with its matching events (in order,
    none left out): a consumer that reads the database for each event reads once for them all."""

    patterns: tuple[str, ...]
    callback: Callable[[Event], object] | Callable[[list[Event]], object]
    batched: bool = False

    def deliver(self, batch: list[Event]) -> None:
        found = [item for item in batch if any(matches(pattern, item.topic) for pattern in self.patterns)]
        if not found:
            return
        if self.batched:
            try:
                self.callback(found)  # type: ignore[arg-type]
            except Exception:
                log.exception("event consumer %r failed on events %d to %d", self.callback, found[0].id, found[-1].id)
            return
        for item in found:
            try:
                self.callback(item)  # type: ignore[arg-type]
            except Exception:
                log.exception("event consumer %r failed on event %d", self.callback, item.id)
