"""The library internals the server wing (``trellis.server``) and ``trellis.statements`` rely on.

Each module names the library releases it was checked against (``CHECKED``). These tests fail when an
installed library is of another minor release (or older), and when an internal a module overrides,
calls or reads is gone or has changed: the attribute, its signature, or the behaviour relied on. The
modules' own tests (test_serve, test_http_protocol, test_socket_fanout, …) run them on real servers.
"""

from __future__ import annotations

import importlib.metadata
import inspect
import io
import re
import sqlite3
import sys
import warnings
from types import ModuleType

import pytest

from trellis import statements

with warnings.catch_warnings():  # eventlet announces its deprecation on first import
    warnings.filterwarnings("ignore", r"\s*Eventlet is deprecated")
    from trellis.server import (
        formbody,
        http_protocol,
        safety,
        serve,
        socket_fanout,
        socket_pings,
        socket_writer,
        token_reader,
        upgraded,
    )

MODULES = [
    serve,
    http_protocol,
    safety,
    socket_fanout,
    socket_pings,
    socket_writer,
    token_reader,
    formbody,
    upgraded,
    statements,
]


def _release(version: str) -> tuple[int, ...]:
    """``3.1.9`` → (3, 1, 9); a pre-release or local tail (``3.2.0rc1``) is ignored."""
    match = re.match(r"\d+(\.\d+)*", version)
    assert match, version
    return tuple(int(part) for part in match.group().split("."))


def _parameters(function: object) -> list[str]:
    return list(inspect.signature(function).parameters)  # type: ignore[arg-type]


def _names(function: object) -> tuple[str, ...]:
    """The global and attribute names a function's code reads (what it calls or looks up)."""
    return function.__code__.co_names  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("module", "library"),
    [(module, library) for module in MODULES for library in module.CHECKED],
    ids=lambda value: value.__name__.rpartition(".")[2] if isinstance(value, ModuleType) else value,
)
def test_the_installed_release_is_the_one_checked(module, library):
    checked = module.CHECKED[library]
    assert checked in (module.__doc__ or ""), f"{module.__name__}'s docstring does not name {library} {checked}"
    installed = _release(importlib.metadata.version(library))
    assert installed[:2] == _release(checked)[:2] and installed >= _release(checked), (
        f"{library} {importlib.metadata.version(library)} is installed; {module.__name__} was checked against "
        f"{checked}: check the internals its docstring lists, then move CHECKED and the docstring"
    )


def test_eventlet_server_takes_the_arguments_serve_passes():
    import eventlet
    import eventlet.wsgi

    assert "reuse_port" in _parameters(eventlet.listen)
    passed = {"protocol", "custom_pool", "log_output", *safety.eventlet_server_options()}
    assert passed <= set(_parameters(eventlet.wsgi.server))


def test_eventlet_reads_the_414_answer_at_each_request():
    """``safety`` replaces the module global: it must be looked up when a request line is too long."""
    import eventlet.wsgi

    assert isinstance(eventlet.wsgi.RESPONSE_414, bytes)
    assert "RESPONSE_414" in _names(eventlet.wsgi.HttpProtocol.handle_one_request)


def test_eventlet_protocol_calls_what_fast_http_protocol_overrides():
    import eventlet.wsgi

    base = eventlet.wsgi.HttpProtocol
    assert issubclass(http_protocol.FastHttpProtocol, base)
    # handle_one_request reads the line with _read_request_line, then parses the head with parse_request
    # while rfile is eventlet's FileObjectForHeaders (its limits raise the errors answered 431).
    steps = _names(base.handle_one_request)
    assert {"_read_request_line", "parse_request", "FileObjectForHeaders", "url_length_limit"} <= set(steps)
    assert _parameters(base._read_request_line) == ["self"]
    assert "handle" in vars(base)
    # get_environ builds the WSGI headers from headers._headers (what Headers keeps).
    assert "_headers" in _names(base.get_environ)
    for name in ("BROKEN_SOCK", "BAD_SOCK", "MAX_HEADER_LINE", "MAX_TOTAL_HEADER_SIZE"):
        assert hasattr(eventlet.wsgi, name), name


