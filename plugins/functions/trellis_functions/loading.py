"""Importing the files of ``TRELLIS_FUNCTIONS_PATH`` into a :class:`Registry`.

Files are imported in file-name order, each under its own name (a file may ``import`` a sibling, which is
then imported once), with the folder at the end of ``sys.path`` so that installed packages keep their
names. Each import is time-boxed (:mod:`.limits`): a file that never finishes is reported like one that
raises, and the others load. What a file declared is kept only when it imported; a file whose sibling
failed fails with it. A reload forgets every module of the folder and imports them all again, so a
changed sibling is seen; the new registry replaces the old one whole (a request keeps the one it began with).
"""

from __future__ import annotations

import importlib
import sys
import traceback
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from trellis.db import utcnow

from .api import Callable_, Declarations, Schedule, Trigger, collecting
from .limits import TimeLimitExceeded, time_limit


@dataclass(frozen=True)
class FileState:
    name: str
    loaded: bool
    loaded_at: datetime
    error: str | None = None
    line: int | None = None


@dataclass
class Registry:
    """What the files declare, as one load found them."""

    files: list[FileState] = field(default_factory=list)
    triggers: list[Trigger] = field(default_factory=list)
    functions: dict[str, Callable_] = field(default_factory=dict)
    schedules: dict[str, Schedule] = field(default_factory=dict)
    fingerprint: tuple[tuple[str, int, int], ...] = ()

    def __post_init__(self) -> None:
        self._by_event: dict[tuple[str, str], list[Trigger]] = {}
        for trigger in self.triggers:
            self._by_event.setdefault((trigger.schema, trigger.event), []).append(trigger)

    def triggers_of(self, schema: str, event: str) -> list[Trigger]:
        """Those of ``schema`` and of "*", in file-name then definition order."""
        own = self._by_event.get((schema, event), [])
        every = self._by_event.get(("*", event), [])
        if not every:
            return own
        return [t for t in self.triggers if t.event == event and t.schema in (schema, "*")]

    def watches(self, schema: str, kind: str) -> bool:
        return any(
            (name, event) in self._by_event for name in (schema, "*") for event in (f"before_{kind}", f"after_{kind}")
        )

    def trigger(self, key: str) -> Trigger | None:
        return next((t for t in self.triggers if t.key == key), None)

    @property
    def broken(self) -> list[FileState]:
        return [f for f in self.files if not f.loaded]


def fingerprint(folder: Path) -> tuple[tuple[str, int, int], ...]:
    """The folder's ``*.py`` files with their modification times and sizes: what a reload looks at."""
    try:
        paths = sorted(folder.glob("*.py"))
    except OSError:
        return ()
    found = []
    for path in paths:
        try:
            stat = path.stat()
        except OSError:
            continue  # removed meanwhile
        found.append((path.name, stat.st_mtime_ns, stat.st_size))
    return tuple(found)


def load(folder: Path, import_seconds: float) -> Registry:
    """Import every file of ``folder`` (see the module docstring)."""
    seen = fingerprint(folder)
    _forget(folder)
    if str(folder) not in sys.path:
        sys.path.append(str(folder))
    importlib.invalidate_caches()
    states: list[FileState] = []
    declared: list[Declarations] = []
    for name, _, _ in seen:
        module_name = name[:-3]
        with collecting(name) as found:
            error = _import(folder / name, module_name, import_seconds)
        if error is None:
            states.append(FileState(name, True, utcnow()))
            declared.append(found)
        else:
            states.append(FileState(name, False, utcnow(), *error))
    triggers = [trigger for one in declared for trigger in one.triggers]
    functions: dict[str, Callable_] = {}
    schedules: dict[str, Schedule] = {}
    for one in declared:  # a name declared twice: the first file's wins, as imported
        for callable_ in one.functions:
            functions.setdefault(callable_.name, callable_)
        for schedule in one.schedules:
            schedules.setdefault(schedule.name, schedule)
    return Registry(states, triggers, functions, schedules, seen)


def _import(path: Path, module_name: str, seconds: float) -> tuple[str, int | None] | None:
    """Import one file (unless a sibling imported it already); its error and line, or None."""
    loaded = sys.modules.get(module_name)
    if loaded is not None and _file_of(loaded) == path:
        return None
    try:
        with time_limit(seconds):
            importlib.import_module(module_name)
    except TimeLimitExceeded:
        _forget_one(module_name)
        return f"did not finish importing within {seconds:g} s", _line_in(path, traceback.extract_stack())
    except BaseException as exc:  # noqa: BLE001  (a file may raise anything, SystemExit included)
        _forget_one(module_name)
        if isinstance(exc, SyntaxError) and exc.filename == str(path):
            return f"SyntaxError: {exc.msg}", exc.lineno
        frames = traceback.extract_tb(exc.__traceback__)
        return f"{type(exc).__name__}: {exc}", _line_in(path, frames)
    if _file_of(sys.modules.get(module_name)) != path:  # an installed module of the same name won
        _forget_one(module_name)
        return f"the name {module_name!r} is an installed module's: rename the file", None
    return None


def _line_in(path: Path, frames: traceback.StackSummary) -> int | None:
    lines = [frame.lineno for frame in frames if Path(frame.filename) == path]
    return lines[-1] if lines else None


def _file_of(module: object) -> Path | None:
    file = getattr(module, "__file__", None)
    return Path(file) if file else None


def _forget(folder: Path) -> None:
    """Drop every module imported from ``folder``: the next import reads the files again."""
    for name, module in list(sys.modules.items()):
        file = _file_of(module)
        if file is not None and file.parent == folder:
            del sys.modules[name]


def _forget_one(module_name: str) -> None:
    sys.modules.pop(module_name, None)
