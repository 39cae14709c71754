"""Delivery providers. Each turns an :class:`Outgoing` message into a delivery and reports the provider's id.

``outbox`` delivers nothing (the send record is the message); ``smtp`` speaks SMTP with smtplib;
``mailgun`` and ``sendgrid`` call their HTTP APIs (base URL configurable). Only the HTTP providers
keep templates, so only they implement ``upload_template`` and ``list_templates``.
"""

from __future__ import annotations

from typing import Any

from .base import (
    Outbox,
    Outgoing,
    Provider,
    ProviderFailure,
    RemoteTemplate,
    TemplatesUnsupported,
    html_to_text,
)
from .mailgun import Mailgun
from .sendgrid import SendGrid
from .smtp import Smtp

__all__ = [
    "Outbox",
    "Outgoing",
    "Provider",
    "ProviderFailure",
    "RemoteTemplate",
    "TemplatesUnsupported",
    "for_config",
    "html_to_text",
]


def for_config(config: dict[str, Any]) -> Provider:
    """The provider chosen by the module configuration, built from its section."""
    kinds: dict[str, Any] = {"outbox": Outbox, "smtp": Smtp, "mailgun": Mailgun, "sendgrid": SendGrid}
    name = config["provider"]
    return kinds[name](config[name])
