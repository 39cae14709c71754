"""What the Chat module does when the Authentication module deletes a user (its sockets end through the
core's registry of live connections, ``trellis.connections``)."""

from __future__ import annotations

from trellis.hooks import hookimpl

from . import service


class ChatUserEvents:
    @hookimpl
    def trellis_user_deleted(self, user_id: str) -> None:
        # Called inside the deleting transaction: leave the rooms with it.
        service.forget_user(user_id)
