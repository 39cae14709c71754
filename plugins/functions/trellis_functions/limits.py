"""A time limit on user code: a function, or a file's import, that runs past it is stopped with
:class:`TimeLimitExceeded` and the process goes on.

Code that waits (a query, a request, a sleep) is stopped where it waits: under eventlet by a green
``Timeout``. Code that never waits (``while True: pass``) holds the process's one OS thread, so no green
timer can fire: a watchdog on a real OS thread raises the exception in that thread
(``PyThreadState_SetAsyncExc``) once the run is past its limit. Under eventlet it does so only while the
hub has not run for a while, which is the sign that the running green thread is the one that loops
(another green thread's run is parked and would be hit instead). ``TimeLimitExceeded`` is a
``BaseException``: an ``except Exception`` in user code does not swallow it.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import itertools
import sys
import time
from collections.abc import Iterator
from typing import Any

TICK_SECONDS = 0.05  # how often the watchdog looks, and the hub's heartbeat
STARVED_SECONDS = 0.5  # the hub has not run this long: the running green thread is the one that loops


class TimeLimitExceeded(BaseException):
    """User code ran past its limit."""


class _Run:
    __slots__ = ("deadline", "fired", "ident")

    def __init__(self, ident: int, deadline: float) -> None:
        self.ident, self.deadline, self.fired = ident, deadline, False


def _original(name: str) -> Any:
    """The standard library's module, not eventlet's green one (imported only where eventlet is)."""
    patcher = sys.modules.get("eventlet.patcher")
    return patcher.original(name) if patcher is not None else importlib.import_module(name)


def _green() -> bool:
    patcher = sys.modules.get("eventlet.patcher")
    return patcher is not None and bool(patcher.is_monkey_patched("thread"))


class Watchdog:
    def __init__(self) -> None:
        self._lock: Any = None  # a real lock, made on first use (eventlet may patch after this import)
        self._runs: dict[int, _Run] = {}
        self._tokens = itertools.count()
        self._beat = time.monotonic()
        self._green = False

    def _start(self) -> None:
        if self._lock is not None:
            return
        self._lock = _original("threading").Lock()
        self._green = _green()
        _original("threading").Thread(target=self._watch, name="trellis-functions-watchdog", daemon=True).start()
        if self._green:
            import eventlet

            eventlet.spawn(self._heartbeat)

    def _heartbeat(self) -> None:
        import eventlet

        while True:
            self._beat = time.monotonic()
            eventlet.sleep(TICK_SECONDS)

    def _watch(self) -> None:
        sleep = _original("time").sleep
        while True:
            sleep(TICK_SECONDS)
            now = time.monotonic()
            if self._green and now - self._beat < STARVED_SECONDS:
                continue  # the hub runs: green timeouts stop what waits
            with self._lock:
                for run in self._runs.values():
                    if not run.fired and now > run.deadline:
                        run.fired = True
                        _raise_in(run.ident, TimeLimitExceeded)

    @contextlib.contextmanager
    def limit(self, seconds: float) -> Iterator[None]:
        """Run the body with a limit of ``seconds``."""
        self._start()
        token = next(self._tokens)
        run = _Run(_original("_thread").get_ident(), time.monotonic() + seconds)
        with self._lock:
            self._runs[token] = run
        try:
            if self._green:
                import eventlet

                with eventlet.Timeout(seconds, TimeLimitExceeded):
                    yield
            else:
                yield
        finally:
            with self._lock:
                self._runs.pop(token, None)
                if run.fired:  # raised already, or about to be: never outside the body
                    _raise_in(run.ident, None)


def _raise_in(ident: int, exception: type[BaseException] | None) -> None:
    """Make ``exception`` pending in the thread ``ident`` (None clears a pending one)."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(ident), ctypes.py_object(exception) if exception else None
    )


WATCHDOG = Watchdog()


def time_limit(seconds: float) -> contextlib.AbstractContextManager[None]:
    return WATCHDOG.limit(seconds)
