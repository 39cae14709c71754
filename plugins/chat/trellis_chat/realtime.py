"""The Chat module's Socket.IO side: the ``/chat/`` (and ``/chat``) namespace, fan-out of room
events, and operations on all sockets of a user in every worker.

Socket rooms: each chat room is a Socket.IO room named by the room id; each socket is also in
``user:<id>`` so the server can find every socket of a user.
"""
from __future__ import annotations

import functools
import json
import logging
import threading
from typing import Any, Callable, Iterable

import redis
from flask import Flask, current_app, request
from flask_socketio import ConnectionRefusedError, Namespace, join_room, leave_room

from trellis import db
from trellis.credentials import decode, identity_from_token
from trellis.errors import APIError, body, bad_request, forbidden, not_found, unauthorized
from trellis.realtime import socketio

from . import service

log = logging.getLogger(__name__)

# The contract names "/chat/"; "/chat" is the spelling most Socket.IO clients produce.
NAMESPACES = ("/chat/", "/chat")
CONTROL_CHANNEL = "trellis:chat:sockets"
EXTENSION = "trellis_chat"


def user_room(user_id: str) -> str:
    return f"user:{user_id}"


def broadcast(event: str, data: dict[str, Any], room_id: str) -> None:
    """Send ``event`` to every socket in the room, in every worker (the Socket.IO queue carries it)."""
    server = socketio()
    for namespace in NAMESPACES:
        server.emit(event, data, to=room_id, namespace=namespace)


def close_room(room_id: str) -> None:
    server = socketio()
    for namespace in NAMESPACES:
        server.close_room(room_id, namespace=namespace)


class UserSockets:
    """Join, leave or disconnect all sockets of some users, whichever worker holds them.

    python-socketio's queue carries emits and per-sid operations, but no worker knows the sids held by
    another. So with Redis every worker subscribes to a control channel and applies each operation to
    its own sockets of those users (found through their ``user:<id>`` room). Without Redis there is a
    single process and the operation is applied at once.
    """

    def __init__(self, app: Flask) -> None:
        self._socketio = app.extensions["socketio"]
        self._url: str | None = app.config.get("REDIS_URL") or None
        self._lock = threading.Lock()
        self._listening = False
        self._publisher: redis.Redis | None = None

    def join(self, user_ids: Iterable[str], room_id: str) -> None:
        self._send({"op": "join", "users": list(user_ids), "room": room_id})

    def leave(self, user_ids: Iterable[str], room_id: str) -> None:
        self._send({"op": "leave", "users": list(user_ids), "room": room_id})

    def disconnect(self, user_id: str) -> None:
        self._send({"op": "disconnect", "users": [user_id]})

    def _send(self, operation: dict[str, Any]) -> None:
        if not operation["users"]:
            return
        if self._url is None:
            self.apply(operation)
            return
        if self._publisher is None:
            self._publisher = redis.Redis.from_url(self._url)
        self._publisher.publish(CONTROL_CHANNEL, json.dumps(operation))

    def apply(self, operation: dict[str, Any]) -> None:
        """Apply an operation to the sockets of this process."""
        server = self._socketio.server
        op, room = operation.get("op"), operation.get("room")
        for namespace in NAMESPACES:
            for user_id in operation.get("users", ()):
                sids = [sid for sid, _ in server.manager.get_participants(namespace, user_room(user_id))]
                for sid in sids:
                    if op == "join":
                        server.enter_room(sid, room, namespace=namespace)
                    elif op == "leave":
                        server.leave_room(sid, room, namespace=namespace)
                    elif op == "disconnect":
                        server.disconnect(sid, namespace=namespace, ignore_queue=True)

    def ensure_listening(self) -> None:
        """Subscribe this worker to the control channel (on its first socket; no-op without Redis).

        The subscription is made before the socket is accepted, so no operation aimed at it is missed.
        """
        if self._url is None or self._listening:
            return
        with self._lock:
            if self._listening:
                return
            pubsub = redis.Redis.from_url(self._url).pubsub(ignore_subscribe_messages=True)
            pubsub.subscribe(CONTROL_CHANNEL)
            self._socketio.start_background_task(self._listen, pubsub)
            self._listening = True

    def _listen(self, pubsub: Any) -> None:
        while True:
            try:
                for item in pubsub.listen():
                    if item.get("type") == "message":
                        self._apply_published(item["data"])
            except redis.RedisError as exc:
                # redis-py resubscribes when the connection comes back; wait instead of spinning.
                log.warning("chat control channel: %s; retrying", exc)
                self._socketio.sleep(1)

    def _apply_published(self, raw: bytes) -> None:
        try:
            self.apply(json.loads(raw))
        except Exception:  # one bad operation must not stop the listener
            log.exception("chat control operation failed")


