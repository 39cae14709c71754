"""A Socket.IO test client that hands a test what it receives in the order the server sent it."""

from __future__ import annotations

from typing import Any

import engineio
import socketio


class _InOrderEngineIO(engineio.Client):
    def _trigger_event(self, event: str, *args: Any, **kwargs: Any) -> Any:
        if event == "message":
            kwargs["run_async"] = False  # on the reading thread, one message after the other
        return super()._trigger_event(event, *args, **kwargs)


class InOrderClient(socketio.Client):
    """python-socketio's client, each received packet handled on the thread that reads the connection, in
    arrival order. The library hands every Engine.IO message to a new thread, so two events the server
    wrote back to back can reach a test's queue in either order: a subscription test recorded a change
    before the one the server had sent just ahead of it (in CI); the chat tests' rare ordering
    failures of earlier sessions fit the same cause. A handler must not wait for the server (a ``call`` made
    inside one would wait for its own thread); putting into a queue, as the tests do, is fine. Overrides
    two private methods (checked against python-engineio 4.15.1 and python-socketio 5.18.1); the database
    module's ``test_a_watcher_hands_changes_on_in_the_order_the_server_sent_them`` fails if they stop working."""

    def _engineio_client_class(self) -> type:
        return _InOrderEngineIO
