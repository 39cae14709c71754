"""Waiting in tests for what another process does (a server, a sender, a sweep): poll, never sleep blind."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(found: Callable[[], T], what: str, timeout: float = 60.0, interval: float = 0.05) -> T:
    """Call ``found`` until it returns something truthy and return that; fail the test after ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = found()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"waited {timeout:.0f} s for {what}")
