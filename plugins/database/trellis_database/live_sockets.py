"""The ``/database/`` (and ``/database``) Socket.IO namespace: live subscriptions to documents.

Connect with auth ``{token}`` (a user or admin token), ``{masterkey}``, or nothing (public data only); an
invalid credential refuses the connection. Events in, each acknowledged with a result or
``{"error": {name, status, message}}``:

- ``subscribe`` ``{schema, where?, search?, events?, since?}`` → ``{subscriptionId}``;
- ``unsubscribe`` ``{subscriptionId}`` → ``{subscriptionId, unsubscribed: true}``.

Event out: ``change`` ``{subscriptionId, eventId, event, schema, document, at}`` (see ``live.py``); under
access control only for documents the socket's user may read (see ``live_access.py``).
Emits are local (``ignore_queue``): every process receives every event from the log and serves its own
sockets, so the Socket.IO queue carries none of them.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable
from typing import Any

from flask_socketio import ConnectionRefusedError, Namespace

from trellis import current, db
from trellis.credentials import Identity, UserIdentity, identity_from_token, master_key_matches
from trellis.errors import (
    UNAVAILABLE_MESSAGE,
    APIError,
    bad_request,
    body,
    database_unavailable,
    not_found,
    unauthorized,
)
from trellis.realtime import error_ack, socket_event, socket_id
from trellis.server.socket_fanout import send_encoded, send_event

from .live import SharedEncoding, Subscription, hub
from .live_access import viewer
from .live_requests import (
    check_replayable,
    parse_kinds,
    parse_since,
    readable_schema,
    replayed_families,
    where_filter,
)

log = logging.getLogger(__name__)

# The contract names "/database/"; "/database" is the spelling most Socket.IO clients produce.
NAMESPACES = ("/database/", "/database")
MAX_SUBSCRIPTIONS = 100  # per connection: a flood is refused, not served
SUBSCRIBE_KEYS = frozenset({"schema", "where", "search", "events", "since"})


def connection_identity(auth: Any) -> Identity | None:
    """Who connects: ``{token}`` (user or admin), ``{masterkey}``, or nobody. 401 for a bad credential."""
    if auth is None or auth == {}:
        return None
    if not isinstance(auth, dict):
        raise unauthorized("Connect with auth {token: <access token>} or {masterkey: <key>}")
    key, token = auth.get("masterkey"), auth.get("token")
    if key is not None:
        if not isinstance(key, str) or not master_key_matches(key):
            raise unauthorized("Invalid master key")
        return Identity("master")
    if token is not None:
        if not isinstance(token, str) or not token:
            raise unauthorized("Invalid token")
        return identity_from_token(token)
    return None


class DatabaseNamespace(Namespace):
    def on_connect(self, auth: Any = None) -> None:
        try:
            identity = connection_identity(auth)
        except APIError as exc:
            raise ConnectionRefusedError(exc.message, body(exc.status, exc.message, name=exc.name)) from None
        except Exception as exc:
            if database_unavailable(exc):  # a token is checked against the database: no free connection
                log.warning("database socket connect answered 503: %s", exc.__class__.__name__)
                raise ConnectionRefusedError(UNAVAILABLE_MESSAGE, body(503, UNAVAILABLE_MESSAGE)) from None
            log.exception("database socket connect failed")
            raise ConnectionRefusedError("Internal server error", body(500, "Internal server error")) from None
        finally:
            db.session.remove()
        sid = socket_id()
        state: dict[str, Any] = {
            "master": identity is not None and identity.kind == "master",
            "token": None,
            "user": None,
        }
        if identity is not None and identity.kind in ("admin", "user"):
            state["token"] = auth["token"]
        if isinstance(identity, UserIdentity):
            state["user"] = identity.id
            server, namespace = self.socketio.server, self.namespace
            hub().attach_user(
                identity.id, self._owner(sid), lambda: server.disconnect(sid, namespace=namespace, ignore_queue=True)
            )
        self.socketio.server.save_session(sid, state, namespace=self.namespace)

    def on_disconnect(self, reason: Any = None) -> None:
        state = self.socketio.server.get_session(socket_id(), namespace=self.namespace) or {}
        hub().detach(self._owner(socket_id()), state.get("user"))

    def _owner(self, sid: str) -> str:
        return f"{self.namespace} {sid}"

    def _identity(self) -> Identity | None:
        """The socket's credential, checked again (a session ended or a user blocked since connecting)."""
        state = self.socketio.server.get_session(socket_id(), namespace=self.namespace)
        if state.get("master"):
            return Identity("master")
        if state.get("token"):
            return identity_from_token(state["token"])
        return None

    @socket_event
    def on_subscribe(self, data: Any = None) -> dict[str, Any]:
        if not isinstance(data, dict):
            raise bad_request(
                "subscribe takes {schema, where?, search?, events?, since?}", {"_schema": ["Not an object"]}
            )
        unknown = sorted(str(key) for key in data if key not in SUBSCRIBE_KEYS)
        if unknown:
            raise bad_request(f"Unknown field {unknown[0]!r}", {key: ["Unknown field."] for key in unknown})
        identity = self._identity()
        schema = readable_schema(data.get("schema"), identity)
        predicate, filter_key = where_filter(schema, data.get("where"), data.get("search"))
        kinds = parse_kinds(data.get("events"))
        since = parse_since(data.get("since"))
        live = hub()
        start = live.now() if since is None else since
        acting = viewer(identity)
        if since is not None:
            check_replayable(since, replayed_families(schema.name, acting))
        sid = socket_id()
        subscription = Subscription(
            schema=schema.name,
            kinds=kinds,
            predicate=predicate,
            filter_key=filter_key,
            send=functools.partial(self._send, sid),
            owner=self._owner(sid),
            user_id=identity.id if identity is not None and identity.kind == "user" else None,
            since=since,
            last=start,
            viewer=acting,
        )
        subscription.lost = functools.partial(_lost, self, sid, subscription.id)
        live.add(subscription, limit=MAX_SUBSCRIPTIONS)
        # After the acknowledgement (sent when this handler returns): replay, then live events.
        self.socketio.start_background_task(_start, current.app(), subscription, self, sid)
        # since: where it starts (the last eventId before it), so a client resuming before its first change
        # neither misses nor repeats one
        return {"subscriptionId": subscription.id, "since": start}

    @socket_event
    def on_unsubscribe(self, data: Any = None) -> dict[str, Any]:
        subscription_id = data.get("subscriptionId") if isinstance(data, dict) else data
        if not isinstance(subscription_id, str) or not subscription_id:
            raise bad_request("unsubscribe takes {subscriptionId}", {"subscriptionId": ["Missing or not a string"]})
        if not hub().remove(self._owner(socket_id()), subscription_id):
            raise not_found("No subscription with this id on this connection")
        return {"subscriptionId": subscription_id, "unsubscribed": True}

    def _send(self, sid: str, change: dict[str, Any]) -> None:
        """The bytes of ``emit("change", change, to=sid, ignore_queue=True)``, the document encoded once per
        event (see :func:`packet`)."""
        send_encoded(self.socketio.server, self.namespace, sid, packet(self.namespace, change))


