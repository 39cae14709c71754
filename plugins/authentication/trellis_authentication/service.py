"""What other modules may call (the Authentication module's service API); they never query its tables.

Everything else in this package is the module's own and may change shape.
"""

from __future__ import annotations

from .users import existing_ids, get_user

__all__ = ["existing_user_ids", "get_user"]


def existing_user_ids(user_ids: list[str]) -> set[str]:
    """Which of ``user_ids`` are users (one query; unknown ids are left out)."""
    return existing_ids(user_ids)
