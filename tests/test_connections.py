"""The core's registry of a user's live connections (``trellis.connections``): ending a user closes every
connection registered under them, at once in this process and, on a declared event, in every process."""

from __future__ import annotations

import threading

from trellis import EventTopic, Module, connections, create_app, db, events

ACCOUNTS = Module("accounts", events=(EventTopic("accounts.user.block", "A user was blocked"),))


def test_ending_a_user_closes_each_of_their_connections_once(app_config, caplog):
    app = create_app(app_config, modules=[])
    closed: list[str] = []
    registry = connections.of(app)
    registry.register("u1", "sse 1", lambda: closed.append("stream"))
    registry.register("u1", "/chat/ s1", lambda: 1 / 0)  # a failing close does not stop the others
    registry.register("u1", "/database/ s2", lambda: closed.append("socket"))
    registry.register("u2", "sse 2", lambda: closed.append("other user"))
    registry.register("u1", "sse 3", lambda: closed.append("gone"))
    registry.unregister("u1", "sse 3")  # went away by itself

    assert registry.end_user("u1") == 3
    assert closed == ["stream", "socket"] and "closing a live connection of user u1 failed" in caplog.text
    assert registry.end_user("u1") == 0  # nothing left to close


def test_a_declared_ending_event_closes_the_users_connections(app, app_config):  # app: a migrated database
    made = create_app(app_config, modules=[ACCOUNTS])
    connections.end_users_on(made, "accounts.user.block", lambda event: event.payload["user"])
    ended = threading.Event()
    connections.of(made).register("u1", "sse 1", ended.set)
    with made.app_context():
        events.record("accounts.user.block", {"user": "u1"})
        db.session.commit()  # heard through the event log, as every process hears it
        db.session.remove()
    try:
        assert ended.wait(10)
    finally:
        made.extensions["trellis_events"].stop()
