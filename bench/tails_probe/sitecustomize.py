"""Loaded by a Trellis server started with this folder first on ``PYTHONPATH`` (``bench.tails`` does it):
records, as JSON lines in ``$TRELLIS_TAILS_PROBE``, what can make a request long — each garbage collection
(generation, duration), each event log pass (its work, not its wait), each greenthread that ran more than
3 ms before yielding (every other request waited meanwhile: where it yielded, its wall and CPU time, and
whether the OS preempted the process or a system call blocked it meanwhile) — and
each request's start and duration, on one clock (``time.perf_counter``, the machine's monotonic clock), so
that ``bench.tails`` can tell which of them the slowest requests overlapped.
Nothing here changes what the server does."""

from __future__ import annotations

import gc
import importlib.abc
import importlib.machinery
import json
import os
import resource
import sys
import time
from typing import Any

_OUT = os.environ.get("TRELLIS_TAILS_PROBE")
_records: list[list[Any]] = []
_gc_started = [0.0]


def _on_gc(phase: str, info: dict[str, Any]) -> None:
    now = time.perf_counter()
    if phase == "start":
        _gc_started[0] = now
    else:
        _records.append(["gc", info["generation"], _gc_started[0], now - _gc_started[0]])


def _flush() -> None:
    if _records and _OUT:
        taken = _records[:]
        del _records[: len(taken)]
        with open(_OUT, "a") as out:
            out.write("".join(json.dumps(record) + "\n" for record in taken))


def _where(frame: Any) -> str:
    """Whose greenthread it was (its outermost frame of Trellis's own code: a request's view, the event log's
    thread …), the innermost frame of Trellis's own code, and the innermost frame of all."""
    inner = f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_code.co_name}"
    ours: list[str] = []
    while frame is not None:
        name = frame.f_code.co_filename
        if "/trellis" in name and "site-packages" not in name and "sitecustomize" not in name:
            ours.append(f"{os.path.basename(name)}:{frame.f_code.co_name}")
        frame = frame.f_back
    if not ours:
        return inner
    return f"[{ours[-1]}] {ours[0]} … {inner}"


def _trace_slices() -> None:
    """Each time a greenthread switches out after running more than 3 ms (wall), where it yielded, how
    long it ran and how much of that was this thread's CPU (the rest: the OS ran something else)."""
    import greenlet
    from eventlet import hubs

    hub = hubs.get_hub().greenlet
    last = [time.perf_counter(), time.thread_time(), 0, 0]

    def trace(event: str, args: Any) -> None:
        if event not in ("switch", "throw"):
            return
        now, cpu = time.perf_counter(), time.thread_time()
        usage = resource.getrusage(resource.RUSAGE_THREAD)
        wall, used = now - last[0], cpu - last[1]
        # Context switches of this thread meanwhile: involuntary ones are the OS preempting it for another
        # process, voluntary ones a system call that blocked (the hub's own wait is not in a slice).
        preempted, blocked = usage.ru_nivcsw - last[2], usage.ru_nvcsw - last[3]
        last[:] = [now, cpu, usage.ru_nivcsw, usage.ru_nvcsw]
        origin = args[0]  # the greenthread that ran since the last switch (this runs in the target's context)
        if wall > 0.003 and origin is not hub and origin.gr_frame is not None:
            _records.append(["slice", _where(origin.gr_frame), now - wall, wall, used, preempted, blocked])
        if now - _flushed[0] > 1.0:
            _flushed[0] = now
            _flush()

    greenlet.settrace(trace)


_flushed = [0.0]


def _patch_metrics(module: Any) -> None:
    observe = module.Metrics.observe
    started = [False]

    def observed(self: Any, method: str, route: str, status: str, seconds: float) -> None:
        if not started[0]:
            started[0] = True
            _trace_slices()
        _records.append(["request", f"{method} {route}", time.perf_counter() - seconds, seconds])
        observe(self, method, route, status, seconds)

    module.Metrics.observe = observed


def _patch_events(module: Any) -> None:
    tick = module.EventLog.tick

    def timed(self: Any) -> None:
        started = time.perf_counter()
        try:
            tick(self)
        finally:
            _records.append(["pass", 0, started, time.perf_counter() - started])

    module.EventLog.tick = timed


_PATCHES = {"trellis.metrics": _patch_metrics, "trellis.events.log": _patch_events}


class _AfterImport(importlib.abc.MetaPathFinder):
    """Patches a module of ``_PATCHES`` once it has been executed."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name not in _PATCHES:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        execute = spec.loader.exec_module

        def exec_module(module: Any) -> None:
            execute(module)
            _PATCHES[name](module)

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


if _OUT:
    gc.callbacks.append(_on_gc)
    sys.meta_path.insert(0, _AfterImport())
