"""Trellis: a self-hosted modular backend (Flask host + pip-installable modules)."""

from typing import Any

from .modules import ConsolePage, EventTopic, Module, OwnedSchema

__all__ = ["create_app", "Trellis", "ConsolePage", "EventTopic", "Module", "OwnedSchema"]


def __getattr__(name: str) -> Any:
    # Lazy, so ``python -m trellis.testing.server`` can monkey-patch (eventlet) before Flask, requests
    # and ssl are imported: urllib3 bound to the unpatched SSLContext recurses forever under eventlet.
    if name in ("create_app", "Trellis"):
        from . import app

        return getattr(app, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
