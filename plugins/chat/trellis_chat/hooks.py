"""What the Chat module does when the Authentication module blocks or deletes a user."""

from __future__ import annotations

from trellis import db
from trellis.hooks import hookimpl

from . import service
from .realtime import user_sockets


class ChatUserEvents:
    @hookimpl
    def trellis_user_blocked(self, user_id: str) -> None:
        # Called after the block is committed: a reconnect attempt is already refused.
        user_sockets().disconnect(user_id)

    @hookimpl
    def trellis_user_deleted(self, user_id: str) -> None:
        # Called inside the deleting transaction: leave the rooms with it, drop the sockets once it commits.
        service.forget_user(user_id)
        sockets = user_sockets()
        db.after_commit(lambda: sockets.disconnect(user_id))
