"""What a functions file writes: the decorators and :class:`Reject` (``docs/functions.md``).

A decorator records the function in the declarations of the file being imported (:func:`collecting`) and
hands the function back unchanged, so a file may call its own functions and tests may import them.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

AUTH_LEVELS = ("anyone", "user", "admin")
REJECT_STATUSES = (400, 403, 404, 409, 422)
TRIGGER_EVENTS = (
    "before_create",
    "before_update",
    "before_delete",
    "after_create",
    "after_update",
    "after_delete",
)
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,99}$")
_SCHEMA = re.compile(r"^(\*|[A-Za-z][A-Za-z0-9_]{0,99})$")

Function = Callable[..., Any]


class Reject(Exception):
    """Refuse the write (a before-trigger), the sign-up or the call: the client gets ``status`` (400, 403, 404,
    409 or 422) with ``message`` and, when given, ``errors`` ({field: [reasons]}); nothing is written."""

    def __init__(self, message: str, status: int = 400, errors: dict[str, Any] | None = None) -> None:
        if status not in REJECT_STATUSES:
            raise ValueError(f"Reject status must be one of {REJECT_STATUSES}, not {status!r}")
        super().__init__(message)
        self.message = str(message)
        self.status = status
        self.errors = errors


@dataclass(frozen=True)
class Trigger:
    schema: str  # a schema name, or "*"
    event: str  # one of TRIGGER_EVENTS, or before_sign_up / after_sign_up
    function: Function
    file: str

    @property
    def name(self) -> str:
        return function_name(self.function)

    @property
    def key(self) -> str:
        """What a queued run names it by: the same after a reload of an unchanged file."""
        return f"{self.file}:{self.name}:{self.event}:{self.schema}"


@dataclass(frozen=True)
class Callable_:
    name: str
    auth: str
    function: Function
    file: str


@dataclass(frozen=True)
class Schedule:
    name: str
    cron: str
    function: Function
    file: str


@dataclass
class Declarations:
    """What one file declared while it was imported."""

    file: str
    triggers: list[Trigger] = field(default_factory=list)
    functions: list[Callable_] = field(default_factory=list)
    schedules: list[Schedule] = field(default_factory=list)


_collecting: list[Declarations] = []  # the file being imported (imports run one at a time: see loading)


@contextlib.contextmanager
def collecting(file: str) -> Iterator[Declarations]:
    """Record the declarations made while ``file`` is imported."""
    found = Declarations(file)
    _collecting.append(found)
    try:
        yield found
    finally:
        _collecting.remove(found)


def _current() -> Declarations | None:
    return _collecting[-1] if _collecting else None


def function_name(function: Function) -> str:
    return getattr(function, "__name__", repr(function))


def _file(function: Function, found: Declarations) -> str:
    """The file that defines ``function`` (a sibling imported by the file being loaded has its own)."""
    code = getattr(function, "__code__", None)
    return Path(code.co_filename).name if code is not None else found.file


def _registrar(schema: str, event: str) -> Callable[[Function], Function]:
    def register(function: Function) -> Function:
        found = _current()
        if found is not None:
            found.triggers.append(Trigger(schema, event, function, _file(function, found)))
        return function

    return register


def _trigger(event: str) -> Callable[[str], Callable[[Function], Function]]:
    def decorator_for(schema: str) -> Callable[[Function], Function]:
        if not isinstance(schema, str) or not _SCHEMA.match(schema):
            raise ValueError(f"@{event} takes a schema name or '*', not {schema!r}")
        return _registrar(schema, event)

    decorator_for.__name__ = event
    return decorator_for


before_create = _trigger("before_create")
before_update = _trigger("before_update")
before_delete = _trigger("before_delete")
after_create = _trigger("after_create")
after_update = _trigger("after_update")
after_delete = _trigger("after_delete")
# ``(ctx, user)``: before a user is created by sign-up (``Reject`` refuses it); after, once it has committed.
before_sign_up = _registrar("*", "before_sign_up")
after_sign_up = _registrar("*", "after_sign_up")


def function(name: str, auth: str = "user") -> Callable[[Function], Function]:
    """``(ctx, params)``: callable at ``POST /functions/{name}``; ``auth``: anyone, user (default) or admin."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(f"@function name must match {_NAME.pattern}, not {name!r}")
    if auth not in AUTH_LEVELS:
        raise ValueError(f"@function auth must be one of {AUTH_LEVELS}, not {auth!r}")

    def register(target: Function) -> Function:
        found = _current()
        if found is not None:
            found.functions.append(Callable_(name, auth, target, _file(target, found)))
        return target

    return register


def schedule(cron: str, name: str | None = None) -> Callable[[Function], Function]:
    """``(ctx)``: runs at the times of ``cron`` (five fields, UTC), once per due time across processes."""
    from croniter import croniter  # here: only a file that declares a schedule pays for its import

    if not isinstance(cron, str) or not croniter.is_valid(cron) or len(cron.split()) != 5:
        raise ValueError(f"@schedule takes a cron expression of five fields, not {cron!r}")

    def register(target: Function) -> Function:
        found = _current()
        if found is not None:
            found.schedules.append(Schedule(name or function_name(target), cron, target, _file(target, found)))
        return target

    return register
