"""Delivery of one text message: the outbox (keeps it, delivers nothing) and Twilio (official client).

A provider answers a :class:`Delivery` for every message and never raises for a delivery problem: the
caller records failures too, then decides what the HTTP answer is.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urlsplit, urlunsplit

import requests
from twilio.base.exceptions import TwilioException, TwilioRestException
from twilio.http.http_client import TwilioHttpClient
from twilio.rest import Client

from .config import TWILIO_API
from .models import FAILED, SENT

log = logging.getLogger(__name__)

TWILIO_TIMEOUT_SECONDS = 15


@dataclass(frozen=True)
class Delivery:
    status: str
    provider_message_id: str | None = None
    error: str | None = None


class Provider(Protocol):
    name: str

    def send(self, to: str, message: str) -> Delivery: ...

    def close(self) -> None: ...


class OutboxProvider:
    """The default: the recorded row is the whole delivery (read it at ``GET /admin/sms/outbox``)."""

    name = "outbox"

    def send(self, to: str, message: str) -> Delivery:
        return Delivery(SENT)

    def close(self) -> None:
        pass


class _BaseUrlHttpClient(TwilioHttpClient):
    """Twilio's documented way to reach another address: a custom HTTP client that rewrites the host.

    Used only when ``baseUrl`` is not Twilio's own (a local server speaking Twilio's API in tests).
    """

    def __init__(self, base_url: str, timeout: float) -> None:
        super().__init__(timeout=timeout)
        self._base = urlsplit(base_url.rstrip("/"))

    def request(self, method: str, url: str, *args: Any, **kwargs: Any):
        parts = urlsplit(url)
        path = self._base.path + parts.path
        url = urlunsplit((self._base.scheme, self._base.netloc, path, parts.query, parts.fragment))
        return super().request(method, url, *args, **kwargs)


class TwilioProvider:
    name = "twilio"

    def __init__(self, settings: dict[str, Any]) -> None:
        base_url = settings.get("baseUrl") or TWILIO_API
        http_client = (
            TwilioHttpClient(timeout=TWILIO_TIMEOUT_SECONDS)
            if base_url.rstrip("/") == TWILIO_API
            else _BaseUrlHttpClient(base_url, TWILIO_TIMEOUT_SECONDS)
        )
        # One client (one HTTP session) per request, reused for every recipient of a sendMany.
        self._client = Client(settings["accountSid"], settings["authToken"], http_client=http_client)
        self._from = settings["phoneNumber"]

    def send(self, to: str, message: str) -> Delivery:
        try:
            created = self._client.messages.create(to=to, from_=self._from, body=message)
        except TwilioRestException as exc:
            reason = f"Twilio refused the message (HTTP {exc.status}, code {exc.code}): {exc.msg}"
        except requests.RequestException as exc:
            reason = f"Twilio could not be reached: {exc.__class__.__name__}"
        except (TwilioException, ValueError) as exc:  # e.g. an answer that is not Twilio's JSON
            reason = f"Twilio answered unexpectedly: {exc.__class__.__name__}"
        else:
            return Delivery(SENT, provider_message_id=created.sid)
        log.warning("sms to %s not sent: %s", _masked(to), reason)
        return Delivery(FAILED, error=reason)

    def close(self) -> None:
        session = getattr(self._client.http_client, "session", None)
        if session is not None:
            session.close()


def _masked(number: str) -> str:
    """Logs keep only the last digits of a recipient's number."""
    return "…" + number[-3:]


def make_provider(config: dict[str, Any]) -> Provider:
    if config["provider"] == "twilio":
        return TwilioProvider(config["twilio"])
    return OutboxProvider()
