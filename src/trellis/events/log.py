"""The per-process machinery of the event log: one :class:`EventLog` per app holds its reader, sequencer,
receiver and retention, and runs their background threads (started by the first write, subscription or
server start-up)."""

from __future__ import annotations

import functools
import json
import logging
import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from flask import Flask

from .. import background, current
from ..modules import ModuleError, declared_topic
from . import fanout
from .reading import BATCH, LogReader
from .receiver import Listener, Receiver
from .records import Event, Numbered
from .retention import RETENTION_PERIOD_SECONDS, Retention
from .sequencer import BUSY_BATCH, COALESCE_BUSY_SECONDS, COALESCE_SECONDS, PERIOD_SECONDS, Sequencer

log = logging.getLogger("trellis.events")  # one logger for the whole event log: what operators filter on

EXTENSION = "trellis_events"
WAIT_FOR_STOP_SECONDS = 5.0


class EventLog:
    """What one process runs for the event log: sequencer, receiver, retention, consumers."""

    def __init__(self, app: Flask) -> None:
        self.app = weakref.ref(app)  # the app, or None once discarded
        self.engine = app.extensions["trellis"].engine
        reads = app.extensions["trellis"].reads
        # Reads of the log need no transaction: PostgreSQL's autocommit pool spares BEGIN/ROLLBACK.
        self.read_engine = getattr(reads, "engine", self.engine)
        self.postgresql = self.engine.dialect.name == "postgresql"
        self.redis_url = app.config.get("REDIS_URL") or None
        # TRELLIS_EVENTS=false records nothing: only to price the log (bench/live_bench.py); live data,
        # webhooks and replay then see no change.
        self.enabled = app.config["EVENTS"]
        self.channel = fanout.channel_of(self.engine)
        # Tests refuse a topic a loaded module records without declaring it (Module.events); production
        # pays nothing for the check. Topics outside every loaded module's name (the core's own tests) pass.
        self.strict = bool(app.config.get("TESTING"))
        self.reader = LogReader(self.read_engine, app.config["EVENTS_RETENTION_COUNT"])
        self.sequencer = Sequencer(self.read_engine, self.postgresql, self.reader)
        self.receiver = Receiver(self.app, self.reader, self.redis_url)
        self.retention = Retention(
            self.engine, self.read_engine, app.config["EVENTS_RETENTION_SECONDS"], app.config["EVENTS_RETENTION_COUNT"]
        )
        self._wake = threading.Event()
        self._started = False
        self._stopping = False
        self._threads: list[threading.Thread] = []
        self._start_lock = threading.Lock()
        self.last_batch = 0  # events numbered by the last pass (how long the next one waits: see _pass)
        self._next_retention = 0.0
        self._warn_pass = background.ThrottledWarning(log)
        self.warn_listen = background.ThrottledWarning(log)

    # public operations

    def check_declared(self, topic: str, payloads: Sequence[Mapping[str, Any] | str] = ()) -> None:
        """Raise :class:`ModuleError` when ``topic`` begins with a loaded module's name that does not declare
        it, or when a payload holds a key its declaration does not name (``EventTopic.payload``)."""
        app = self.app()
        modules = app.extensions["trellis"].modules if app is not None else []
        owner = [m for m in modules if m.name == topic.split(".", 1)[0]]
        if not owner:
            return
        declared = declared_topic(owner, topic)
        if declared is None:
            raise ModuleError(f"module {owner[0].name!r} records event {topic!r} without declaring it (Module.events)")
        keys = declared.payload_keys
        if keys is None:
            return
        for payload in payloads:
            found = json.loads(payload) if isinstance(payload, str) else payload
            unknown = sorted(set(found) - keys) if isinstance(found, Mapping) else ["(not an object)"]
            if unknown:
                raise ModuleError(f"event {topic!r} records payload keys {unknown} its topic does not declare")

    def poke(self) -> None:
        """A commit recorded events: number them soon (never blocks the caller)."""
        self.start()
        self._wake.set()

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        self.start()
        return self.receiver.subscribe(listener)

    def read(self, after: int, family: str | tuple[str, ...] | None = None, limit: int = BATCH) -> list[Event]:
        return self.reader.read(after, family, limit)

    def latest(self) -> int:
        return self.reader.latest()

    def head(self) -> int:
        """The highest ``event_id`` of everything committed so far. On PostgreSQL an event is numbered by a
        pass a few milliseconds after its commit, so what is committed but not numbered yet is numbered (and
        published) here first; on SQLite its INSERT numbered it."""
        if self.postgresql:
            self.publish(self.sequence())
        return self.reader.latest()

    def oldest(self, family: str | None = None) -> int | None:
        return self.reader.oldest(family)

    def complete_after(self, after: int, family: str) -> bool:
        return self.reader.complete_after(after, family)

    def sequence(self) -> list[Numbered]:
        """Number the committed pending rows (locked passes); returns them, ascending."""
        return self.sequencer.sequence()

    def publish(self, batch: list[Numbered]) -> None:
        """Hand a numbered batch to every process's receiver (Redis) or to this one."""
        fanout.publish(self, batch)

    def offer(self, batch: list[Event]) -> None:
        """Hand a numbered batch (ascending) to this process's receiver thread, which delivers it (never on
        the caller's thread: the Redis listener reads on, the sequencer numbers on)."""
        self.start()
        self.receiver.offer(batch)

    def prune(self) -> int:
        """Delete events older than the retention time and not among the last N of their family."""
        return self.retention.prune()

    def reset(self) -> None:
        """Forget the receiver's position (after the table was emptied: tests wipe their data)."""
        self.receiver.reset()

    # the background threads

    def start(self) -> None:
        if self._started:
            return
        with self._start_lock:
            if self._started:
                return
            self._started = True
        # The threads hold the log weakly: an app discarded without stop() ends them.
        ref = weakref.ref(self)
        stopped = functools.partial(_stopped, ref)

        def loop(name: str, what: str, turn: Callable[[weakref.ref], None], pause: Callable[[float], object]) -> Any:
            # The database is down or restarting: the next turn, a second later, tries again.
            return background.start_loop(
                name, what, functools.partial(turn, ref), self._warn_pass, retry_seconds=PERIOD_SECONDS,
                stopped=stopped, pause=pause,
            )  # fmt: skip

        self._threads = [
            loop("trellis-events", "event log pass", _pass, self._wake.wait),
            loop("trellis-events-receive", "event log delivery", _receive, self.receiver.received.wait),
        ]
        if self.redis_url:
            self._threads.append(fanout.listen(self, ref, stopped))

    def stop(self) -> None:
        """End this process's background threads (an app being discarded); :meth:`start` starts them again."""
        with self._start_lock:
            self._stopping = True
            self._wake.set()
            self.receiver.received.set()
        for thread in self._threads:
            thread.join(WAIT_FOR_STOP_SECONDS)
        with self._start_lock:
            self._threads, self._started, self._stopping = [], False, False

    def sequencer_turn(self) -> tuple[threading.Event, float]:
        self._wake.clear()
        self.tick()
        return self._wake, PERIOD_SECONDS

    def receiver_turn(self) -> tuple[threading.Event, float]:
        return self.receiver.turn()

    def tick(self) -> None:
        """One pass of the sequencer's loop: number and publish, and prune when due. (The poll for a lost
        publication is the receiver thread's: nothing here waits for a delivery.)"""
        batch = self.sequence()
        self.last_batch = len(batch)
        self.publish(batch)
        if time.monotonic() >= self._next_retention:
            self._next_retention = time.monotonic() + RETENTION_PERIOD_SECONDS
            self.prune()


