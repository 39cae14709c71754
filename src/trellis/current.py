"""Flask's context objects themselves, not their proxies: ``current.app()``, ``current.request()``,
``current.g()``. For code that runs on every request, and wherever the object must outlive its context
(an app handed to a background task or thread).

An attribute read through one of Flask's proxies (``current_app.config``, ``request.environ``, ``g.x``)
is many times dearer than a plain one: the lookup on the proxy object fails first, raising and formatting
an AttributeError, before the proxy's ``__getattr__`` forwards it (``bench/results/core.md#flasks-proxies``).
Taking the object once (werkzeug's ``_get_current_object``) and reading it directly avoids that. Elsewhere
the proxies read better and cost nothing that matters.
"""

from __future__ import annotations

from typing import Any

from flask import Flask, Request, current_app
from flask import g as _g
from flask import request as _request


def app() -> Flask:
    """The app of the current context (outside one: RuntimeError, as the proxy)."""
    return current_app._get_current_object()  # type: ignore[attr-defined]


def request() -> Request:
    """The request of the current context (outside one: RuntimeError, as the proxy)."""
    return _request._get_current_object()  # type: ignore[attr-defined]


def g() -> Any:
    """The current app context's ``g``."""
    return _g._get_current_object()
