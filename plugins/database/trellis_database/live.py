"""Live subscriptions to documents: what a Socket.IO subscription and an SSE stream share.

Each process keeps its own subscriptions in a :class:`LiveHub` and receives every ``database.*.*``,
``authorization.*.*`` and ``authentication.team.*`` event of the log (``trellis.events``: numbered, in
order, across processes). Per event the hub evaluates each distinct filter once (``Compiler.predicate``,
the list's own conditions) on the document before and after, and sends ``create``/``update``/``delete``,
or ``enter``/``leave`` when an update makes a document start or stop matching. Under access control a
subscriber also sees only what it may read, and grants, revokes and team changes send ``enter``/``leave``
(see :mod:`.live_access`: one query per event, never one per subscriber). The events of one delivery of
the log are judged together, in order, at its end (:meth:`LiveHub.judge`): the audiences of its changes of
one schema are read in one statement and the log's tail once, not two statements per event (a bulk load
is one event per document, in each process).

A subscription without ``since`` starts at :meth:`LiveHub.now`: a change acknowledged before the subscribe is
never its own, however late the log numbers it; it reads the log from there once it is added, for what this
process delivered while the subscribe was still reading (its viewer, its filter). A subscription with
``since`` replays first: the events after it are read from the log a page at a time (:meth:`LiveHub.replay`, a generator, so a stream reads the next
page only when its client has taken the last one), and live events meanwhile are left to those reads. Once a
read comes back short, live events are held, the log is read once more (what was left to the reads while the
last one ran), then the held ones whose id is higher than the last replayed go out (no gap, no duplicate at
the seam), then live ones. A replayed event is turned into a change exactly as a live one: judged by the
access in force when it committed. Under access control the replay also reads the grants and revokes that
concern the schema and the subscriber's team changes (``replayed_families``), starting from its teams as they
were at ``since``: a grant made while the client was away replays as ``enter``, and what it could not read
then never reaches it.
An event whose reads fail (the database went away) is never skipped: the subscription ends and its client
is told to subscribe again from the last event it was passed (``Subscription.lost``).
Nothing here holds a database connection between events.
"""

from __future__ import annotations

import functools
import logging
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar, cast

from flask import Flask, current_app
from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError

from trellis import access, connections, events
from trellis.access import Acting, Audience
from trellis.errors import bad_request, database_unavailable

from . import live_access
from .live_access import Sides
from .live_requests import replayed_families

log = logging.getLogger(__name__)

EXTENSION = "trellis_database_live"
T = TypeVar("T")
REPLAY_PAGE = 200  # events read at a time: one page in memory per replaying subscription


@dataclass(eq=False)
class Subscription:
    """One subscriber's view of one schema. ``send(change)`` must not block (an emit, a queue put)."""

    schema: str
    kinds: frozenset[str]
    predicate: Callable[[dict[str, Any]], bool] | None
    filter_key: str  # subscriptions with the same schema and filter share one evaluation per event
    send: Callable[[dict[str, Any]], None]
    owner: str  # the socket (namespace + sid) or SSE stream it belongs to
    user_id: str | None
    since: int | None
    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    # the highest eventId passed (sent, or found not for it; once live, events skipped by its filter group are
    # not counted): nothing at or below it again
    last: int = 0
    pending: list[events.Event] | None = field(default_factory=list)  # live events held until it goes live
    # reading the log after its start (``since``, or ``now``) until the reads caught up: live events are left
    # to those reads
    replaying: bool = True
    viewer: Acting | None = None  # who it reads as (None: everything, an administrator)
    # an event could not be judged for it (the database failed): it has been removed, and its client is
    # told to subscribe again from ``since`` (the last event passed), so nothing is silently skipped
    lost: Callable[[int], object] = lambda since: None


