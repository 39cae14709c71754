"""The Chat module's configuration (``GET/PUT /config/chat``)."""

from __future__ import annotations

from marshmallow import fields, validate

from trellis.fields import JsonBoolean
from trellis.module_config import ModuleConfigSchema


class ChatConfig(ModuleConfigSchema):
    maxMessageLength = fields.Integer(
        load_default=4000,
        validate=validate.Range(min=1, max=100_000),
        metadata={"description": "longest message text accepted (REST and socket), in characters"},
    )
    allowMessageDelete = JsonBoolean(
        load_default=True,
        metadata={"description": "whether senders may delete their messages (administrators always may)"},
    )
