"""Trellis Functions: triggers, callable functions and schedules written as plain Python files in
``TRELLIS_FUNCTIONS_PATH`` (``docs/functions.md``).

What a file imports from here is the API below; the rest of the package is the module that runs them.
"""

from __future__ import annotations

from pathlib import Path

from flask import Flask

from trellis import ConsolePage, Module, triggers
from trellis.settings import is_production

from .api import (
    Reject,
    after_create,
    after_delete,
    after_sign_up,
    after_update,
    before_create,
    before_delete,
    before_sign_up,
    before_update,
    function,
    schedule,
)

__all__ = [
    "Reject",
    "after_create",
    "after_delete",
    "after_sign_up",
    "after_update",
    "before_create",
    "before_delete",
    "before_sign_up",
    "before_update",
    "function",
    "module",
    "schedule",
]


def _init_app(app: Flask) -> None:
    from . import state
    from .document_triggers import DocumentTriggers
    from .routes import flush_log

    state.init(app, is_production(app))
    triggers.provide(app, DocumentTriggers())
    app.teardown_request(flush_log)


def _background() -> tuple:
    from . import jobs, schedules, state

    return (state.start_watcher, jobs.start, schedules.start)


def _module() -> Module:
    from .config import FunctionsConfigSchema
    from .openapi import paths
    from .routes import blp
    from .settings import SETTINGS
    from .sign_ups import SignUpTriggers

    console = Path(__file__).parent / "console"
    return Module(
        name="functions",
        requires=("database",),
        blueprints=(blp,),
        config_schema=FunctionsConfigSchema,
        migrations=str(Path(__file__).parent / "migrations" / "versions"),
        settings=SETTINGS,
        init_app=_init_app,
        hooks=(SignUpTriggers(),),
        background=_background(),
        openapi_paths=paths,
        console_pages=(ConsolePage("functions", "Functions", str(console / "functions.html")),),
        description="Triggers, callable functions and schedules written as plain Python files",
    )


module = _module()
