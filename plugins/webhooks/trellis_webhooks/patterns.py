"""Event names and the patterns webhooks subscribe with: dotted, ``*`` standing for one segment."""

from __future__ import annotations

import re
from collections.abc import Iterable

from trellis import events
from trellis.events import matches
from trellis.modules import overlaps

PING = "ping"
SEGMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,99}$")


def matches_any(patterns: Iterable[str], topic: str) -> bool:
    """Whether one of ``patterns`` matches ``topic``, as the event log's subscriptions match (``*`` = one segment)."""
    return any(matches(pattern, topic) for pattern in patterns)


def problem(pattern: str) -> str | None:
    """Why ``pattern`` can never match an event (a typo), or None when it names some: the events are the
    topics the loaded modules declare (``Module.events``), a third-party module's as well as ours."""
    parts = pattern.split(".")
    if len(parts) != 3 or not all(part == "*" or SEGMENT.match(part) for part in parts):
        return f"{pattern!r} is not <module>.<thing>.<action> (segments of letters, digits, '_', '-', or '*')"
    if any(overlaps(topic.pattern, pattern) for topic in events.topics()):
        return None
    return f"{pattern!r} matches no event (see the list of events in the Webhooks documentation)"