class LiveHub:
    """This process's subscriptions, fed by the event log."""

    def __init__(self, app: Flask) -> None:
        self._app = app
        self._lock = threading.RLock()
        self._listen_lock = threading.Lock()
        # schema → filter key → id → subscription: an event's document is matched once per filter, and the
        # subscriptions whose filter it does not match cost nothing (500 subscribers, a tenth matching each
        # write: ~9 of 10 skipped without a look)
        self._by_schema: dict[str, dict[str, dict[str, Subscription]]] = {}
        self._by_owner: dict[str, dict[str, Subscription]] = {}
        self._starting: dict[str, Subscription] = {}  # replaying or holding: every event concerns them
        # (schema, filter key) → the group's subscriptions by their viewers, and the ``_changed`` it was made at
        self._indexes: dict[tuple[str, str], tuple[int, access.AudienceIndex[Subscription]]] = {}
        self._changed = 0  # counts the subscriptions added and removed and the viewers replaced
        self._stop_listening: list[Callable[[], None]] | None = None

    def _listen(self) -> None:
        if self._stop_listening is None:
            # Not under self._lock: the log delivers under its own lock, then takes this hub's.
            with self._listen_lock:
                if self._stop_listening is None:
                    with self._app.app_context():
                        topics = ("database.*.*", access.GRANT_EVENTS, live_access.TEAM_EVENTS)
                        self._stop_listening = [events.subscribe_batches(topics, self.judge)]

    # users

    def attach_user(self, user_id: str, owner: str, close: Callable[[], object]) -> None:
        """``owner`` (a socket, a stream) belongs to ``user_id``: when the user is blocked or deleted the core's
        registry of live connections (``trellis.connections``) ends its subscriptions and calls ``close``."""
        self._listen()

        def end() -> None:
            self.remove(owner)
            close()

        connections.of(self._app).register(user_id, owner, end)

    def detach(self, owner: str, user_id: str | None) -> None:
        """The socket or stream is gone: forget its subscriptions and its user."""
        self.remove(owner)
        if user_id is not None:
            connections.of(self._app).unregister(user_id, owner)

    # subscriptions

    def now(self) -> int:
        """Where a subscription without ``since`` starts: after every change acknowledged before it (whose
        event the log may not have numbered yet), this process already listening so that nothing after it
        is missed. Read before the subscriber's viewer: a team change after it is then delivered."""
        self._listen()
        return events.head()

    def add(self, subscription: Subscription, limit: int | None = None) -> None:
        """Register (paused); ``limit``: refuse past that many subscriptions of the same owner."""
        self._listen()
        with self._lock:
            mine = self._by_owner.setdefault(subscription.owner, {})
            if limit is not None and len(mine) >= limit:
                raise bad_request(f"At most {limit} subscriptions per connection", {"subscriptions": ["Too many"]})
            mine[subscription.id] = subscription
            groups = self._by_schema.setdefault(subscription.schema, {})
            groups.setdefault(subscription.filter_key, {})[subscription.id] = subscription
            self._starting[subscription.id] = subscription
            self._changed += 1

    def start(self, subscription: Subscription) -> None:
        """Send the replay, then what was held, then go live."""
        for change in self.replay(subscription):
            self._send(subscription, change)
        self.go_live(subscription)

    def replay(self, subscription: Subscription) -> Iterator[dict[str, Any]]:
        """The changes after ``since`` (without it, after :meth:`now`), read from the log a page at a time
        (see the module docstring); ends early when the subscription is removed meanwhile. Without ``since``
        this is what this process delivered between :meth:`now` and :meth:`add` (the subscribe's reads
        yield to the log's receiver): usually nothing, and one short read."""
        if subscription.since is not None:
            subscription.last = max(subscription.last, subscription.since)
        if subscription.viewer is not None and subscription.user_id is not None:
            with self._app.app_context():  # its teams as they were then: the team changes since replay in order
                viewer = live_access.viewer_at(subscription.user_id, subscription.last)
                with self._lock:
                    self._set_viewer(subscription, viewer)
        holding = False
        while self._active(subscription):
            with self._app.app_context():  # a stream reads its pages after its request has ended
                families = replayed_families(subscription.schema, subscription.viewer)
                page = events.read(subscription.last, family=families, limit=REPLAY_PAGE)
                changes = [change for event in page for change in self._changes(subscription, event, {})]
            yield from changes
            if len(page) == REPLAY_PAGE:
                continue
            if holding:
                return
            with self._lock:  # from here live events are held; the next read takes what was left to this one
                subscription.replaying = False
            holding = True

    def go_live(self, subscription: Subscription) -> None:
        """After the replay: send what was held (above the last replayed id), then every event as it comes."""
        with self._lock:
            subscription.replaying = False
            held, subscription.pending = subscription.pending or [], None
            self._starting.pop(subscription.id, None)
            for event in held:
                self._pass(subscription, event, {})

    def _active(self, subscription: Subscription) -> bool:
        group = self._by_schema.get(subscription.schema, {}).get(subscription.filter_key, {})
        return group.get(subscription.id) is subscription

    def remove(self, owner: str, subscription_id: str | None = None) -> bool:
        """End one subscription of ``owner`` (or all of them); False when there was none."""
        with self._lock:
            mine = self._by_owner.get(owner, {})
            ids = list(mine) if subscription_id is None else [subscription_id] if subscription_id in mine else []
            for sub_id in ids:
                subscription = mine.pop(sub_id)
                self._starting.pop(sub_id, None)
                groups = self._by_schema.get(subscription.schema, {})
                group = groups.get(subscription.filter_key, {})
                group.pop(sub_id, None)
                if not group:
                    groups.pop(subscription.filter_key, None)
                    self._indexes.pop((subscription.schema, subscription.filter_key), None)
                if not groups:
                    self._by_schema.pop(subscription.schema, None)
            if not mine:
                self._by_owner.pop(owner, None)
            self._changed += 1
            return bool(ids)

    def count(self) -> int:
        with self._lock:
            return sum(len(subs) for subs in self._by_owner.values())

    # events

    def judge(self, batch: list[events.Event]) -> None:
        """The log's consumer (its receiver thread, one call per delivered batch): each event of ``batch``
        (ascending), in order, to every subscription it may concern; the audiences of its events of one
        schema are read together first (:meth:`_read_ahead`)."""
        with self._app.app_context():
            caches = self._read_ahead(batch)
            for event in batch:
                try:
                    self._judge(event, caches.get(event.id, {}))
                except Exception:
                    log.exception("live delivery of event %d failed", event.id)

    def _read_ahead(self, batch: list[events.Event]) -> dict[int, dict[Any, Any]]:
        """What the batch's changes of documents are for the subscriptions under access control of their
        schema (``live_access.document_sides``: two statements for each schema's events, not two per event),
        as each event's cache; an event left out reads its own when judged (and meets a failure there)."""
        by_schema: dict[str, list[events.Event]] = {}
        for event in batch:
            module, family_name, _kind = event.topic.split(".", 2)
            if module == "database":
                by_schema.setdefault(family_name, []).append(event)
        caches: dict[int, dict[Any, Any]] = {}
        for schema, found in by_schema.items():
            if len(found) < 2 or not self._restricted(schema):
                continue
            try:
                sides = once_more_if_lost(functools.partial(live_access.document_sides, found, schema))
            except Exception as exc:  # each event then reads its own: slower, not wrong, so say it once per batch
                log.warning(
                    "reading %d events' audiences of %s together failed (%s)", len(found), schema, type(exc).__name__
                )
                continue
            for event_id, event_sides in sides.items():
                caches.setdefault(event_id, {})[("sides", schema, True)] = event_sides
        return caches

    def _restricted(self, schema: str) -> bool:
        """Whether a subscription of the schema reads under access control (its events' audiences are read)."""
        with self._lock:
            groups = self._by_schema.get(schema, {})
            return any(sub.viewer is not None for group in groups.values() for sub in group.values())

    def _judge(self, event: events.Event, cache: dict[Any, Any]) -> None:
        """One event to every subscription it may concern; ``cache``: what this one event is, computed once
        per schema, filter, user."""
        module, family_name, _kind = event.topic.split(".", 2)
        with self._lock:
            if module == "database":
                starting = [sub for sub in self._starting.values() if sub.schema == family_name]
                self._offer(starting, event, module, cache)
                # the documents of other schemas that inherit a permission from this one's
                inheriting = [
                    sub
                    for schema_name, groups in self._by_schema.items()
                    if schema_name != family_name and self._inherits(schema_name, family_name, cache)
                    for group in groups.values()
                    for sub in group.values()
                    if sub.viewer is not None
                ]
                self._offer(inheriting, event, module, cache)
                for filter_key, group in list(self._by_schema.get(family_name, {}).items()):
                    try:
                        if self._filtered_out(next(iter(group.values())), event, cache):
                            continue  # the same answer for every subscription of the group
                    except Exception:
                        for subscription in list(group.values()):
                            self._lose(subscription, event)
                        continue
                    for subscription in self._readers(family_name, filter_key, group, event, cache):
                        if subscription.pending is None and not subscription.replaying:
                            self._pass(subscription, event, cache)
                return
            # grants and team changes concern subscribers under access control only
            users = set(live_access.affected_users(event)) if module == "authentication" else None
            subscriptions = [
                sub
                for groups in self._by_schema.values()
                for group in groups.values()
                for sub in group.values()
                if sub.viewer is not None and (users is None or sub.user_id in users)
            ]
            self._offer(subscriptions, event, module, cache)

    def _offer(
        self, subscriptions: list[Subscription], event: events.Event, module: str, cache: dict[Any, Any]
    ) -> None:
        """``event`` to each of ``subscriptions``: left to a running replay, held until it goes live, or passed."""
        for subscription in subscriptions:
            if subscription.replaying:
                if module == "authentication":  # not in the replayed family: keep its viewer current
                    self._membership(subscription, event, cache, send=False)
                continue  # the replay reads it from the log
            if subscription.pending is not None:
                subscription.pending.append(event)
            else:
                self._pass(subscription, event, cache)

    def _readers(
        self, schema: str, filter_key: str, group: dict[str, Subscription], event: events.Event, cache: dict[Any, Any]
    ) -> list[Subscription]:
        """The subscriptions of a group the event's document may concern: those its audiences before and
        after may admit (found in the group's index) and administrators'; every one when an audience is
        not known (no access rule, or its reads failed: each subscription then meets the failure itself)."""
        found = self._indexes.get((schema, filter_key))
        if found is None or found[0] != self._changed:
            index = access.AudienceIndex((sub, sub.viewer) for sub in group.values())
            self._indexes[(schema, filter_key)] = found = (self._changed, index)
        index = found[1]
        if not index.restricted:
            return list(group.values())
        restricted = next((sub for sub in group.values() if sub.viewer is not None), None)
        if restricted is None:
            return list(group.values())
        try:
            audiences = [
                audience
                for side in _sides(restricted, event, cache)
                for audience in (side.readers_before, side.readers_after)
            ]
        except Exception:
            return list(group.values())
        if any(audience is None for audience in audiences):
            return list(group.values())
        return index.candidates(cast("list[Audience]", audiences))

    def _set_viewer(self, subscription: Subscription, viewer: Acting | None) -> None:
        subscription.viewer = viewer
        self._changed += 1

    @staticmethod
    def _inherits(schema_name: str, target: str, cache: dict[Any, Any]) -> bool:
        key = ("inherits", schema_name, target)
        if key not in cache:
            cache[key] = live_access.inherits_from(schema_name, target)
        return cache[key]

    @staticmethod
    def _filtered_out(subscription: Subscription, event: events.Event, cache: dict[Any, Any]) -> bool:
        """Whether the subscription's filter matches the event's documents neither before nor after the
        change: then nothing is sent to any live subscription with the same filter."""
        return not any(any(_seen(subscription, side, cache)) for side in _sides(subscription, event, cache))

    def _pass(self, subscription: Subscription, event: events.Event, cache: dict[Any, Any]) -> None:
        try:
            changes = self._changes(subscription, event, cache)
        except Exception:
            self._lose(subscription, event)
            return
        for change in changes:
            self._send(subscription, change)

    def _lose(self, subscription: Subscription, event: events.Event) -> None:
        """``event`` could not be judged for the subscription (its reads failed): rather than skip it, end the
        subscription and tell its client where to resume."""
        if not self.remove(subscription.owner, subscription.id):
            return  # ended already (a group's failure reaches each subscription once)
        log.warning(
            "live subscription %s lost event %d; its client resumes from %d",
            subscription.id,
            event.id,
            subscription.last,
        )
        try:
            subscription.lost(subscription.last)
        except Exception:
            log.exception("live subscription %s: telling its client failed", subscription.id)

    def _changes(self, subscription: Subscription, event: events.Event, cache: dict[Any, Any]) -> list[dict[str, Any]]:
        """What ``event`` is for the subscription (empty: nothing, or already passed). ``cache``: what this
        one event is for the schemas, filters and users met so far (see :mod:`.live_access`)."""
        if event.id <= subscription.last:
            return []  # replayed already, or a duplicate
        if event.topic.startswith("authentication."):
            if subscription.user_id not in live_access.affected_users(event):
                changes = []  # a replay reads every team change; this one is another user's
            else:
                changes = self._membership(subscription, event, cache)
        else:
            changes = []
            for side in _sides(subscription, event, cache):
                found = _kind(subscription, side, cache)
                if found is not None and found[0] in subscription.kinds:
                    changes.append(_change(subscription, event, *found))
        subscription.last = event.id  # only once judged: a failure above leaves it to a resume
        return changes

    def _membership(
        self, subscription: Subscription, event: events.Event, cache: dict[Any, Any], send: bool = True
    ) -> list[dict[str, Any]]:
        """A team change of the subscription's user: read its viewer again; ``enter``/``leave`` for the
        documents it changed (one query, skipped when the subjects are the same)."""
        old = subscription.viewer
        user_id = subscription.user_id
        if old is None or user_id is None:
            return []
        key = ("viewer", user_id)
        if key not in cache:
            cache[key] = once_more_if_lost(lambda: live_access.viewer_after(event, user_id))
        new = cache[key]
        if new is None or (set(new.subjects), set(new.team_ids)) == (set(old.subjects), set(old.team_ids)):
            return []
        self._set_viewer(subscription, new)
        if not send:
            return []
        changes = []
        found = once_more_if_lost(lambda: live_access.membership_changes(subscription.schema, old, new, event.id))
        for entered, document in found:
            kind = "enter" if entered else "leave"
            if kind in subscription.kinds and (
                subscription.predicate is None or _matches(subscription.predicate, document)
            ):
                changes.append(_change(subscription, event, kind, document if entered else {"_id": document["_id"]}))
        return changes

    @staticmethod
    def _send(subscription: Subscription, change: dict[str, Any]) -> None:
        try:
            subscription.send(change)
        except Exception:
            log.exception("live subscription %s: sending event %d failed", subscription.id, change["eventId"])


