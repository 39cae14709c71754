"""Server-Sent Events for clients without Socket.IO: ``GET /database/{schemaName}/changes``.

The list's credentials and filters (``field[$op]=v`` …), ``since`` or the ``Last-Event-ID`` header (the
header wins: an ``EventSource`` opened with ``?since=N`` keeps that URL, and its reconnects carry the last
id it received); the stream carries ``id: <eventId>``, ``event: <create|update|delete|enter|leave>``,
``data: <document>`` (under access control only the documents the caller may read, as the list), and a
comment line every ``TRELLIS_SSE_HEARTBEAT_SECONDS`` (15) so proxies keep it
open and a gone client is noticed.

The replay is read a page at a time as the client takes it. Live changes then wait in the stream's
:class:`Outbox`, at most ``TRELLIS_SSE_BUFFER_BYTES`` (4 MiB) of them: a client that falls further behind
(it stopped reading, or reads slower than the changes come) is disconnected, and its reconnect resumes
with ``Last-Event-ID`` from the log. Between reads the stream holds no database connection.
"""

from __future__ import annotations

import json
import logging
import queue
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

from flask import Response, current_app, request
from werkzeug.datastructures import MultiDict

from trellis.http import Blueprint
from trellis.settings import COUNT, SECONDS, Setting

from .crud_gate import authorize
from .live import SharedEncoding, Subscription, hub
from .live_access import viewer
from .live_requests import check_replayable, compile_filter, parse_kinds, parse_since, replayed_families
from .query import parse_filters
from .registry import snapshot_having

log = logging.getLogger(__name__)

changes_blp = Blueprint("database-changes", __name__, description="Database: live changes as Server-Sent Events")

STREAM_PARAMS = ("since", "events")
SETTINGS = (
    Setting(
        "SSE_HEARTBEAT_SECONDS",
        SECONDS,
        15,
        "a change stream (`/database/{schemaName}/changes`) sends a comment line this often, so proxies keep "
        "it open and a gone client is noticed",
    ),
    Setting(
        "SSE_BUFFER_BYTES",
        COUNT,
        4 * 1024 * 1024,
        "changes a stream's client has not taken yet, at most; a client further behind is disconnected and "
        "resumes from the log",
        shown="4 MiB",
    ),
)
_END = object()
ERROR = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}


