"""Running user code: its ``ctx``, its time limit, what its errors answer, and the function log.

A run's outcome is an entry of the function log (``functions_log``). Entries are kept on the app context
(``g``) and written in a transaction of their own once the work they describe has committed or rolled back:
at the end of a request (a refused write's entry survives the rollback of the write) or of a background run.
Anything a function raises but :class:`~.api.Reject` answers 500 ``FUNCTION_ERROR`` with the request id and
the function's name; the traceback goes to the server log only.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import Any

from flask import current_app, g
from sqlalchemy import bindparam, insert

from trellis import db, statements
from trellis.credentials import Identity, UserIdentity
from trellis.errors import APIError

from .api import Reject
from .database import Db
from .limits import TimeLimitExceeded, time_limit
from .models import ERROR, OK, REJECTED, FunctionLogEntry

log = logging.getLogger(__name__)

MAX_MESSAGE = 2000  # characters of a log entry's message

_ENTRIES = "_trellis_functions_log"


class FunctionError(APIError):
    def __init__(self, function: str, message: str) -> None:
        request_id = g.get("request_id") if g else None
        where = f" (request {request_id})" if request_id else ""
        super().__init__(500, f"Function {function!r} failed{where}: {message}", name="FUNCTION_ERROR")


class Ctx:
    """What a function is given (``docs/functions.md``)."""

    def __init__(self, identity: Identity | None, attempt: int | None = None) -> None:
        self.is_admin = bool(identity is not None and identity.is_admin)
        self.user = user_of(identity)
        self.request_id: str | None = g.get("request_id") if g else None
        self.attempt = attempt
        self.db = Db(identity)
        self.messages: list[str] = []

    def log(self, message: Any) -> None:
        """A line for the function log (this run's entry) and the server log."""
        text = str(message)
        self.messages.append(text)
        log.info("function: %s", text)


def user_of(identity: Identity | None) -> dict[str, Any] | None:
    if identity is None or identity.kind != "user" or identity.id is None:
        return None
    user = identity.user or {}
    return {"_id": identity.id, "email": user.get("email")}


def identity_for(actor: str, user: dict[str, Any] | None) -> Identity | None:
    """The caller an after-trigger acts as, from what its write stored (``user``: ``ctx.user`` then)."""
    if actor == "admin":
        return Identity("admin")
    if actor == "user" and user:
        return UserIdentity("user", user["_id"], user=user)
    return None


def actor_of(identity: Identity | None) -> str:
    if identity is None:
        return "anonymous"
    return "admin" if identity.is_admin else "user"


def invoke(
    target: Callable[..., Any],
    name: str,
    kind: str,
    args: tuple[Any, ...],
    ctx: Ctx,
    *,
    logged: bool = True,
) -> Any:
    """Run ``target(ctx, *args)`` under the time limit. A :class:`Reject` becomes its APIError, anything else a
    :class:`FunctionError`. ``logged``: an entry for every outcome (else only for a refusal or a failure)."""
    seconds = current_app.config["FUNCTIONS_TIME_LIMIT_SECONDS"]
    started = time.monotonic()
    try:
        with time_limit(seconds):
            result = target(ctx, *args)
    except Reject as exc:
        _entry(name, kind, REJECTED, started, ctx, exc.message)
        raise APIError(exc.status, exc.message, exc.errors) from None
    except APIError as exc:  # a ctx.db call refused (a 404, a rule): the run refuses with it
        _entry(name, kind, REJECTED if exc.status < 500 else ERROR, started, ctx, exc.message)
        raise
    except TimeLimitExceeded:
        _entry(name, kind, ERROR, started, ctx, f"stopped after its time limit of {seconds:g} s")
        log.error("function %s (%s) ran past its time limit of %g s", name, kind, seconds)
        raise FunctionError(name, f"it ran past its time limit of {seconds:g} s") from None
    except Exception as exc:
        log.exception("function %s (%s) raised (request %s)", name, kind, ctx.request_id)
        _entry(name, kind, ERROR, started, ctx, f"{type(exc).__name__}: {exc}")
        raise FunctionError(name, f"it raised {type(exc).__name__} (see the function log)") from None
    if logged:
        _entry(name, kind, OK, started, ctx, None)
    return result


def plain_json(name: str, value: Any) -> Any:
    """``value`` as JSON would carry it; a FUNCTION_ERROR naming the function when it cannot be."""
    try:
        return json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError) as exc:
        log.error("function %s returned what JSON cannot carry: %s", name, exc)
        raise FunctionError(name, f"it returned what JSON cannot carry ({exc})") from None


def _entry(name: str, kind: str, status: str, started: float, ctx: Ctx, message: str | None) -> None:
    lines = [*ctx.messages, *([message] if message else [])]
    text = "\n".join(lines)[:MAX_MESSAGE] if lines else None
    entry = {
        "id": db.new_id(),
        "function": name,
        "kind": kind,
        "status": status,
        "duration_ms": int((time.monotonic() - started) * 1000),
        "message": text,
        "attempt": ctx.attempt,
        "request_id": ctx.request_id,
        "created_at": db.utcnow(),
    }
    g.setdefault(_ENTRIES, []).append(entry)


def take_entries() -> list[dict[str, Any]]:
    """The log entries kept so far (now no longer kept)."""
    return (g.pop(_ENTRIES, None) if g else None) or []


_LOG = FunctionLogEntry.__table__
_INSERT_ENTRY = insert(_LOG).values({column.name: bindparam(column.name, type_=column.type) for column in _LOG.c})
_COMPILED: dict[Any, Any] = {}


def insert_entries(entries: list[dict[str, Any]]) -> None:
    """Insert log entries in the session's transaction (the caller commits), on the driver's cursor."""
    if not entries:
        return
    connection = db.session.connection()
    for entry in entries:
        statements.execute_compiled(connection, _INSERT_ENTRY, entry, _COMPILED)


def write_log() -> None:
    """Write the entries kept so far, in a transaction of their own (call once the work has ended)."""
    entries = take_entries()
    if not entries:
        return
    try:
        db.session.rollback()  # whatever is left of the work (a refused write) is not theirs to commit
        insert_entries(entries)
        db.session.commit()
    except Exception:
        db.session.rollback()
        log.exception("the function log could not be written (%d entries)", len(entries))