def _turn(ref: weakref.ref, turn: Callable[[EventLog], tuple[threading.Event, float]]) -> bool:
    """One turn of a background thread on a log it holds weakly (nothing once the log is gone): ``turn``
    works and names the signal to wait for and for how long; whether the signal came."""
    log_ = ref()
    if log_ is None:
        return False
    signal, seconds = turn(log_)
    del log_
    return signal.wait(seconds)


def _pass(ref: weakref.ref) -> None:
    """The sequencer's turn: a pass, then wait to be poked, or a period (the first at start-up); once
    poked, let the commits of the next few milliseconds join the pass."""
    if _turn(ref, EventLog.sequencer_turn):
        log_ = ref()
        busy = log_ is not None and log_.last_batch >= BUSY_BATCH
        del log_
        time.sleep(COALESCE_BUSY_SECONDS if busy else COALESCE_SECONDS)


def _receive(ref: weakref.ref) -> None:
    """The receiver's turn: deliver what was offered, poll once a period, wait for the next offer."""
    _turn(ref, EventLog.receiver_turn)


def _stopped(ref: weakref.ref) -> bool:
    log_ = ref()
    return log_ is None or log_._stopping


def current_log() -> EventLog:
    """The current app's event log."""
    return current.app().extensions[EXTENSION]


def init_app(app: Flask) -> None:
    app.extensions[EXTENSION] = EventLog(app)


def start(app: Flask) -> EventLog:
    """Start the app's sequencer, receiver and retention job (servers call it at start-up)."""
    log_ = app.extensions[EXTENSION]
    log_.start()
    return log_
