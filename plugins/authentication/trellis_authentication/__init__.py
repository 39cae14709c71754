"""Trellis Authentication module: users, access/refresh tokens, blocking.

The ``Module`` object is built lazily (``module`` below) so that importing
``trellis_authentication.testing`` (the pytest plugin other modules' tests load) does not add this
module's tables to the shared metadata when the module itself is not enabled.
"""

from __future__ import annotations

from typing import Any

__all__ = ["module"]


def __getattr__(name: str) -> Any:
    if name == "module":
        from .declaration import module

        return module
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
