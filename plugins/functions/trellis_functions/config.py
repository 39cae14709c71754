"""The Functions module's configuration."""

from __future__ import annotations

from marshmallow import fields

from trellis.module_config import ModuleConfigSchema
from trellis.ratelimit import valid_rate


class FunctionsConfigSchema(ModuleConfigSchema):
    rateLimit = fields.String(
        load_default="120/minute",
        validate=valid_rate,
        metadata={"description": "calls of `POST /functions/{name}` per caller (a user, or a client IP)"},
    )
