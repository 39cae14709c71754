"""Who the code now running acts as: the caller of the request, or the ``ctx.db`` in use (each ``ctx.db``
call runs its writes' triggers as its own caller, one level deeper)."""

from __future__ import annotations

from collections.abc import Callable

from flask import g, has_request_context

from trellis.credentials import Identity, identify
from trellis.errors import APIError

MAX_DEPTH = 8  # triggers that write, whose writes run triggers …
_STACK = "_trellis_functions_callers"


def acting_identity() -> Identity | None:
    """Who the code now running acts as: the innermost ``ctx.db`` in use, else the request's caller."""
    stack = g.get(_STACK) if g else None
    if stack:
        return stack[-1]
    if has_request_context():
        return identify()
    return None


def push_identity(identity: Identity | None) -> Callable[[], None]:
    """``ctx.db`` acts as ``identity`` until the returned function is called; past MAX_DEPTH nested writes
    through triggers, a FUNCTION_ERROR."""
    stack = g.setdefault(_STACK, [])
    if len(stack) >= MAX_DEPTH:
        raise APIError(500, f"Triggers nested more than {MAX_DEPTH} deep: nothing was written", name="FUNCTION_ERROR")
    stack.append(identity)
    return stack.pop
