"""The Chat module's Socket.IO side: the ``/chat/`` (and ``/chat``) namespace, fan-out of room
events, and operations on all sockets of a user in every worker.

Socket rooms: each chat room is a Socket.IO room named by the room id; each socket is also in
``user:<id>``. Each socket is also registered under its user with the core (see ``UserSockets``).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterable
from typing import Any

from flask import Flask, current_app
from flask_socketio import ConnectionRefusedError, Namespace, join_room, leave_room

from trellis import connections, db
from trellis.credentials import decode, user_from_token
from trellis.errors import APIError, bad_request, body, forbidden, not_found, unauthorized
from trellis.realtime import socket_event, socket_id, socketio

from . import service

log = logging.getLogger(__name__)

# The contract names "/chat/"; "/chat" is the spelling most Socket.IO clients produce.
NAMESPACES = ("/chat/", "/chat")
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
    """Join or leave all sockets of some users to a room, whichever worker holds them.

    A worker only knows its own sockets. Every socket is registered under its user with the core's
    registry of live connections (``trellis.connections``), which with Redis finds a user's sockets in every
    worker and ends them when the user is blocked or deleted. Joining and leaving go through python-socketio's
    own queue-aware ``enter_room`` / ``leave_room``: they travel on the same Redis channel as the emits, so a
    user added to a room gets the next message and one who left does not. Without Redis there is one process
    and the sockets are found through their ``user:<id>`` room.
    """

    def __init__(self, app: Flask) -> None:
        self._socketio = app.extensions["socketio"]
        self._connections = connections.of(app)
        self._owners: dict[tuple[str, str], str] = {}  # (namespace, sid) → user id, sockets of this worker

    def register(self, user_id: str, namespace: str, sid: str) -> None:
        """Called while a socket connects, before its user is checked (so a block from now on finds it)."""
        server = self._socketio.server
        self._connections.register_socket(
            user_id, namespace, sid, lambda: server.disconnect(sid, namespace=namespace, ignore_queue=True)
        )
        self._owners[(namespace, sid)] = user_id
        join_room(user_room(user_id), sid=sid, namespace=namespace)

    def unregister(self, namespace: str, sid: str) -> None:
        user_id = self._owners.pop((namespace, sid), None)
        if user_id is not None:
            self._connections.unregister_socket(user_id, namespace, sid)

    def sockets_of(self, user_ids: Iterable[str]) -> list[tuple[str, str]]:
        """(namespace, sid) of every chat socket of these users, in every worker."""
        ids = list(user_ids)
        found = self._connections.sockets_of(ids)
        if found is not None:
            return [(namespace, sid) for namespace, sid in found if namespace in NAMESPACES]
        manager = self._socketio.server.manager
        return [
            (namespace, sid)
            for user_id in ids
            for namespace in NAMESPACES
            for sid, _ in manager.get_participants(namespace, user_room(user_id))
        ]

    def join(self, user_ids: Iterable[str], room_id: str) -> None:
        server = self._socketio.server
        for namespace, sid in self.sockets_of(user_ids):
            server.enter_room(sid, room_id, namespace=namespace)

    def leave(self, user_ids: Iterable[str], room_id: str) -> None:
        server = self._socketio.server
        for namespace, sid in self.sockets_of(user_ids):
            server.leave_room(sid, room_id, namespace=namespace)


def user_sockets() -> UserSockets:
    return current_app.extensions[EXTENSION]


def init_app(app: Flask) -> None:
    app.extensions[EXTENSION] = UserSockets(app)


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
        except Exception as exc:
            user_sockets().unregister(self.namespace, socket_id())
            if not isinstance(exc, APIError):
                log.exception("chat socket connect failed")
                exc = APIError(500, "Internal server error")
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
        # Before the check below: a block announced from now on already finds this socket.
        user_sockets().register(claims["sub"], self.namespace, socket_id())
        identity = user_from_token(token)  # blocked user → 403, ended session → 401
        for room_id in service.room_ids_of(identity.id):
            join_room(room_id)
        self.socketio.server.save_session(socket_id(), {"user": identity.id, "token": token}, namespace=self.namespace)

    def on_disconnect(self, reason: Any = None) -> None:
        user_sockets().unregister(self.namespace, socket_id())

    def _user(self) -> str:
        """The socket's user, re-checked: a session ended or a user blocked since connecting is refused."""
        state = self.socketio.server.get_session(socket_id(), namespace=self.namespace)
        return user_from_token(state["token"]).id

    @socket_event
    def on_join(self, *args: Any) -> dict[str, Any]:
        room_id = _room_arg(args)
        if not service.is_participant(self._user(), room_id):
            raise not_found("No chat room with this id")
        join_room(room_id)
        return {"roomId": room_id, "joined": True}

    @socket_event
    def on_leave(self, *args: Any) -> dict[str, Any]:
        room_id = _room_arg(args)
        state = self.socketio.server.get_session(socket_id(), namespace=self.namespace)
        if room_id in (user_room(state["user"]), socket_id()):
            raise bad_request("Only chat rooms can be left")
        leave_room(room_id)
        return {"roomId": room_id, "left": True}

    @socket_event
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