class SharedEncoding(Generic[T]):
    """What a change encodes to (``encode(change)``), computed once for the event being delivered and
    shared by every subscriber it goes to: ``encode`` takes the parts that do not name the subscription
    (one document encoding per event and kind instead of one per subscriber, one copy in memory).

    Kept per eventId, kind, schema and document object for the current eventId; the document is held with
    its encoding, so its ``id`` is never reused meanwhile and the events of two apps in one process never
    mix. No lock (one per delivery is dear: ``bench/results/modules.md#live-encodings``): two threads
    racing here at worst encode one change twice, and an entry found always belongs to the very document asked about."""

    def __init__(self, encode: Callable[[dict[str, Any]], T]) -> None:
        self._encode = encode
        self._values: dict[tuple[int, str, str, int], tuple[Any, T]] = {}
        self._event_id: int | None = None

    def get(self, change: dict[str, Any]) -> T:
        document, event_id = change["document"], change["eventId"]
        values = self._values
        if event_id != self._event_id:
            values = self._values = {}
            self._event_id = event_id
        key = (event_id, change["event"], change["schema"], id(document))
        found = values.get(key)
        if found is None or found[0] is not document:
            found = values[key] = (document, self._encode(change))
        return found[1]


def _change(subscription: Subscription, event: events.Event, kind: str, document: Any) -> dict[str, Any]:
    return {
        "subscriptionId": subscription.id,
        "eventId": event.id,
        "event": kind,
        "schema": subscription.schema,
        "document": document,
        "at": event.created_at,
    }


