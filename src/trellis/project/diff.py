"""How two versions of a thing differ, as a person reads it: the paths added, removed and changed."""

from __future__ import annotations

from typing import Any

from trellis.redact import MASK


def differences(old: Any, new: Any, path: str = "", secrets: frozenset[str] = frozenset()) -> list[dict[str, Any]]:
    """``[{op: add|remove|change, path, from?, to?}]`` from ``old`` to ``new``: objects are followed key by
    key, anything else (lists included) compares whole. Values at ``secrets`` paths show as the mask."""
    if isinstance(old, dict) and isinstance(new, dict):
        found: list[dict[str, Any]] = []
        for key in sorted(set(old) | set(new), key=str):
            where = f"{path}.{key}" if path else str(key)
            if key not in old:
                found.append({"op": "add", "path": where, "to": _shown(new[key], where, secrets)})
            elif key not in new:
                found.append({"op": "remove", "path": where, "from": _shown(old[key], where, secrets)})
            elif old[key] != new[key]:
                found.extend(differences(old[key], new[key], where, secrets))
        return found
    if old == new:
        return []
    return [{"op": "change", "path": path, "from": _shown(old, path, secrets), "to": _shown(new, path, secrets)}]


def _shown(value: Any, path: str, secrets: frozenset[str]) -> Any:
    return MASK if path in secrets and value not in (None, "") else value