def user_sockets() -> UserSockets:
    return current_app.extensions[EXTENSION]


def init_app(app: Flask) -> None:
    app.extensions[EXTENSION] = UserSockets(app)


def _error(exc: APIError) -> dict[str, Any]:
    return {"error": body(exc.status, exc.message, exc.errors, exc.name)}


def _event(handler: Callable[..., Any]) -> Callable[..., Any]:
    """An event handler: errors go back in the acknowledgement, and the DB session ends with the event.

    Flask-SocketIO runs each event in a fresh app context whose teardown removes the session, but the
    removal here does not depend on how the async mode manages contexts.
    """

    @functools.wraps(handler)
    def wrapper(self: ChatNamespace, *args: Any) -> Any:
        try:
            return handler(self, *args)
        except APIError as exc:
            return _error(exc)
        except Exception:
            log.exception("chat socket event %s failed", handler.__name__)
            return _error(APIError(500, "Internal server error"))
        finally:
            db.session.remove()

    return wrapper


def _room_arg(args: tuple[Any, ...]) -> str:
    room_id = args[0] if args else None
    if isinstance(room_id, dict):
        room_id = room_id.get("roomId")
    if not isinstance(room_id, str) or not room_id:
        raise bad_request("roomId must be a non-empty string", {"roomId": ["Must be a non-empty string."]})
    return room_id


class ChatNamespace(Namespace):
    """Events in: ``join(roomId)``, ``leave(roomId)``, ``message(roomId, text)``; each acknowledges with
    a result or ``{"error": {name, status, message}}``. Events out: ``message`` (the stored message),
    ``messageDeleted`` and ``roomDeleted`` (``{_id, …}``)."""

    def on_connect(self, auth: Any = None) -> None:
        try:
            self._accept(auth)
        except APIError as exc:
            raise ConnectionRefusedError(exc.message, body(exc.status, exc.message, name=exc.name)) from None
        finally:
            db.session.remove()

    def _accept(self, auth: Any) -> None:
        token = auth.get("token") if isinstance(auth, dict) else None
        if not isinstance(token, str) or not token:
            raise unauthorized("Connect with auth {token: <user access token>}")
        claims = decode(token)
        if claims.get("kind") != "user" or not isinstance(claims.get("sub"), str):
            raise forbidden("Chat sockets need a user token")
        if not service.config()["active"]:
            raise not_found("The chat module is not active")
        user_sockets().ensure_listening()
        # Before the check below: a block announced from now on already finds this socket.
        join_room(user_room(claims["sub"]))
        identity = identity_from_token(token)  # blocked user → 403, ended session → 401
        for room_id in service.room_ids_of(identity.id):
            join_room(room_id)
        self.socketio.server.save_session(request.sid, {"user": identity.id, "token": token}, namespace=self.namespace)

    def _user(self) -> str:
        """The socket's user, re-checked: a session ended or a user blocked since connecting is refused."""
        state = self.socketio.server.get_session(request.sid, namespace=self.namespace)
        return identity_from_token(state["token"]).id

    @_event
    def on_join(self, *args: Any) -> dict[str, Any]:
        room_id = _room_arg(args)
        if not service.is_participant(self._user(), room_id):
            raise not_found("No chat room with this id")
        join_room(room_id)
        return {"roomId": room_id, "joined": True}

    @_event
    def on_leave(self, *args: Any) -> dict[str, Any]:
        room_id = _room_arg(args)
        state = self.socketio.server.get_session(request.sid, namespace=self.namespace)
        if room_id in (user_room(state["user"]), request.sid):
            raise bad_request("Only chat rooms can be left")
        leave_room(room_id)
        return {"roomId": room_id, "left": True}

    @_event
    def on_message(self, *args: Any) -> dict[str, Any]:
        if len(args) == 1 and isinstance(args[0], dict):  # also accept one {roomId, message} object
            room_id, text = args[0].get("roomId"), args[0].get("message")
        else:
            room_id, text = (list(args) + [None, None])[:2]
        stored = service.send_message(self._user(), room_id, text)
        broadcast("message", stored, stored["room"])
        return stored


def namespace_factories() -> tuple[Callable[[], ChatNamespace], ...]:
    return tuple(functools.partial(ChatNamespace, namespace) for namespace in NAMESPACES)
