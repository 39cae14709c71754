"""CPU-bound work off the eventlet hub: under eventlet the thread serving every request is the hub, so C work
that releases the GIL (argon2, image decoding) goes to eventlet's pool of OS threads, and the hub keeps
serving meanwhile. Elsewhere (threading mode, the CLI, tests) the caller's thread runs it.

``slots`` bounds how many such jobs run at once (a green semaphore under eventlet: waiting costs the hub
nothing): more than one per core only makes each job slower.

The pool's threads run at a lower CPU priority than the hub (``nice`` +10, Linux's per-thread priority):
when the cores are busy, the hub, which answers every other request, gets them first. Measured with ten
large image transforms running: the p99 of small downloads beside them went from 2.4x to 1.x its value
without them (bench/results/storage_resumable.md)."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def core_slots(spare: int = 0) -> threading.BoundedSemaphore:
    """A semaphore with one slot per core (``spare`` cores fewer, at least one), for one kind of CPU-bound job."""
    return threading.BoundedSemaphore(max(1, (os.cpu_count() or 1) - spare))


def off_hub(slots: threading.BoundedSemaphore, func: Callable[..., T], *args: Any) -> T:
    """``func(*args)`` in an OS thread when eventlet has patched threads, else here; one of ``slots`` held."""
    with slots:
        if "eventlet" in sys.modules:
            from eventlet import patcher, tpool

            if patcher.is_monkey_patched("thread"):
                return tpool.execute(_yielding, func, *args)
        return func(*args)


POOL_NICENESS = 10


def _yielding(func: Callable[..., T], *args: Any) -> T:
    """``func(*args)`` in a pool thread that gives way to the hub (its niceness raised once; never lowered)."""
    thread = threading.get_native_id()
    try:
        if os.getpriority(os.PRIO_PROCESS, thread) < POOL_NICENESS:
            os.setpriority(os.PRIO_PROCESS, thread, POOL_NICENESS)
    except (OSError, AttributeError):  # not Linux, or not allowed: the job runs at the usual priority
        pass
    return func(*args)