def _kind(subscription: Subscription, side: Sides, cache: dict[Any, Any]) -> tuple[str, Any] | None:
    """``(kind, document)`` of one changed document for one subscription, or None (not for it): its
    filter (evaluated once per distinct filter) and its access (a set intersection)."""
    seen_before, seen_after = _seen(subscription, side, cache)
    viewer = subscription.viewer
    readable_after = side.readers_after is None or viewer is None or side.readers_after.admits(viewer)
    readable_before = side.readers_before is None or viewer is None or side.readers_before.admits(viewer)
    before, after = seen_before and readable_before, seen_after and readable_after
    if side.kind == "create":
        return ("create", side.after) if after else None
    if side.kind == "delete":
        return ("delete", side.gone) if before else None
    if before and after:
        return ("update", side.after) if side.kind == "update" else None
    if after:
        return "enter", side.after
    if before:
        return "leave", side.after if readable_after else side.gone
    return None


def _sides(subscription: Subscription, event: events.Event, cache: dict[Any, Any]) -> list[Sides]:
    """What ``event`` is for the subscription's schema (``live_access.sides``), computed once per event."""
    restricted = subscription.viewer is not None
    key = ("sides", subscription.schema, restricted)
    if key not in cache:
        cache[key] = once_more_if_lost(lambda: live_access.sides(event, subscription.schema, restricted))
    return cache[key]


