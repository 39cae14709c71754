"""What this module does on other modules' events."""

from __future__ import annotations

from trellis.hooks import hookimpl

from . import service


class UserCleanup:
    @hookimpl
    def trellis_user_deleted(self, user_id: str) -> None:
        service.forget_user(user_id)
