"""Each process's registry of the functions files, and the watcher that reloads it.

Every process imports the files itself at start. Outside production (``TRELLIS_FUNCTIONS_RELOAD``) a green
thread of each serving process looks at the folder every half second and, when a file was added, changed or
removed, imports them all again and swaps the registry: every process sees a change within 2 s, with no
restart. In production a file that fails to import stops the start, naming the file and the line.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

from flask import Flask, current_app

from trellis.background import ThrottledWarning, start_loop

from . import settings
from .loading import Registry, fingerprint, load

log = logging.getLogger(__name__)

EXTENSION = "trellis_functions"
WATCH_SECONDS = 0.5


class FunctionsStartError(RuntimeError):
    """A functions file failed to import in production."""


class Functions:
    def __init__(self, app: Flask) -> None:
        self.folder: Path = settings.folder(app)
        self.import_seconds: float = app.config["FUNCTIONS_TIME_LIMIT_SECONDS"]
        self.reloads = settings.reloads(app)
        self._lock = threading.Lock()
        self.registry: Registry = Registry()

    def load(self) -> Registry:
        with self._lock:
            self.registry = load(self.folder, self.import_seconds)
        for broken in self.registry.broken:
            where = f"{broken.name}, line {broken.line}" if broken.line else broken.name
            log.error("functions file %s did not load: %s", where, broken.error)
        return self.registry

    def changed(self) -> bool:
        return fingerprint(self.folder) != self.registry.fingerprint

    def watch(self) -> None:
        """One look at the folder (reload when it changed), then a pause."""
        time.sleep(WATCH_SECONDS)
        if self.changed():
            self.load()
            log.info("functions reloaded from %s: %d file(s)", self.folder, len(self.registry.files))


def of(app: Flask | None = None) -> Functions:
    functions: Functions = (app or current_app).extensions[EXTENSION]
    return functions


def registry() -> Registry:
    return of().registry


def init(app: Flask, production: bool) -> Functions:
    functions = app.extensions[EXTENSION] = Functions(app)
    functions.load()
    if production and functions.registry.broken:
        broken = functions.registry.broken[0]
        where = f"{functions.folder / broken.name}" + (f", line {broken.line}" if broken.line else "")
        raise FunctionsStartError(f"functions file {where} did not load: {broken.error}")
    return functions


def start_watcher(app: Flask) -> None:
    """``Module.background``: the reload watcher of this process (outside production)."""
    functions = of(app)
    if not functions.reloads:
        return
    start_loop(
        "functions-watch",
        "functions: watching the files",
        functions.watch,
        ThrottledWarning(log),
        retry_seconds=WATCH_SECONDS,
    )