def once_more_if_lost(read: Callable[[], T]) -> T:
    """``read()``, run once more when the database connection it used was dead (PostgreSQL restarted: the
    pool then replaces every older connection); a second failure is the caller's (``LiveHub._lose``)."""
    try:
        return read()
    except Exception as exc:  # SQLAlchemy's errors, and the driver's own from reads shared through the cache
        # A pool timeout is no dead connection: a second wait as long would only delay the caller's handling.
        if isinstance(exc, PoolTimeoutError) or not database_unavailable(exc):
            raise
        cause = exc.orig if isinstance(exc, DBAPIError) else exc
        log.warning("live delivery: database connection lost (%s); reading again", type(cause).__name__)
    return read()


def _seen(subscription: Subscription, side: Sides, cache: dict[Any, Any]) -> tuple[bool, bool]:
    """Whether the subscription's filter matches the document before and after, once per filter and side."""
    key = ("filter", subscription.filter_key, id(side))
    if key not in cache:
        cache[key] = _filter_sides(subscription.predicate, side)
    return cache[key]


def _filter_sides(predicate: Callable[[dict[str, Any]], bool] | None, side: Sides) -> tuple[bool, bool]:
    """Whether the filter matches the document before and after the change (a deleted document whose
    previous state is unknown counts as matching)."""
    if predicate is None:
        return True, True
    if side.kind == "delete":
        return side.before is None or _matches(predicate, side.before), False
    before = side.before is not None and _matches(predicate, side.before)
    return before, side.after is not None and _matches(predicate, side.after)


def _matches(predicate: Callable[[dict[str, Any]], bool], document: Any) -> bool:
    try:
        return isinstance(document, dict) and predicate(document)
    except (TypeError, ValueError):  # a document of another shape than the filter expects: no match
        return False


def hub(app: Flask | None = None) -> LiveHub:
    return (app or current_app).extensions[EXTENSION]


def init_app(app: Flask) -> None:
    app.extensions[EXTENSION] = LiveHub(app)
