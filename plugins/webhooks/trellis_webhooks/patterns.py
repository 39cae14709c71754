"""Event names and the patterns webhooks subscribe with: dotted, ``*`` standing for one segment."""

from __future__ import annotations

import re
from collections.abc import Iterable

from trellis.events import matches

PING = "ping"
SEGMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,99}$")
# Every event the modules publish (CONTRACT.md "Webhooks module"); None: any schema name.
TOPICS: tuple[tuple[str, frozenset[str] | None, frozenset[str]], ...] = (
    ("database", None, frozenset({"create", "update", "delete"})),
    ("authentication", frozenset({"user"}), frozenset({"create", "delete", "block", "unblock"})),
    ("forms", frozenset({"submission"}), frozenset({"create"})),
    ("storage", frozenset({"file"}), frozenset({"create", "delete"})),
    ("chat", frozenset({"message"}), frozenset({"create"})),
)


def matches_any(patterns: Iterable[str], topic: str) -> bool:
    """Whether one of ``patterns`` matches ``topic``, as the event log's subscriptions match (``*`` = one segment)."""
    return any(matches(pattern, topic) for pattern in patterns)


def problem(pattern: str) -> str | None:
    """Why ``pattern`` can never match an event (a typo), or None when it names some."""
    parts = pattern.split(".")
    if len(parts) != 3 or not all(part == "*" or SEGMENT.match(part) for part in parts):
        return f"{pattern!r} is not <module>.<thing>.<action> (segments of letters, digits, '_', '-', or '*')"
    module, thing, action = parts
    for known_module, things, actions in TOPICS:
        if module not in ("*", known_module):
            continue
        if thing != "*" and things is not None and thing not in things:
            continue
        if action == "*" or action in actions:
            return None
    return f"{pattern!r} matches no event (see the list of events in the Webhooks documentation)"
