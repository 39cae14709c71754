"""A plan as a person reads it in a terminal (the CLI prints it; ``docs/operations.md`` shows one)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

_SIGN = {"create": "+", "update": "~", "delete": "-"}
_OP = {"add": "+", "remove": "-", "change": "~"}


def describe(changes: Sequence[dict[str, Any]]) -> str:
    """``changes`` as ``GET``-shaped dicts (``Change.shown()``), one block per change, then a summary line."""
    lines: list[str] = []
    for change in changes:
        lines.append(f"{_SIGN[change['action']]} {change['module']} {change['kind']} {change['name']}")
        for item in change.get("detail") or []:
            if item["op"] == "change":
                lines.append(f"    ~ {item['path']}: {_value(item['from'])} → {_value(item['to'])}")
            else:
                value = item["to"] if item["op"] == "add" else item["from"]
                lines.append(f"    {_OP[item['op']]} {item['path']}: {_value(value)}")
    counts = {action: sum(1 for c in changes if c["action"] == action) for action in _SIGN}
    if not changes:
        lines.append("No changes: the server already is what the project says.")
    else:
        lines.append(f"Plan: {counts['create']} to create, {counts['update']} to update, {counts['delete']} to delete.")
    return "\n".join(lines) + "\n"


def _value(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)
