"""Hints of this process about callers, each until a moment: which statement should read a caller's page."""

from __future__ import annotations

from time import monotonic
from typing import Any

MAX_CALLER_HINTS = 10_000


class CallerHints:
    """Hints, each until a moment, bounded (all dropped when full): a hint only chooses which statement
    reads a page, never what the page holds."""

    def __init__(self) -> None:
        self._until: dict[Any, tuple[Any, float]] = {}

    def get(self, key: Any) -> Any:
        """The hint's value, or None when there is none or it is over."""
        found = self._until.get(key)
        if found is None:
            return None
        if found[1] > monotonic():
            return found[0]
        self._until.pop(key, None)
        return None

    def put(self, key: Any, value: Any, seconds: float) -> None:
        if len(self._until) >= MAX_CALLER_HINTS:
            self._until.clear()
        self._until[key] = (value, monotonic() + seconds)

    def drop(self, key: Any) -> None:
        self._until.pop(key, None)

    def clear(self) -> None:
        self._until.clear()

    def __len__(self) -> int:
        """How many hints are kept (over or not)."""
        return len(self._until)
