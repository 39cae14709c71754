"""Server-Sent Events for clients without Socket.IO: ``GET /database/{schemaName}/changes``.

The list's credentials and filters (``field[$op]=v`` …), ``since`` or the ``Last-Event-ID`` header (the
header wins: an ``EventSource`` opened with ``?since=N`` keeps that URL, and its reconnects carry the last
id it received); the stream carries ``id: <eventId>``, ``event: <create|update|delete|enter|leave>``, ``data: <document>``,
and a comment line every ``TRELLIS_SSE_HEARTBEAT_SECONDS`` (15) so proxies keep it open and a gone
client is noticed. The replay is read before the response starts; afterwards the stream only waits on
its queue (a green queue under eventlet) and holds no database connection.
"""

from __future__ import annotations

import json
import queue
from collections.abc import Iterator
from typing import Any

from flask import Response, current_app, request
from werkzeug.datastructures import MultiDict

from trellis.http import Blueprint

from .access import authorize
from .live import Subscription, check_replayable, compile_filter, hub, parse_kinds, parse_since
from .query import parse_filters
from .registry import snapshot_having

changes_blp = Blueprint("database-changes", __name__, description="Database: live changes as Server-Sent Events")

STREAM_PARAMS = ("since", "events")
_END = object()
ERROR = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}


@changes_blp.route("/database/<string:schemaName>/changes", methods=["GET"])
@changes_blp.doc(
    operationId="streamDocumentChanges",
    summary="Changes of a schema's documents as Server-Sent Events",
    description="The list's credentials and field filters; `Last-Event-ID` (or, without it, `since`) replays "
    "the events after that eventId first; `events` keeps some of create, update, delete, enter, leave.",
    security=[{}, {"bearerAuth": []}, {"masterkey": []}],
    parameters=[
        {"name": "since", "in": "query", "schema": {"type": "integer", "minimum": 0}},
        {"name": "events", "in": "query", "schema": {"type": "string"}, "example": "create,update"},
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
    filters = MultiDict([(key, value) for key, value in request.args.items(multi=True) if key not in STREAM_PARAMS])
    predicate, filter_key = compile_filter(schema, parse_filters(filters), lambda: _canonical(filters))
    kinds = parse_kinds(request.args.get("events"))
    since = _since()
    if since is not None:
        check_replayable(since, schema.name)
    inbox: queue.Queue = queue.Queue()
    user_id = identity.id if identity is not None and identity.kind == "user" else None
    subscription = Subscription(
        schema=schema.name,
        kinds=kinds,
        predicate=predicate,
        filter_key=filter_key,
        send=inbox.put,
        owner="",
        user_id=user_id,
        since=since,
    )
    subscription.owner = f"sse {subscription.id}"
    live = hub()
    live.add(subscription)
    if user_id is not None:
        live.attach_user(user_id, subscription.owner, lambda: inbox.put(_END))
    try:
        live.start(subscription)  # the replay goes into the queue now, before the response starts
    except BaseException:
        live.detach(subscription.owner, user_id)
        raise
    heartbeat = float(current_app.config.get("SSE_HEARTBEAT_SECONDS", 15))
    response = Response(
        _stream(inbox, subscription, heartbeat, live, user_id),
        mimetype="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )
    return response


def _since() -> int | None:
    """``Last-Event-ID`` (a reconnect: the last id the client received), else ``since``."""
    header = request.headers.get("Last-Event-ID", "").strip()
    if header:
        return parse_since(header, "Last-Event-ID")
    return parse_since(request.args.get("since"))


def _canonical(filters: MultiDict) -> str:
    return json.dumps(sorted(filters.items(multi=True)), separators=(",", ":")) if filters else ""


def _stream(
    inbox: queue.Queue, subscription: Subscription, heartbeat: float, live: Any, user_id: str | None
) -> Iterator[str]:
    try:
        yield f": subscribed {subscription.id}\n\n"
        while True:
            try:
                change = inbox.get(timeout=heartbeat)
            except queue.Empty:
                yield ": heartbeat\n\n"
                continue
            if change is _END:
                return
            document = json.dumps(change["document"], ensure_ascii=False, separators=(",", ":"))
            yield f"id: {change['eventId']}\nevent: {change['event']}\ndata: {document}\n\n"
    finally:  # the client went away (a write failed) or the user was blocked
        live.detach(subscription.owner, user_id)
