"""REST routes of the Chat module. Writes are announced on the sockets after they commit."""

from __future__ import annotations

from typing import Any

from trellis.credentials import admin_required, require_caller, require_user, user_or_admin_required, user_required
from trellis.errors import ErrorSchema
from trellis.http import Blueprint, DeletedSchema, ListArgs, deleted

from . import service
from .realtime import broadcast, close_room, user_sockets
from .schemas import (
    ChatAddUsersSchema,
    ChatLeftSchema,
    ChatMessageCreateSchema,
    ChatMessageSchema,
    ChatRoomCreatedSchema,
    ChatRoomCreateSchema,
    ChatRoomSchema,
    MessageListSchema,
    RoomListSchema,
)

blp = Blueprint("chat", __name__, description="Chat rooms and messages (realtime: Socket.IO namespace /chat/)")


# --- user routes --------------------------------------------------------------------------------------


@blp.route("/chat/rooms", methods=["POST"])
@user_required
@blp.arguments(ChatRoomCreateSchema)
@blp.response(201, ChatRoomCreatedSchema)
def create_room(body: dict[str, Any]):
    """Create a room; the caller and ``users`` are its participants."""
    room, participants = service.create_room(require_user().id, body["roomName"], body["users"])
    user_sockets().join(participants, room.id)
    return {"roomId": room.id}


@blp.route("/chat/rooms", methods=["GET"])
@user_required
@blp.arguments(ListArgs, location="query")
@blp.response(200, RoomListSchema)
def list_rooms(args: dict[str, Any]):
    """The caller's rooms, newest first."""
    rooms, count = service.rooms_of(require_user().id, args["skip"], args["limit"])
    return {"rooms": rooms, "count": count}


@blp.route("/chat/rooms/<roomId>", methods=["GET"])
@user_required
@blp.response(200, ChatRoomSchema)
def get_room(roomId: str):
    return service.room_view(service.visible_room(require_user().id, roomId))


@blp.route("/chat/rooms/<roomId>/addUsers", methods=["PUT"])
@user_required
@blp.arguments(ChatAddUsersSchema)
@blp.response(200, ChatRoomSchema)
def add_users(body: dict[str, Any], roomId: str):
    """Add participants; their connected sockets join the room at once."""
    room, added = service.add_users(require_user().id, roomId, body["users"])
    user_sockets().join(added, roomId)
    return room


@blp.route("/chat/leave/<roomId>", methods=["PUT"])
@user_required
@blp.response(200, ChatLeftSchema)
def leave_room(roomId: str):
    """Stop taking part in a room; the caller's sockets stop receiving it, in every worker."""
    me = require_user().id
    service.leave(me, roomId)
    user_sockets().leave([me], roomId)
    return {"_id": roomId, "left": True}


@blp.route("/chat/rooms/<roomId>/messages", methods=["GET"])
@user_required
@blp.arguments(ListArgs, location="query")
@blp.response(200, MessageListSchema)
def list_messages(args: dict[str, Any], roomId: str):
    """Messages of a room, newest first."""
    service.visible_room(require_user().id, roomId)
    messages, count = service.messages_of(roomId, args["skip"], args["limit"])
    return {"messages": messages, "count": count}


@blp.route("/chat/rooms/<roomId>/messages", methods=["POST"])
@user_required
@blp.arguments(ChatMessageCreateSchema)
@blp.response(201, ChatMessageSchema)
def send_message(body: dict[str, Any], roomId: str):
    """Send a message; it is delivered to the room's sockets like one sent on the socket."""
    stored = service.send_message(require_user().id, roomId, body["message"])
    broadcast("message", stored, roomId)
    return stored


@blp.route("/chat/messages/<messageId>", methods=["DELETE"])
@user_or_admin_required
@blp.response(200, DeletedSchema)
@blp.alt_response(403, schema=ErrorSchema, description="Not the sender")
def delete_message(messageId: str):
    """Delete a message: its sender, or an administrator."""
    identity = require_caller()
    message = service.delete_message(messageId, None if identity.is_admin else identity.id)
    broadcast("messageDeleted", {"_id": message.id, "room": message.room_id}, message.room_id)
    return deleted(messageId)


# --- admin routes -------------------------------------------------------------------------------------


@blp.route("/admin/chat/rooms", methods=["GET"])
@admin_required
@blp.arguments(ListArgs, location="query")
@blp.response(200, RoomListSchema)
def admin_list_rooms(args: dict[str, Any]):
    rooms, count = service.all_rooms(args["skip"], args["limit"])
    return {"rooms": rooms, "count": count}


@blp.route("/admin/chat/rooms/<roomId>/messages", methods=["GET"])
@admin_required
@blp.arguments(ListArgs, location="query")
@blp.response(200, MessageListSchema)
def admin_list_messages(args: dict[str, Any], roomId: str):
    service.get_room(roomId)
    messages, count = service.messages_of(roomId, args["skip"], args["limit"])
    return {"messages": messages, "count": count}


@blp.route("/admin/chat/rooms/<roomId>", methods=["DELETE"])
@admin_required
@blp.response(200, DeletedSchema)
def admin_delete_room(roomId: str):
    """Delete a room with its messages; its sockets are told (``roomDeleted``) and leave it."""
    service.delete_room(roomId)
    broadcast("roomDeleted", {"_id": roomId}, roomId)
    close_room(roomId)
    return deleted(roomId)
