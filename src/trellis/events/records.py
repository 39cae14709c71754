"""What an event is: a numbered event as consumers get it, and as the sequencer numbered it (its payload
still the stored JSON text), with the topic's family and pattern matching."""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .. import db


@dataclass(frozen=True)
class Event:
    """A numbered event. ``payload`` is shared by every consumer: read it, never change it."""

    id: int
    topic: str
    family: str
    payload: dict
    created_at: str


@dataclass(frozen=True)
class Numbered:
    """An event as the sequencer numbered it, its payload still the stored JSON text: a publication carries
    that text as it is, not decoded only to be encoded again
    (``bench/results/event_log.md#publication-payload-text``)."""

    id: int
    topic: str
    family: str
    payload: str
    created_at: str

    def event(self) -> Event:
        return Event(self.id, self.topic, self.family, json.loads(self.payload), self.created_at)

    def wire(self) -> str:
        """``[id, topic, family, payload, created_at]`` as JSON text (what a receiver decodes)."""
        # created_at is an ISO 8601 time (digits, "-", ":", ".", "T", "+"): nothing in it to escape.
        return f'[{self.id},{_json_text(self.topic)},{_json_text(self.family)},{self.payload},"{self.created_at}"]'


@functools.lru_cache(maxsize=1024)
def _json_text(value: str) -> str:
    """A topic's or a family's JSON text (the same few in every batch)."""
    return json.dumps(value, ensure_ascii=False)


def family_of(topic: str) -> str:
    """The first two segments: ``database.Item.update`` → ``database.Item``."""
    return ".".join(topic.split(".", 2)[:2])


def matches(pattern: str, topic: str) -> bool:
    """Whether ``topic`` matches ``pattern`` (dotted, ``*`` = one segment)."""
    wanted, parts = pattern.split("."), topic.split(".")
    return len(wanted) == len(parts) and all(w in ("*", p) for w, p in zip(wanted, parts, strict=True))


def payload_text(payload: dict | str) -> str:
    """A payload's JSON text: a text given is kept as it is (serialised once, never re-encoded)."""
    return payload if isinstance(payload, str) else json.dumps(payload, ensure_ascii=False, separators=(",", ":"))


def numbered_from_row(row: Any) -> Numbered:
    """A row ``(event_id, topic, family, payload, created_at)`` of the log as a :class:`Numbered`."""
    payload = row[3]
    text = payload if isinstance(payload, str) else json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    return Numbered(row[0], row[1], row[2], text, _stamp(row[4]))


def _stamp(value: datetime | str) -> str:
    return value if isinstance(value, str) else db.isoformat(value)
