"""SQLite under eventlet: waiting for the write lock without stopping the process.

SQLite waits for a lock held by another connection inside its C call (the busy timeout). Under eventlet
that call holds the hub: no other greenlet runs, not even the one of this process that holds the lock and
would release it as soon as it ran again (it had yielded on a socket: a mail sent, a Socket.IO emit). The
whole server then stood still until the timeout, 30 s, and the waiting request failed.

So under eventlet the connections have no busy timeout, and a statement refused with ``SQLITE_BUSY`` is
tried again after a green sleep, for as long as the timeout would have waited: what SQLite's own busy
handler does, with the hub free meanwhile. ``SQLITE_BUSY_SNAPSHOT`` (a transaction that read before
another one committed a write) is raised at once, as SQLite itself does: waiting cannot help it.
"""

from __future__ import annotations

import random
import sqlite3
import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

WAIT_SECONDS = 30.0  # as long as the busy timeout of the other modes
_FIRST_PAUSE, _LONGEST_PAUSE = 0.001, 0.05


def _waiting(statement: Callable[[], T]) -> T:
    """``statement()``, tried again while SQLite answers a plain ``SQLITE_BUSY``, until WAIT_SECONDS."""
    import eventlet

    deadline = time.monotonic() + WAIT_SECONDS
    pause = _FIRST_PAUSE
    while True:
        try:
            return statement()
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode != sqlite3.SQLITE_BUSY or time.monotonic() >= deadline:
                raise
        eventlet.sleep(pause * random.uniform(0.5, 1.5))  # jitter: waiters do not retry in lockstep
        pause = min(pause * 2, _LONGEST_PAUSE)


class GreenWaitCursor(sqlite3.Cursor):
    def execute(self, sql: str, parameters: Any = (), /) -> GreenWaitCursor:
        return _waiting(lambda: super(GreenWaitCursor, self).execute(sql, parameters))

    def executemany(self, sql: str, parameters: Any, /) -> GreenWaitCursor:
        rows = list(parameters)  # an iterator would be used up by a refused attempt
        return _waiting(lambda: super(GreenWaitCursor, self).executemany(sql, rows))


class GreenWaitConnection(sqlite3.Connection):
    """A connection whose statements and commits wait for locks greenly (see the module's docstring)."""

    def cursor(self, factory: Any = GreenWaitCursor) -> Any:
        return super().cursor(factory)

    def commit(self) -> None:
        _waiting(super().commit)


def connect_args() -> dict[str, Any]:
    """pysqlite's ``connect`` arguments for a connection used under eventlet."""
    return {"factory": GreenWaitConnection, "timeout": 0}
