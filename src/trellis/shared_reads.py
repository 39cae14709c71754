"""Concurrent callers sharing one read (:class:`SharedReads`), never one that started before they asked.

Library-independent, so part of the core rather than of :mod:`trellis.server`: the cache generations
share their table read through it (``trellis.cache``), and the Redis token reader
(:mod:`trellis.server.token_reader`) its ``GET``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any


class _Read:
    def __init__(self, number: int) -> None:
        self.number = number
        self.done = threading.Event()  # green under eventlet's monkey-patching
        self.value: Any = None
        self.error: BaseException | None = None


class SharedReads:
    """At most one read under way; callers that arrive meanwhile share the next one."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._started = 0
        self._running: _Read | None = None

    def read(self, fetch: Callable[[], Any]) -> Any:
        with self._lock:
            asked = self._started  # reads numbered above this one started after the caller asked
        while True:
            with self._lock:
                running = self._running
                lead = running is None
                if running is None:
                    self._started += 1
                    running = self._running = _Read(self._started)
                current = running
            if lead:
                try:
                    current.value = fetch()
                except BaseException as exc:  # handed to every caller sharing this read
                    current.error = exc
                finally:
                    with self._lock:
                        self._running = None
                    current.done.set()
            else:
                current.done.wait()
            if current.number > asked:
                if current.error is not None:
                    raise current.error  # the same fault for every caller that shared the read
                return current.value
