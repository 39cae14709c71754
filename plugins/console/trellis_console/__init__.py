"""Trellis admin console: the web panel at ``/console``.

Server-rendered page shells (Jinja) plus a small vanilla JavaScript layer that calls the same REST API as
every other client, with the administrator's Bearer token. It requires no other module and knows none:
each module contributes its pages (``Module.console_pages``), so a module that is not loaded has no page.
"""

from __future__ import annotations

from marshmallow import fields, validate

from trellis import Module
from trellis.module_config import ModuleConfigSchema

from .views import OWN_PAGES, bp, init_app


class ConsoleConfig(ModuleConfigSchema):
    """``active: false`` takes the whole panel offline (its pages and assets answer 404)."""

    pageSize = fields.Integer(
        load_default=25,
        validate=validate.Range(min=1, max=1000),
        metadata={"description": "rows per page in the console's tables"},
    )


module = Module(
    name="console",
    blueprints=(bp,),
    config_schema=ConsoleConfig,
    init_app=init_app,
    console_pages=OWN_PAGES,
    description="The admin console: a web panel at /console over the REST API",
)

__all__ = ["ConsoleConfig", "module"]
