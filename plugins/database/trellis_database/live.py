"""Live subscriptions to documents: what a Socket.IO subscription and an SSE stream share.

Each process keeps its own subscriptions in a :class:`LiveHub` and receives every ``database.*.*`` event
of the log (``trellis.events``: numbered, in order, across processes). Per event the hub evaluates each
distinct filter once (``Compiler.predicate``, the list's own conditions) on the document before and
after, and sends ``create``/``update``/``delete``, or ``enter``/``leave`` when an update makes a
document start or stop matching.

A subscription with ``since`` replays first: the events after it are read from the log a page at a
time (:meth:`LiveHub.replay`, a generator, so a stream reads the next page only when its client has taken
the last one), and live events meanwhile are left to those reads. Once a read comes back short, live
events are held, the log is read once more (what was left to the reads while the last one ran), then
the held ones whose id is higher than the last replayed go out (no gap, no duplicate at the seam), then
live ones. A replayed event is turned into a change exactly as a live one. Nothing here holds a database
connection between events.
"""

from __future__ import annotations

import json
import logging
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from flask import Flask, current_app

from trellis import connections, events
from trellis.credentials import Identity
from trellis.errors import APIError, bad_request, not_found

from .access import allowed
from .query import Compiler, parse_where
from .registry import snapshot_having

log = logging.getLogger(__name__)

EXTENSION = "trellis_database_live"
KINDS = frozenset({"create", "update", "delete", "enter", "leave"})
REPLAY_PAGE = 200  # events read at a time: one page in memory per replaying subscription


def resync_required(since: int) -> APIError:
    return APIError(
        410,
        f"The event log no longer holds every event after {since}; read the documents again, then subscribe "
        "without since (or with the eventId of the first change received)",
        name="RESYNC_REQUIRED",
    )


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
    last: int = 0  # the highest eventId passed (sent or filtered out): nothing at or below it again
    pending: list[events.Event] | None = field(default_factory=list)  # live events held until it goes live
    replaying: bool = False  # reading the log after ``since``: live events are left to those reads

    def __post_init__(self) -> None:
        self.replaying = self.since is not None


def parse_since(raw: Any, key: str = "since") -> int | None:
    """``since``: an eventId (a non-negative integer, or its decimal text)."""
    if raw is None or raw == "":
        return None
    if isinstance(raw, str) and raw.strip().isdigit() and len(raw.strip()) <= 18:
        return int(raw.strip())
    if isinstance(raw, int) and not isinstance(raw, bool) and 0 <= raw < 2**63:
        return raw
    raise bad_request("since must be an eventId (a non-negative integer)", {key: ["Not an eventId"]})


def parse_kinds(raw: Any) -> frozenset[str]:
    if raw is None:
        return KINDS
    if isinstance(raw, str):
        raw = [part.strip() for part in raw.split(",") if part.strip()]
    if not isinstance(raw, list) or not raw or not all(isinstance(kind, str) and kind in KINDS for kind in raw):
        raise bad_request(
            "events lists some of create, update, delete, enter, leave", {"events": [", ".join(sorted(KINDS))]}
        )
    return frozenset(raw)


def readable_schema(name: Any, identity: Identity | None) -> Any:
    """The schema a caller may list (the REST list's rules: 404 when reading is disabled, 401 when it
    needs a user and there is none)."""
    if not isinstance(name, str) or not name:
        raise bad_request("schema must be a schema name", {"schema": ["Missing or not a string"]})
    snap = snapshot_having(lambda s: s.document_schema(name) is not None)
    schema = snap.document_schema(name)
    if schema is None or schema.table is None:
        raise not_found(f"No schema named {name!r} with documents")
    error = allowed(schema, "read", identity)
    if error is not None:
        raise error
    return schema


def compile_filter(
    schema: Any, condition: Any, describe: Callable[[], str]
) -> tuple[Callable[[dict[str, Any]], bool] | None, str]:
    """The predicate of a condition tree (None when there is no condition) and the key under which
    subscriptions with the same filter share its evaluation (``describe()``: the filter in a canonical
    form, "" for none; called once the filter is known to be valid)."""
    predicate = Compiler(schema, "python").predicate(condition)  # 400 for what the list would refuse
    text = describe()
    return (predicate if text else None), f"{schema.name}\n{text}"


def where_filter(schema: Any, where: Any) -> tuple[Callable[[dict[str, Any]], bool] | None, str]:
    """A subscription's JSON ``where`` (the REST operators)."""
    return compile_filter(
        schema, parse_where(where), lambda: json.dumps(where, sort_keys=True, separators=(",", ":")) if where else ""
    )


def check_replayable(since: int, schema_name: str) -> None:
    """410 RESYNC_REQUIRED when events of the schema after ``since`` may have been pruned; 400 when
    ``since`` is ahead of the log."""
    if since > events.latest():
        raise bad_request("since is ahead of the event log", {"since": ["No such eventId yet"]})
    if not events.complete_after(since, f"database.{schema_name}"):
        raise resync_required(since)


