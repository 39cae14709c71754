"""Socket.IO on the same port as REST, path ``/realtime``; Redis queue across workers when configured."""
from __future__ import annotations

from typing import Any

from flask import Flask, current_app
from flask_socketio import SocketIO

from .cors import allowed_origins

SOCKET_PATH = "realtime"


def init_socketio(app: Flask) -> SocketIO:
    socketio = SocketIO(
        app,
        path=SOCKET_PATH,
        async_mode=app.config["ASYNC_MODE"],
        message_queue=app.config.get("REDIS_URL") or None,
        cors_allowed_origins=allowed_origins(app),
        logger=False,
        engineio_logger=False,
    )
    return socketio


def socketio() -> SocketIO:
    """The current app's Socket.IO server (to emit from REST routes)."""
    return current_app.extensions["socketio"]


def emit(event: str, data: Any, *, to: str | None = None, namespace: str = "/") -> None:
    socketio().emit(event, data, to=to, namespace=namespace)