def packet(namespace: str, change: dict[str, Any]) -> str:
    """The Socket.IO packet of a ``change`` event: the text python-socketio's ``packet_class(EVENT, namespace,
    ["change", change]).encode()`` gives (``json.dumps`` with its separators), made of the subscription's id and
    the rest of the change encoded once for all its subscribers (``change`` begins with ``subscriptionId``)."""
    # a subscription id is hex (uuid4().hex): its JSON is itself in quotes
    return f'2{namespace},["change",{{"subscriptionId":"{change["subscriptionId"]}"{_rest.get(change)}'


def _encode_rest(change: dict[str, Any]) -> str:
    """``,"eventId":…,"at":…}]``: the change after its subscriptionId, closing the packet's array."""
    rest = {key: value for key, value in change.items() if key != "subscriptionId"}
    return "," + json.dumps(rest, separators=(",", ":"))[1:] + "]"


_rest = SharedEncoding(_encode_rest)


def _start(app: Any, subscription: Subscription, namespace: DatabaseNamespace, sid: str) -> None:
    with app.app_context():
        try:
            hub(app).start(subscription)
        except Exception as exc:  # the database failed while replaying: end the subscription, say why
            log.warning("live subscription %s could not start (%s)", subscription.id, exc.__class__.__name__)
            hub(app).remove(subscription.owner, subscription.id)
            error = APIError(503, "The subscription could not be started; subscribe again")
            namespace.socketio.emit(
                "subscriptionError",
                {"subscriptionId": subscription.id, **error_ack(error)},
                to=sid,
                namespace=namespace.namespace,
                ignore_queue=True,
            )
        finally:
            db.session.remove()


def _lost(namespace: DatabaseNamespace, sid: str, subscription_id: str, since: int) -> None:
    """The subscription ended because an event could not be judged: the client subscribes again from ``since``.
    Sent as its changes are (gathered, in order): the changes up to ``since`` still held for the delivery's
    end go out before it, so a client that drops what follows an ended subscription has lost none of them."""
    error = APIError(503, f"The subscription ended; subscribe again with since={since}")
    notice = {"subscriptionId": subscription_id, "since": since, **error_ack(error)}
    send_event(namespace.socketio.server, namespace.namespace, sid, "subscriptionError", notice)


def namespace_factories() -> tuple[Callable[[], DatabaseNamespace], ...]:
    return tuple(functools.partial(DatabaseNamespace, namespace) for namespace in NAMESPACES)