class LiveHub:
    """This process's subscriptions, fed by the event log."""

    def __init__(self, app: Flask) -> None:
        self._app = app
        self._lock = threading.RLock()
        self._listen_lock = threading.Lock()
        self._by_schema: dict[str, dict[str, Subscription]] = {}
        self._by_owner: dict[str, dict[str, Subscription]] = {}
        self._stop_listening: Callable[[], None] | None = None

    def _listen(self) -> None:
        if self._stop_listening is None:
            # Not under self._lock: the log delivers under its own lock, then takes this hub's.
            with self._listen_lock:
                if self._stop_listening is None:
                    with self._app.app_context():
                        self._stop_listening = events.subscribe("database.*.*", self.on_event)

    # users

    def attach_user(self, user_id: str, owner: str, close: Callable[[], None]) -> None:
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

    def add(self, subscription: Subscription, limit: int | None = None) -> None:
        """Register (paused); ``limit``: refuse past that many subscriptions of the same owner."""
        self._listen()
        with self._lock:
            mine = self._by_owner.setdefault(subscription.owner, {})
            if limit is not None and len(mine) >= limit:
                raise bad_request(f"At most {limit} subscriptions per connection", {"subscriptions": ["Too many"]})
            mine[subscription.id] = subscription
            self._by_schema.setdefault(subscription.schema, {})[subscription.id] = subscription

    def start(self, subscription: Subscription) -> None:
        """Send the replay, then what was held, then go live."""
        for change in self.replay(subscription):
            self._send(subscription, change)
        self.go_live(subscription)

    def replay(self, subscription: Subscription) -> Iterator[dict[str, Any]]:
        """The changes after ``since``, read from the log a page at a time (see the module docstring);
        ends early when the subscription is removed meanwhile."""
        if subscription.since is None:
            return
        subscription.last = max(subscription.last, subscription.since)
        family = f"database.{subscription.schema}"
        holding = False
        while self._active(subscription):
            with self._app.app_context():  # a stream reads its pages after its request has ended
                page = events.read(subscription.last, family=family, limit=REPLAY_PAGE)
            for event in page:
                change = self._change(subscription, event, {})
                if change is not None:
                    yield change
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
            for event in held:
                self._pass(subscription, event, {})

    def _active(self, subscription: Subscription) -> bool:
        return self._by_schema.get(subscription.schema, {}).get(subscription.id) is subscription

    def remove(self, owner: str, subscription_id: str | None = None) -> bool:
        """End one subscription of ``owner`` (or all of them); False when there was none."""
        with self._lock:
            mine = self._by_owner.get(owner, {})
            ids = list(mine) if subscription_id is None else [subscription_id] if subscription_id in mine else []
            for sub_id in ids:
                subscription = mine.pop(sub_id)
                by_schema = self._by_schema.get(subscription.schema, {})
                by_schema.pop(sub_id, None)
                if not by_schema:
                    self._by_schema.pop(subscription.schema, None)
            if not mine:
                self._by_owner.pop(owner, None)
            return bool(ids)

    def count(self) -> int:
        with self._lock:
            return sum(len(subs) for subs in self._by_owner.values())

    # events

    def on_event(self, event: events.Event) -> None:
        """A consumer of the log (its receiver thread): one event, to every matching subscription."""
        _, schema_name, _kind = event.topic.split(".", 2)
        with self._lock:
            subscriptions = list(self._by_schema.get(schema_name, {}).values())
            cache: dict[str, Any] = {}  # filter key → the change it makes (one evaluation per distinct filter)
            for subscription in subscriptions:
                if subscription.replaying:
                    continue  # the replay reads it from the log
                if subscription.pending is not None:
                    subscription.pending.append(event)
                else:
                    self._pass(subscription, event, cache)

    def _pass(self, subscription: Subscription, event: events.Event, cache: dict[str, Any]) -> None:
        change = self._change(subscription, event, cache)
        if change is not None:
            self._send(subscription, change)

    def _change(self, subscription: Subscription, event: events.Event, cache: dict[str, Any]) -> dict[str, Any] | None:
        """What ``event`` is for the subscription (None: nothing, or already passed). ``cache``: the kinds
        this one event makes for the filters met so far (one evaluation per distinct filter and event)."""
        if event.id <= subscription.last:
            return None  # replayed already, or a duplicate
        subscription.last = event.id
        key = subscription.filter_key
        if key not in cache:
            cache[key] = _change_kind(event, subscription.predicate)
        kind = cache[key]
        if kind is None or kind not in subscription.kinds:
            return None
        return {
            "subscriptionId": subscription.id,
            "eventId": event.id,
            "event": kind,
            "schema": subscription.schema,
            "document": event.payload.get("document"),
            "at": event.created_at,
        }

    @staticmethod
    def _send(subscription: Subscription, change: dict[str, Any]) -> None:
        try:
            subscription.send(change)
        except Exception:
            log.exception("live subscription %s: sending event %d failed", subscription.id, change["eventId"])


def _change_kind(event: events.Event, predicate: Callable[[dict[str, Any]], bool] | None) -> str | None:
    """What a change is for a filter: its kind, ``enter``/``leave``, or None (not about it)."""
    kind = event.topic.rsplit(".", 1)[1]
    if predicate is None:
        return kind
    payload = event.payload
    document, previous = payload.get("document"), payload.get("previous")
    if kind == "create":
        return kind if _matches(predicate, document) else None
    if kind == "delete":
        return kind if previous is None or _matches(predicate, previous) else None
    before, after = previous is not None and _matches(predicate, previous), _matches(predicate, document)
    if before and after:
        return "update"
    if after:
        return "enter"
    return "leave" if before else None


def _matches(predicate: Callable[[dict[str, Any]], bool], document: Any) -> bool:
    try:
        return isinstance(document, dict) and predicate(document)
    except (TypeError, ValueError):  # a document of another shape than the filter expects: no match
        return False


def hub(app: Flask | None = None) -> LiveHub:
    return (app or current_app).extensions[EXTENSION]


def init_app(app: Flask) -> None:
    app.extensions[EXTENSION] = LiveHub(app)
