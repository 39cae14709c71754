"""What this module contributes to the core's hooks: turning user-token claims into a user."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trellis.hooks import hookimpl

from . import sessions


class UserTokens:
    @hookimpl
    def trellis_user_from_claims(self, claims: dict[str, Any]) -> Mapping[str, Any]:
        return sessions.user_from_claims(claims)
