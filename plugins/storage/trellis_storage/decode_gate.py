"""How many image decodes a process runs and queues: at most ``running`` at once (each may hold up to
``imaging.MAX_DECODE_BYTES``, so this bounds their memory together) and ``waiting`` more in line; a request past
that is refused at once (503 with ``Retry-After``) rather than queued behind minutes of work."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator


class Saturated(Exception):
    """Every decode slot is taken and the line is full."""


class DecodeGate:
    def __init__(self, running: int, waiting: int) -> None:
        self.slots = threading.BoundedSemaphore(running)
        self._limit = running + waiting
        self._admitted = 0
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def admitted(self) -> Iterator[threading.BoundedSemaphore]:
        """The slots to run the decode under (``trellis.offload.off_hub``); :class:`Saturated` when full."""
        with self._lock:
            if self._admitted >= self._limit:
                raise Saturated()
            self._admitted += 1
        try:
            yield self.slots
        finally:
            with self._lock:
                self._admitted -= 1
