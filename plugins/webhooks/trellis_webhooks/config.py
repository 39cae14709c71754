"""The Webhooks module's configuration (``/config/webhooks``, ``/admin/webhooks/config``)."""

from __future__ import annotations

from trellis.fields import JsonBoolean
from trellis.module_config import ModuleConfigSchema


class WebhooksConfigSchema(ModuleConfigSchema):
    allowPrivateTargets = JsonBoolean(
        load_default=False,
        metadata={
            "description": "let webhooks target loopback, private, link-local and metadata addresses "
            "(development and tests only: otherwise anyone who may register a webhook can probe the internal network)"
        },
    )
