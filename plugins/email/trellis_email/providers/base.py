"""What every delivery provider shares: the message, the failures, the provider protocol, the outbox."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Any, Protocol

from ..addresses import Address


class ProviderFailure(Exception):
    """The provider refused or could not be reached; the message is safe to store and show (no secrets)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status  # the provider's HTTP status, when it answered


class TemplatesUnsupported(Exception):
    """The configured provider keeps no templates (outbox, smtp)."""


@dataclass(frozen=True)
class Outgoing:
    to: Address
    sender: Address
    subject: str
    html: str

    @property
    def text(self) -> str:
        return html_to_text(self.html)


@dataclass(frozen=True)
class RemoteTemplate:
    """A template as the provider holds it."""

    external_id: str
    name: str
    subject: str
    body: str | None  # None: the provider holds no active content for it


class Provider(Protocol):
    name: str

    def send(self, message: Outgoing) -> str | None:
        """Deliver; return the provider's message id (None when it has none)."""

    def upload_template(self, name: str, subject: str, body: str, external_id: str | None) -> str:
        """Create or update the provider's copy; return its external id."""

    def list_templates(self) -> Iterator[RemoteTemplate]:
        """Every template the provider holds, with its active content."""


class Outbox:
    """Keeps every message in the send record and delivers nothing (the default)."""

    name = "outbox"

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config

    def send(self, message: Outgoing) -> str | None:
        return None

    def upload_template(self, name: str, subject: str, body: str, external_id: str | None) -> str:
        raise TemplatesUnsupported(self.name)

    def list_templates(self) -> Iterator[RemoteTemplate]:
        raise TemplatesUnsupported(self.name)


class _TextExtractor(HTMLParser):
    _SKIP = {"script", "style", "head", "title"}
    _BREAKS = {"br", "p", "div", "tr", "li", "h1", "h2", "h3", "h4", "h5", "h6", "table"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skipping = 0

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        if tag in self._SKIP:
            self._skipping += 1
        elif tag in self._BREAKS:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in self._SKIP and self._skipping:
            self._skipping -= 1
        elif tag in self._BREAKS:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self._skipping:
            self.parts.append(data)


def html_to_text(html: str) -> str:
    """A plain-text alternative of an HTML body (mail clients and spam filters expect one)."""
    extractor = _TextExtractor()
    extractor.feed(html)
    extractor.close()
    lines = (" ".join(line.split()) for line in "".join(extractor.parts).splitlines())
    text, blank = [], False
    for line in lines:
        if line or not blank:
            text.append(line)
        blank = not line
    return "\n".join(text).strip()