def test_eventlet_header_reader_raises_the_errors_answered_431():
    import eventlet.wsgi

    long_line = io.BytesIO(b"X-Long: " + b"a" * eventlet.wsgi.MAX_HEADER_LINE + b"\r\n\r\n")
    with pytest.raises(eventlet.wsgi.HeaderLineTooLong):
        eventlet.wsgi.FileObjectForHeaders(long_line).readline()
    line = b"X-Many: " + b"a" * 1000 + b"\r\n"
    block = eventlet.wsgi.FileObjectForHeaders(
        io.BytesIO(line * (eventlet.wsgi.MAX_TOTAL_HEADER_SIZE // len(line) + 2))
    )
    with pytest.raises(eventlet.wsgi.HeadersTooLarge):
        while block.readline():
            pass


def test_eventlet_websocket_calls_set_idle_after_its_handshake_and_reads_the_socket_itself():
    """``upgraded``: the hook the protocol answers, and files nothing reads once the connection is upgraded."""
    import eventlet.websocket
    import eventlet.wsgi

    call = eventlet.websocket.WebSocketWSGI.__call__
    assert "eventlet.set_idle" in call.__code__.co_consts
    assert "eventlet.set_idle" in eventlet.wsgi.HttpProtocol.get_environ.__code__.co_consts
    source = inspect.getsource(call)
    assert source.index("_handle_hybi_request") < source.index("eventlet.set_idle") < source.index("self.handler(ws)")
    assert "makefile" in _names(eventlet.wsgi.HttpProtocol.setup)
    for method in (eventlet.websocket.WebSocket.wait, eventlet.websocket.RFC6455WebSocket._recv_frame):
        assert "rfile" not in _names(method) and "recv" in _names(method)


def test_reinitialising_a_buffered_file_frees_its_buffer_and_keeps_it_working():
    """``upgraded`` shrinks the buffers of live files with ``__init__`` (CPython's ``_io``)."""
    import socket

    left, right = socket.socketpair()
    with left, right:
        writer, reader = left.makefile("wb", 16 << 10), right.makefile("rb", -1)
        big = sys.getsizeof(writer), sys.getsizeof(reader)
        writer.__init__(writer.raw, upgraded.UPGRADED_BUFFER_BYTES)
        reader.__init__(reader.raw, upgraded.UPGRADED_BUFFER_BYTES)
        assert sys.getsizeof(writer) < big[0] - (16 << 10) + 64 and sys.getsizeof(reader) < big[1] - 8000
        writer.write(b"still writes")
        writer.flush()
        assert reader.read(12) == b"still writes"
        writer.close()
        reader.close()


def test_eventlet_pool_and_threads_as_the_connection_guard_uses_them():
    import eventlet
    import eventlet.greenthread
    from eventlet.support import get_errno

    guard = http_protocol.ConnectionGuard(10, 10, 2)
    assert guard.pool.free() == 2
    assert _parameters(eventlet.greenthread.kill)[:2] == ["g", "throw_args"]
    assert get_errno(OSError(32, "Broken pipe")) == 32


def test_engineio_builds_websockets_from_its_driver_table_with_a_bound_handler():
    import engineio.socket
    import socketio

    server = socketio.Server(async_mode="eventlet")
    websocket = server.eio._async["websocket"]
    assert _parameters(websocket.__init__) == ["self", "handler", "server"]
    assert hasattr(websocket, "_negotiate_permessage_deflate")
    upgrade = _names(engineio.socket.Socket._upgrade_websocket)
    assert {"_async", "_websocket_handler"} <= set(upgrade)
    socket_fanout.install_websocket(server)
    assert issubclass(server.eio._async["websocket"], websocket)


def test_engineio_pings_through_a_background_task_that_sleeps_then_sends():
    """``socket_pings`` replaces the task ``schedule_ping`` starts with a timer doing what follows its sleep."""
    import engineio.socket

    socket = engineio.socket.Socket
    schedule = inspect.getsource(socket.schedule_ping)
    assert "self.server.start_background_task(self._send_ping)" in schedule
    assert "= self.server.start_background_task" not in schedule  # what it returns is not kept
    assert _parameters(socket._send_ping) == ["self"]
    send_ping = _names(socket._send_ping)
    assert {"sleep", "ping_interval", "closing", "closed", "last_ping", "send", "PING"} <= set(send_ping)
    assert {"check_ping_timeout", "queue", "put"} <= set(_names(socket.send))
    assert socket_pings._SEND_PING is socket._send_ping


def test_engineio_websocket_handler_starts_a_writer_and_joins_it_once_the_client_is_gone():
    """``socket_writer`` recognises the library's writer by name, takes its socket and websocket from its free
    variables and answers ``join``; the writer it replaces polls the queue and closes the websocket."""
    import engineio.socket
    import eventlet.queue
    import socketio

    handler = engineio.socket.Socket._websocket_handler
    writer = next(c for c in handler.__code__.co_consts if inspect.iscode(c) and c.co_name == "writer")
    assert f"{writer.co_qualname}" == socket_writer.WRITER
    assert set(writer.co_freevars) == {"self", "ws"}
    assert {"poll", "QueueEmpty", "send", "encode", "close"} <= set(writer.co_names)
    source = inspect.getsource(handler)
    assert "writer_task = self.server.start_background_task(writer)" in source
    assert source.index("self.queue.put(None)") < source.index("writer_task.join()")
    poll = engineio.socket.Socket.poll
    assert {"get", "task_done", "ping_interval", "ping_timeout"} <= set(_names(poll))
    server = socketio.Server(async_mode="eventlet")
    assert server.eio._async["queue"] is eventlet.queue.Queue
    assert server.eio.get_queue_empty_exception() is eventlet.queue.Empty
    assert "_async" in _names(server.eio.create_queue.__func__)


def test_engineio_socket_has_what_write_now_reads():
    import engineio.socket
    import socketio

    server = socketio.Server(async_mode="eventlet")
    eio_socket = engineio.socket.Socket(server.eio, "sid")
    for name in ("closed", "closing", "upgrading", "upgraded", "sid", "server"):
        assert hasattr(eio_socket, name), name
    assert eio_socket.queue.qsize() == 0
    assert _parameters(eio_socket.check_ping_timeout) == []
    assert _parameters(server.eio.start_background_task)[:1] == ["target"]
    assert isinstance(server.eio.sockets, dict)


def test_socketio_manager_and_server_as_the_fanout_calls_them():
    import socketio
    from engineio import packet as eio_packet
    from socketio import packet as sio_packet

    assert _parameters(socketio.Manager.emit) == [
        "self", "event", "data", "namespace", "room", "skip_sid", "callback", "to", "kwargs"
    ]  # fmt: skip
    assert _parameters(socketio.Manager.get_participants) == ["self", "namespace", "room"]
    assert _parameters(socketio.Server._send_eio_packet) == ["self", "eio_sid", "eio_pkt"]
    assert _parameters(socketio.Manager.eio_sid_from_sid) == ["self", "sid", "namespace"]  # send_encoded
    server = socketio.Server(async_mode="eventlet")
    sid = server.manager.connect("eio-sid", "/database/")
    assert server.manager.eio_sid_from_sid(sid, "/database/") == "eio-sid"
    assert server.manager.eio_sid_from_sid("gone", "/database/") is None
    encoded = server.packet_class(sio_packet.EVENT, namespace="/", data=["message", "hi"]).encode()
    assert encoded == '2["message","hi"]'
    assert eio_packet.Packet(eio_packet.MESSAGE, encoded).encode() == '42["message","hi"]'


@pytest.mark.parametrize("message", ["hi", "é" * 100, "x" * 70_000, b"\x00\x01", bytes(300)])
def test_eventlet_websocket_frames_are_the_fanout_frames_and_sends_take_its_lock(message):
    from eventlet.websocket import RFC6455WebSocket

    connection = RFC6455WebSocket(io.BytesIO(), {}, version=13)
    assert connection._pack_message(message) == socket_fanout.websocket_frame(message)
    assert not connection.websocket_closed and connection.extensions == {}
    assert not connection._sendlock.locked() and connection._sendlock.balance == 1  # free, nobody waiting
    assert "_sendlock" in _names(RFC6455WebSocket._send)


def test_redis_client_exposes_the_settings_the_token_reader_copies():
    import redis

    client = redis.Redis(
        host="127.0.0.1", port=6380, db=3, username="u", password="p", socket_timeout=1.5, socket_connect_timeout=2
    )
    options = client.connection_pool.connection_kwargs
    expected = {"host": "127.0.0.1", "port": 6380, "db": 3, "username": "u", "password": "p", "socket_timeout": 1.5}
    assert expected.items() <= options.items() and options["socket_connect_timeout"] == 2
    assert client.connection_pool.connection_class.__name__ == token_reader._PLAIN
    for other in (redis.Redis(unix_socket_path="/tmp/redis.sock"), redis.Redis(ssl=True)):
        assert other.connection_pool.connection_class.__name__ != token_reader._PLAIN


def _multipart(fields: dict[str, str]) -> tuple[bytes, dict[str, str]]:
    parts = [
        f'--b\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n' for name, value in fields.items()
    ]
    return ("".join(parts) + "--b--\r\n").encode(), {"boundary": "b"}


def test_werkzeug_form_refusals_come_from_where_formbody_tells_them_apart():
    from werkzeug.exceptions import RequestEntityTooLarge
    from werkzeug.formparser import FormDataParser

    assert _parameters(FormDataParser.parse) == ["self", "stream", "mimetype", "content_length", "options"]
    parser = FormDataParser(max_form_parts=2, max_form_memory_size=1000)
    assert (parser.max_form_parts, parser.max_form_memory_size) == (2, 1000)

    body, options = _multipart({"a": "1", "b": "2", "c": "3"})
    with pytest.raises(RequestEntityTooLarge) as parts:
        parser.parse(io.BytesIO(body), "multipart/form-data", len(body), options)
    assert formbody._raised_in(parts.value, "next_event")

    body, options = _multipart({"a": "x" * 5000})
    with pytest.raises(RequestEntityTooLarge) as field:
        parser.parse(io.BytesIO(body), "multipart/form-data", len(body), options)
    assert not formbody._raised_in(field.value, "next_event")


def test_sqlalchemy_pool_invalidation_recycles_every_older_connection():
    """``statements.execute_compiled`` calls ``Pool._invalidate`` as SQLAlchemy's Connection does on a
    disconnect: the given connection is invalidated, and one checked in before is replaced at checkout."""
    from sqlalchemy.engine import Connection
    from sqlalchemy.pool import QueuePool

    assert _parameters(QueuePool._invalidate) == ["self", "connection", "exception", "_checkin"]
    assert "_invalidate" in _names(Connection._handle_dbapi_exception)  # still SQLAlchemy's own way
    pool = QueuePool(lambda: sqlite3.connect(":memory:", check_same_thread=False), pool_size=2)
    dead, older = pool.connect(), pool.connect()
    older_raw = older.dbapi_connection
    older.close()  # back in the pool, opened before the invalidation
    pool._invalidate(dead, ConnectionError("gone"))
    assert not dead.is_valid
    fresh = pool.connect()
    assert fresh.dbapi_connection is not older_raw
    fresh.close()
    pool.dispose()
