"""The Forms module's configuration: spam protection and size limits of public submissions."""

from __future__ import annotations

from marshmallow import fields, validate

from trellis.module_config import ModuleConfigSchema
from trellis.ratelimit import valid_rate


class FormsConfigSchema(ModuleConfigSchema):
    honeypotField = fields.String(
        load_default="_gotcha",
        validate=validate.Length(min=1, max=100),
        metadata={
            "description": "hidden input that people leave empty; a submission that fills it is answered like "
            "a success but not stored or forwarded"
        },
    )
    rateLimit = fields.String(
        load_default="10/minute",
        validate=valid_rate,
        metadata={"description": "submissions per client IP, across all forms"},
    )
    maxBodyBytes = fields.Integer(
        load_default=64 * 1024,
        validate=validate.Range(min=1024, max=1024 * 1024),
        metadata={"description": "larger submission bodies are refused with 413"},
    )
