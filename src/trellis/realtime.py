"""Socket.IO on the same port as REST, path ``/realtime``; Redis queue across workers when configured."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterator
from typing import Any, cast

import redis
import socketio as python_socketio
from flask import Flask, current_app, request
from flask_socketio import SocketIO
from werkzeug.middleware.proxy_fix import ProxyFix

from . import background, db, reads
from .cors import allowed_origins
from .errors import UNAVAILABLE_MESSAGE, APIError, database_unavailable
from .errors import body as error_body
from .server.socket_fanout import FanOutManager, install_websocket
from .shared_redis import make_pool, redis_options

SOCKET_PATH = "realtime"
LISTEN_RETRY_SECONDS = 1.0

log = logging.getLogger(__name__)


class _RedisQueue(python_socketio.RedisManager, FanOutManager):
    """The Socket.IO message queue on Redis, with the app's Redis fault handling.

    This worker's share of each emit is delivered by ``FanOutManager`` (before python-socketio's
    ``Manager`` in the method order): one frame per emit for every socket of the room.

    Publishing goes through a pool with the short timeouts and circuit breaker of ``shared_redis`` (an
    emit from a REST route while Redis hangs costs microseconds, not a hung request); the listener
    waits for messages by design, so its connection has a connect timeout but no read timeout.
    """

    def __init__(self, app: Flask, url: str) -> None:
        super().__init__(url, channel="flask-socketio")
        self._app = app
        self._warn_listen = background.ThrottledWarning(log)

    def _redis_connect(self) -> None:
        self.redis = redis.Redis(connection_pool=make_pool(self._app, self.redis_url))
        self.connected = True

    def _redis_listen_with_retries(self) -> Iterator[Any]:
        # python-socketio doubles its listener's retry delay up to 60 s: after a long Redis outage events
        # would stop crossing processes for up to a minute after Redis is back.
        return background.RedisListener(
            self.redis_url,
            self.channel,
            "Socket.IO queue",
            self._warn_listen,
            connect_timeout=redis_options(self._app)["socket_connect_timeout"],
            retry_seconds=LISTEN_RETRY_SECONDS,
        ).messages()

    def _publish(self, data: Any) -> Any:
        try:
            if not self.connected:
                self._redis_connect()
            return self.redis.publish(self.channel, self.json.dumps(data))
        except redis.RedisError:
            return None  # the breaker has logged it (once a minute); the emit is lost, as with any outage


def init_socketio(app: Flask) -> SocketIO:
    url = app.config.get("REDIS_URL") or None
    socketio = SocketIO(
        app,
        path=SOCKET_PATH,
        async_mode=app.config["ASYNC_MODE"],
        client_manager=_RedisQueue(app, url) if url else FanOutManager(),
        cors_allowed_origins=socket_origins(app),
        logger=False,
        engineio_logger=False,
    )
    install_websocket(socketio.server)
    return socketio


def socket_origins(app: Flask) -> str | Callable[[str | None, dict[str, Any]], bool]:
    """Socket.IO's origin check: ``"*"``, or the ``TRELLIS_CORS_ORIGINS`` list and always the server's own
    origin. Engine.IO checks the ``Origin`` of every request against the list it is given, the server's
    own included: python-socketio's client sends its server URL as ``Origin`` on the websocket upgrade, a
    page served by this server sends its own, and neither is a cross-origin request."""
    origins = allowed_origins(app)
    if origins == "*":
        return "*"
    listed = frozenset(origins)
    proxies = int(app.config.get("PROXY_COUNT") or 0)
    # Engine.IO sees the environ before the app's ProxyFix: read the forwarded address the same way.
    forwarded = ProxyFix(_environ_of, x_proto=proxies, x_host=proxies, x_port=proxies) if proxies else None

    def allowed(origin: str | None, environ: dict[str, Any]) -> bool:
        if origin is None:
            return False
        if origin in listed:
            return True
        seen = environ
        if forwarded is not None:  # its app, _environ_of, answers with the environ it rewrote
            seen = cast("dict[str, Any]", forwarded(dict(environ), _no_response))
        host = seen.get("HTTP_HOST")
        if not host:
            return False
        return origin.lower() == own_origin(seen.get("wsgi.url_scheme", "http"), host)

    return allowed


def own_origin(scheme: str, host: str) -> str:
    """``scheme://host`` as a browser writes an origin: lower case, without the scheme's default port."""
    scheme, host = scheme.lower(), host.lower()
    default = {"http": ":80", "https": ":443"}.get(scheme)
    if default and host.endswith(default):
        host = host[: -len(default)]
    return f"{scheme}://{host}"


def _environ_of(environ: dict[str, Any], start_response: Any) -> Any:
    return environ


def _no_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Callable[[bytes], object]:
    raise AssertionError("_environ_of starts no response")


def socketio() -> SocketIO:
    """The current app's Socket.IO server (to emit from REST routes)."""
    return current_app.extensions["socketio"]


def socket_id() -> str:
    """The Socket.IO session id of the socket whose event (or connect) is being handled."""
    return request.sid  # type: ignore[attr-defined]  # Flask-SocketIO sets it on a socket event's request


def emit(event: str, data: Any, *, to: str | None = None, namespace: str = "/") -> None:
    socketio().emit(event, data, to=to, namespace=namespace)


def error_ack(exc: APIError) -> dict[str, Any]:
    """An error as a Socket.IO acknowledgement: ``{"error": {name, status, message[, errors]}}``."""
    return {"error": error_body(exc.status, exc.message, exc.errors, exc.name)}


def socket_event(handler: Callable[..., Any]) -> Callable[..., Any]:
    """Decorate a ``Namespace`` event handler: errors go back in the acknowledgement (never a dropped
    connection or a traceback), and the database session and read connection end with the event (Flask-SocketIO's
    app context teardown does too, but this does not depend on how the async mode manages contexts)."""

    @functools.wraps(handler)
    def wrapper(namespace: Any, *args: Any) -> Any:
        try:
            return handler(namespace, *args)
        except APIError as exc:
            return error_ack(exc)
        except Exception as exc:
            if database_unavailable(exc):  # no free connection, a restart: the client may retry
                log.warning("socket event %s answered 503: %s", handler.__name__, exc.__class__.__name__)
                return error_ack(APIError(503, UNAVAILABLE_MESSAGE))
            log.exception("socket event %s.%s failed", type(namespace).__name__, handler.__name__)
            return error_ack(APIError(500, "Internal server error"))
        finally:
            db.session.remove()
            reads.release()

    return wrapper
