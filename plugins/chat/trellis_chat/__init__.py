"""Trellis Chat module: rooms, messages, and the Socket.IO channel (namespace ``/chat/``).

Requires the Authentication module: participants are its users, sockets authenticate with its
access tokens; a blocked or deleted user's sockets end through the core's registry of live connections.
"""

from __future__ import annotations

from pathlib import Path

from trellis import ConsolePage, EventTopic, Module, OwnedSchema

from .config import ChatConfig
from .hooks import ChatUserEvents
from .realtime import init_app, namespace_factories
from .routes import blp
from .schemas import ChatMessageSchema

ROOM_SCHEMA = OwnedSchema(
    name="ChatRoom",
    fields={
        "name": {"type": "String", "required": True},
        "participants": [{"type": "Relation", "model": "User"}],
        "creator": {"type": "Relation", "model": "User", "required": True},
    },
    owner_module="chat",
)

MESSAGE_SCHEMA = OwnedSchema(
    name="ChatMessage",
    fields={
        "room": {"type": "Relation", "model": "ChatRoom", "required": True},
        "sender": {"type": "Relation", "model": "User", "required": True},
        "message": {"type": "String", "required": True},
    },
    owner_module="chat",
)

# The files of the module's page in the admin console (see ConsolePage).
CONSOLE = Path(__file__).parent / "console"

module = Module(
    name="chat",
    requires=("authentication",),
    description="Chat rooms and messages with a realtime Socket.IO channel",
    blueprints=(blp,),
    config_schema=ChatConfig,
    migrations=str(Path(__file__).parent / "migrations" / "versions"),
    console_pages=(ConsolePage("chat", "Chat", str(CONSOLE / "chat.html")),),
    socket_namespaces=namespace_factories(),
    owned_schemas=(ROOM_SCHEMA, MESSAGE_SCHEMA),
    events=(EventTopic("chat.message.create", "A message was sent in a room", ChatMessageSchema),),
    hooks=(ChatUserEvents(),),
    init_app=init_app,
)
