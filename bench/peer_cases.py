"""What the peer benchmark asks of each server: the Item schema and the five operations (paths, methods and
bodies for wrk), the same on Trellis and on Parse."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

SCHEMA = {"title": "String", "price": "Number", "tags": ["String"], "owner": "String"}
# Parse's seed indexes price only (Parse never indexes a field by itself); Trellis indexes every single-valued
# field unless it says ``index: false``. Like with like: only price, unless ``--index-all`` asks for
# Trellis's default (two more index entries per create, and per update, which rewrites every index).
LIKE_PARSE = {**SCHEMA, "title": {"type": "String", "index": False}, "owner": {"type": "String", "index": False}}
ACCESS = {"conduit": {"authorization": {"enabled": True}}}
CONNECTIONS = 16  # wrk -t1 -c16 against every server
NEW_ITEM = {"title": "Bench item", "price": 12.5, "tags": ["new", "sale"], "owner": "user1"}


def operations(
    ids: list[str],
    rnd: random.Random,
    common: dict[str, Any],
    collection: str,
    listed: Callable[[int, bool], str],
    update_method: str,
    editable: list[str] | None = None,
    new_item: dict[str, Any] = NEW_ITEM,
) -> dict[str, dict[str, Any]]:
    """The five operations on one server: ``ids`` are read by id, ``editable`` (by default ``ids``)
    updated; ``collection`` is the Items' path, ``listed(x, counted)`` a list's path (prices below x,
    sorted by price descending, 20 a page), ``new_item`` the body of a create."""
    sample = rnd.sample(ids, min(5000, len(ids)))
    changed = sample if editable is None else rnd.sample(editable, min(5000, len(editable)))
    xs = [rnd.randint(1, 950) for _ in range(20_000)]
    return {
        "get by id": {**common, "paths": [f"{collection}/{i}" for i in sample]},
        "list + exact count": {**common, "paths": [listed(x, True) for x in xs]},
        "list, no count": {**common, "paths": [listed(x, False) for x in xs]},
        "create": {**common, "paths": [collection], "method": "POST", "body": new_item},
        "update": {
            **common,
            "paths": [f"{collection}/{i}" for i in changed],
            "method": update_method,
            "body": {"price": 99.5},
        },
    }


def trellis_cases(
    ids: list[str], rnd: random.Random, headers: dict[str, str] | None = None, editable: list[str] | None = None
) -> dict[str, dict[str, Any]]:
    def listed(x: int, counted: bool) -> str:
        return f"/database/Item?price[$lt]={x}&sort=-price&limit=20" + ("" if counted else "&count=none")

    return operations(ids, rnd, {"headers": headers} if headers else {}, "/database/Item", listed, "PATCH", editable)
