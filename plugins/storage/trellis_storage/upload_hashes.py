"""Running SHA-256 hashes of resumable uploads in progress, so a finished upload's hash (its file's ETag)
need not be read back."""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from typing import Any

from flask import current_app


class RunningHashes:
    """SHA-256 of uploads in progress, by upload and offset, for the next chunk taken in this process (a tus
    client sends its chunks one after the other, usually to one process). A chunk taken elsewhere means the
    file is read back once at the end instead: a hash's state cannot be stored, and a file's SHA-256 is its
    ETag. Bounded (the oldest go first)."""

    def __init__(self, size: int = 256) -> None:
        self._hashes: OrderedDict[str, tuple[int, Any]] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def take(self, upload_id: str, offset: int) -> Any:
        with self._lock:
            found = self._hashes.pop(upload_id, None)
        if found is not None and found[0] == offset:
            return found[1]
        return hashlib.sha256() if offset == 0 else None

    def keep(self, upload_id: str, offset: int, digest: Any) -> None:
        with self._lock:
            self._hashes[upload_id] = (offset, digest)
            while len(self._hashes) > self._size:
                self._hashes.popitem(last=False)

    def forget(self, upload_id: str) -> None:
        with self._lock:
            self._hashes.pop(upload_id, None)


def running_hashes() -> RunningHashes:
    """This process's hashes (kept in the module's state)."""
    return current_app.extensions["trellis_storage"].running_hashes
