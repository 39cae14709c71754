"""The event log: domain events recorded in the transaction of the change, numbered, fanned out.

A module calls :func:`record` where it writes (``database.Item.update``, ``authentication.user.block``);
the row commits with the change or not at all (a transactional outbox, table ``core_events``). A write
that is a single statement (the Database module's single-document writes on PostgreSQL) makes its event
rows part of that statement instead (:func:`recorded_by`, then :func:`written`). Every commit that records
events of a family also bumps that family's counter: the change number (:func:`change_number`).

The parts, in the order an event meets them:

- ``recording``: :func:`record`, :func:`recorded_by`, :func:`written` (the write's transaction);
- ``counters``: the change numbers, bumped at commit;
- ``sequencer``: numbers committed events contiguously in commit order (and why a pass, not a horizon);
- ``fanout``: publishes a numbered batch on Redis, or hands it over in-process;
- ``receiver``: each process delivers to its consumers (:func:`subscribe`, :func:`subscribe_batches`) in
  ``event_id`` order;
- ``reading``: :func:`read`, :func:`latest`, :func:`head`, :func:`oldest`, :func:`complete_after` (replay);
- ``retention``: prunes old events beyond each family's last N;
- ``consumers``: durable named cursors moved in the consumer's transaction (:func:`consumer`);
- ``log``: the :class:`EventLog` of each app, holding them together and running their threads;
- ``records``: what an event is (:class:`Event`, :class:`Numbered`, :func:`family_of`, :func:`matches`).
"""

from __future__ import annotations

from collections.abc import Callable

from flask import current_app

from ..modules import EventTopic
from .consumers import Consumer, consumer
from .counters import SLOTS, change_number, count_commit
from .fanout import LISTEN_RETRY_SECONDS
from .log import WAIT_FOR_STOP_SECONDS, EventLog, current_log, init_app, start
from .reading import BATCH
from .receiver import GAP_WAIT_SECONDS, Listener
from .recording import enabled, record, record_many, recorded, recorded_by, written
from .records import Event, Numbered, family_of, matches
from .retention import RETENTION_LOCK, RETENTION_PERIOD_SECONDS
from .sequencer import BUSY_BATCH, COALESCE_BUSY_SECONDS, COALESCE_SECONDS, PERIOD_SECONDS, SEQUENCER_LOCK

__all__ = [
    "BATCH",
    "BUSY_BATCH",
    "COALESCE_BUSY_SECONDS",
    "COALESCE_SECONDS",
    "GAP_WAIT_SECONDS",
    "LISTEN_RETRY_SECONDS",
    "PERIOD_SECONDS",
    "RETENTION_LOCK",
    "RETENTION_PERIOD_SECONDS",
    "SEQUENCER_LOCK",
    "SLOTS",
    "WAIT_FOR_STOP_SECONDS",
    "Consumer",
    "Event",
    "EventLog",
    "Numbered",
    "change_number",
    "complete_after",
    "consumer",
    "count_commit",
    "enabled",
    "family_of",
    "head",
    "init_app",
    "latest",
    "matches",
    "oldest",
    "read",
    "record",
    "record_many",
    "recorded",
    "recorded_by",
    "start",
    "subscribe",
    "subscribe_batches",
    "topics",
    "written",
]


def read(after: int, family: str | tuple[str, ...] | None = None, limit: int = 1000) -> list[Event]:
    """Numbered events with ``event_id > after`` (of ``family``, or of any of several, when given), ascending."""
    return current_log().read(after, family, limit)


def latest() -> int:
    """The highest ``event_id`` given so far (0 when none)."""
    return current_log().latest()


def head() -> int:
    """The highest ``event_id`` of every event committed so far, numbered now if need be: a consumer that
    starts after it has seen none of the changes acknowledged before (``latest`` may not count them yet)."""
    return current_log().head()


def oldest(family: str | None = None) -> int | None:
    """The lowest ``event_id`` still kept (of ``family`` when given), None when there is none."""
    return current_log().oldest(family)


def complete_after(after: int, family: str) -> bool:
    """Whether the log still holds every event of ``family`` numbered after ``after`` (a replay from there
    loses nothing). Retention prunes a family only beyond its last N events and only below its oldest kept
    one, so the answer is no only when the family may have been pruned and ``after`` is below that."""
    return current_log().complete_after(after, family)


def subscribe(pattern: str, callback: Callable[[Event], object]) -> Callable[[], None]:
    """Call ``callback(event)`` for every event of this process's receiver whose topic matches
    ``pattern`` (dotted, ``*`` = one segment), in ``event_id`` order, from a background thread inside an
    app context. Returns the function that unsubscribes. Callbacks must be quick (no blocking I/O)."""
    return current_log().subscribe(Listener((pattern,), callback))


def subscribe_batches(patterns: tuple[str, ...], callback: Callable[[list[Event]], object]) -> Callable[[], None]:
    """As :func:`subscribe`, for several patterns, with each delivered batch's matching events in one call
    (``event_id`` order, each once): a consumer that reads for its events reads once per batch."""
    return current_log().subscribe(Listener(patterns, callback, batched=True))


def topics() -> list[EventTopic]:
    """The event topics the loaded modules declare (``Module.events``): what a consumer may name."""
    return [topic for module in current_app.extensions["trellis"].modules for topic in module.events]