@changes_blp.route("/database/<string:schemaName>/changes", methods=["GET"])
@changes_blp.doc(
    operationId="streamDocumentChanges",
    summary="Changes of a schema's documents as Server-Sent Events",
    description="The list's credentials, field filters and `search` words; `Last-Event-ID` (or, without it, `since`) replays "
    "the events after that eventId first; `events` keeps some of create, update, delete, enter, leave. A client "
    "that falls behind by more than the stream's buffer is disconnected; it resumes with `Last-Event-ID`.",
    security=[{}, {"bearerAuth": []}, {"masterkey": []}],
    parameters=[
        {"name": "since", "in": "query", "schema": {"type": "integer", "minimum": 0}},
        {"name": "events", "in": "query", "schema": {"type": "string"}, "example": "create,update"},
        {"name": "search", "in": "query", "schema": {"type": "string", "maxLength": 500}, "example": "red shoe"},
        {"name": "Last-Event-ID", "in": "header", "schema": {"type": "string"}},
    ],
    responses={
        "200": {
            "description": "An endless event stream: `id:`, `event:`, `data:` (the document) per change",
            "content": {"text/event-stream": {"schema": {"type": "string"}}},
        },
        "400": {"description": "Bad filter or since", "content": ERROR},
        "401": {"description": "A user token is needed", "content": ERROR},
        "404": {"description": "No such schema, or reading is disabled", "content": ERROR},
        "410": {"description": "RESYNC_REQUIRED: the log no longer holds every event after since", "content": ERROR},
    },
)
def stream_changes(schemaName: str) -> Response:
    snap = snapshot_having(lambda s: s.document_schema(schemaName) is not None)
    schema = snap.document_schema(schemaName)
    identity = authorize(schema, "read", schemaName)  # exactly the list's rules
    assert schema is not None  # authorize answered 404 otherwise
    filters = MultiDict(
        [(key, value) for key, value in request.args.items(multi=True) if key not in STREAM_PARAMS and key != "search"]
    )
    words = request.args.get("search")
    predicate, filter_key = compile_filter(schema, parse_filters(filters), lambda: _canonical(filters), words)
    kinds = parse_kinds(request.args.get("events"))
    since = _since()
    live = hub()
    start = live.now() if since is None else since
    acting = viewer(identity)
    if since is not None:
        check_replayable(since, replayed_families(schema.name, acting))
    user_id = identity.id if identity is not None and identity.kind == "user" else None
    outbox = Outbox(current_app.config["SSE_BUFFER_BYTES"])
    subscription = Subscription(
        schema=schema.name,
        kinds=kinds,
        predicate=predicate,
        filter_key=filter_key,
        send=outbox.put,
        owner="",
        user_id=user_id,
        since=since,
        last=start,
        viewer=acting,
    )
    subscription.owner = f"sse {subscription.id}"
    connection = getattr(request.environ.get("eventlet.input"), "_sock", None)  # eventlet's WSGI server
    outbox.on_overflow = lambda: _fell_behind(live, subscription, connection)
    subscription.lost = lambda since: outbox.end()  # the client reconnects with Last-Event-ID
    live.add(subscription)
    if user_id is not None:
        live.attach_user(user_id, subscription.owner, outbox.end)
    heartbeat = current_app.config["SSE_HEARTBEAT_SECONDS"]
    return Response(
        _stream(outbox, subscription, heartbeat, live),
        mimetype="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


def _since() -> int | None:
    """``Last-Event-ID`` (a reconnect: the last id the client received), else ``since``."""
    header = request.headers.get("Last-Event-ID", "").strip()
    if header:
        return parse_since(header, "Last-Event-ID")
    return parse_since(request.args.get("since"))


def _canonical(filters: MultiDict) -> str:
    return json.dumps(sorted(filters.items(multi=True)), separators=(",", ":")) if filters else ""


def _frame(change: dict[str, Any]) -> bytes:
    document = json.dumps(change["document"], ensure_ascii=False, separators=(",", ":"))
    return f"id: {change['eventId']}\nevent: {change['event']}\ndata: {document}\n\n".encode()


_shared = SharedEncoding(_frame)  # one frame per event and kind, whatever the number of streams


class Outbox:
    """A stream's changes waiting to be written, as frames, at most ``limit`` bytes of them.

    ``put`` runs on the event log's delivery thread and never blocks. A change that does not fit means
    the client fell behind: what waits is dropped, the stream ends and ``on_overflow`` runs (once).
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.on_overflow: Callable[[], None] = lambda: None
        self._queue: queue.Queue = queue.Queue()
        self._lock = threading.Lock()
        self._size = 0
        self._ended = False

    def put(self, change: dict[str, Any]) -> None:
        frame = _shared.get(change)
        with self._lock:
            if self._ended:
                return
            if self._size + len(frame) <= self.limit:
                self._size += len(frame)
                self._queue.put(frame)
                return
        if self.end():
            self.on_overflow()

    def end(self) -> bool:
        """No more changes: what waits is dropped, the stream ends at its next read. False when it had
        ended already."""
        with self._lock:
            if self._ended:
                return False
            self._ended, self._size = True, 0
            while not self._queue.empty():
                self._queue.get_nowait()
            self._queue.put(_END)
            return True

    def get(self, timeout: float) -> bytes | object:
        """The next frame, or ``_END``; ``queue.Empty`` after ``timeout`` seconds without one."""
        item = self._queue.get(timeout=timeout)
        if item is not _END:
            with self._lock:
                self._size -= len(item)
        return item


def _fell_behind(live: Any, subscription: Subscription, connection: Any) -> None:
    """Disconnect a client that fell behind. Its stream's writer is probably blocked on the full socket:
    shutting the socket down wakes it (the write fails, eventlet ends the response); the bytes the kernel
    already holds still reach the client, which drops a last, cut frame and reconnects from the id before."""
    log.info("live stream %s fell behind its buffer; disconnecting it", subscription.id)
    live.detach(subscription.owner, subscription.user_id)
    if connection is not None:
        try:
            connection.shutdown(socket.SHUT_RDWR)
        except OSError:  # already closed by the peer
            pass


def _stream(outbox: Outbox, subscription: Subscription, heartbeat: float, live: Any) -> Iterator[bytes]:
    try:
        yield f": subscribed {subscription.id}\n\n".encode()
        try:
            for change in live.replay(subscription):
                yield _frame(change)
        except Exception as exc:  # the database failed while replaying: the client reconnects from its last id
            log.warning("live stream %s: replay failed (%s)", subscription.id, exc.__class__.__name__)
            return
        live.go_live(subscription)
        while True:
            try:
                frame = outbox.get(heartbeat)
            except queue.Empty:
                yield b": heartbeat\n\n"
                continue
            if not isinstance(frame, bytes):  # _END
                return
            yield frame
    finally:  # the client went away (a write failed), fell behind, or the user was blocked
        live.detach(subscription.owner, subscription.user_id)
