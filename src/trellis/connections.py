"""Every live connection of a user, in one registry per process: Socket.IO sockets of any namespace and
SSE streams register under their user id; ending the user (blocked, deleted, their sessions ended) closes
them all.

It travels one way. The module that blocks and deletes users (Authentication) calls :func:`end_user` after
its commit and tells the registry which of its recorded events end a user (:func:`end_users_on`). The
modules that hold connections (Chat, Database) only :func:`register` and :func:`unregister` them; none of
them listens for blocks or deletes.

Reach: :func:`end_user` closes this process's connections of the user and, with Redis, the user's Socket.IO
sockets in every worker: each socket is also registered under its user in a Redis set
(``trellis:connections:<userId>``, members ``namespace sid``) and disconnected through python-socketio's
queue-aware ``disconnect``, which travels on the Socket.IO channel to the worker that holds it (the same
set finds a user's sockets for room changes, :meth:`Connections.sockets_of`). The ending events reach
every process through the event log (Redis or the table, ``trellis.events``): each closes its own
connections, SSE streams included. Entries of the set are removed when their socket disconnects; they
have no expiry (a socket may stay open for weeks), and one left by a crashed worker costs a no-op.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Iterable
from typing import Any

import redis
from flask import Flask, current_app

from . import events
from .shared_redis import redis_client

log = logging.getLogger(__name__)

EXTENSION = "trellis_connections"


class Connections:
    """This process's live connections by user: ``user id → {owner: close()}``."""

    def __init__(self, app: Flask) -> None:
        self._app = app
        self._lock = threading.Lock()
        self._users: dict[str, dict[str, Callable[[], None]]] = {}
        self._ending: list[tuple[str, Callable[[events.Event], str | None]]] = []
        self._unsubscribe: list[Callable[[], None]] | None = None
        self._redis: redis.Redis | None = redis_client(app)  # the app's shared client; connects on first use

    def end_users_on(self, pattern: str, user_of: Callable[[events.Event], str | None]) -> None:
        """Events matching ``pattern`` end the connections of ``user_of(event)`` in every process."""
        self._ending.append((pattern, user_of))

    def register(self, user_id: str, owner: str, close: Callable[[], None]) -> None:
        """``owner`` (a stream; unique in the process) belongs to ``user_id``: ending the user calls ``close``,
        which may run the connection's own clean-up (and so :meth:`unregister`)."""
        self._listen()
        with self._lock:
            self._users.setdefault(user_id, {})[owner] = close

    def register_socket(self, user_id: str, namespace: str, sid: str, close: Callable[[], None]) -> None:
        """A Socket.IO socket of ``user_id`` in this worker (any namespace), found by every worker."""
        self._redis_call("sadd", user_id, _member(namespace, sid))
        self.register(user_id, _member(namespace, sid), close)

    def unregister(self, user_id: str, owner: str) -> None:
        with self._lock:
            owners = self._users.get(user_id)
            if owners is not None:
                owners.pop(owner, None)
                if not owners:
                    del self._users[user_id]

    def unregister_socket(self, user_id: str, namespace: str, sid: str) -> None:
        self._redis_call("srem", user_id, _member(namespace, sid))
        self.unregister(user_id, _member(namespace, sid))

    def sockets_of(self, user_ids: Iterable[str]) -> list[tuple[str, str]] | None:
        """(namespace, sid) of every socket of these users in every worker (one Redis round trip); None
        without Redis, or when Redis fails (then only this worker's sockets can be reached anyway)."""
        ids = list(user_ids)
        if self._redis is None or not ids:
            return None if self._redis is None else []
        pipe = self._redis.pipeline(transaction=False)
        for user_id in ids:
            pipe.smembers(_key(user_id))
        try:
            found = [raw.decode().split(" ", 1) for members in pipe.execute() for raw in members]
        except redis.RedisError as exc:
            log.warning("live connection registry unavailable (%s); this worker's sockets only", exc.__class__.__name__)
            return None
        return [(namespace, sid) for namespace, sid in found]

    def end_user(self, user_id: str) -> int:
        """Close the connections of ``user_id``: this process's, and with Redis the sockets every worker
        holds; how many this process had."""
        owners = self._end_here(user_id)
        elsewhere = [(ns, sid) for ns, sid in self.sockets_of([user_id]) or () if _member(ns, sid) not in owners]
        if elsewhere:
            server = self._app.extensions["socketio"].server
            for namespace, sid in elsewhere:
                server.disconnect(sid, namespace=namespace)  # through the queue, to the worker that holds it
        return len(owners)

    def _end_here(self, user_id: str) -> list[str]:
        """Close this process's connections of ``user_id``; their owners."""
        with self._lock:
            owners = self._users.pop(user_id, {})
        for close in owners.values():  # outside the lock: a close runs the connection's disconnect handler
            try:
                close()
            except Exception:
                log.exception("closing a live connection of user %s failed", user_id)
        return list(owners)

    def _redis_call(self, command: str, user_id: str, member: str) -> None:
        if self._redis is None:
            return
        try:
            getattr(self._redis, command)(_key(user_id), member)
        except redis.RedisError as exc:  # this worker still finds its own; a stale entry costs a no-op
            log.warning("live connection registry unavailable (%s)", exc.__class__.__name__)

    def _listen(self) -> None:
        """Hear the ending events once this process holds a connection (an app without any runs no thread)."""
        if self._unsubscribe is not None or not self._ending:
            return
        with self._lock:
            if self._unsubscribe is not None:
                return
            self._unsubscribe = []
        with self._app.app_context():
            self._unsubscribe = [
                events.subscribe(pattern, functools.partial(self._on_event, user_of))
                for pattern, user_of in self._ending
            ]

    def _on_event(self, user_of: Callable[[events.Event], str | None], event: events.Event) -> None:
        user_id = user_of(event)
        if user_id is not None:
            # Every process hears the event and closes its own. Not on the log's delivery thread: closing a
            # socket runs its disconnect handler, which must not wait on the delivery that is calling us.
            threading.Thread(target=self._end_here, args=(user_id,), daemon=True, name="trellis-end-user").start()


def _key(user_id: str) -> str:
    return f"trellis:connections:{user_id}"


def _member(namespace: str, sid: str) -> str:
    return f"{namespace} {sid}"


def init_app(app: Flask) -> None:
    app.extensions[EXTENSION] = Connections(app)


def of(app: Any = None) -> Connections:
    """The registry of ``app`` (default: the current app)."""
    return (app or current_app).extensions[EXTENSION]


def register(user_id: str, owner: str, close: Callable[[], None]) -> None:
    of().register(user_id, owner, close)


def unregister(user_id: str, owner: str) -> None:
    of().unregister(user_id, owner)


def end_user(user_id: str) -> int:
    """Close this process's connections of ``user_id`` now (call it after the commit that ended the user)."""
    return of().end_user(user_id)


def end_users_on(app: Flask, pattern: str, user_of: Callable[[events.Event], str | None]) -> None:
    """Declare that the events matching ``pattern`` end ``user_of(event)``'s connections in every process."""
    of(app).end_users_on(pattern, user_of)
