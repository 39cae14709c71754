"""Request and response bodies of the chat routes (validation and OpenAPI from one place)."""

from __future__ import annotations

from marshmallow import Schema, fields, validate

from trellis.fields import BoundedList
from trellis.http import list_schema

MAX_USERS_PER_REQUEST = 1000

_user_ids = BoundedList(
    fields.String(validate=validate.Length(min=1, max=64)),
    required=True,
    max_items=MAX_USERS_PER_REQUEST,
    metadata={"description": "user ids (``_id`` of Authentication users)"},
)


class ChatRoomCreateSchema(Schema):
    roomName = fields.String(required=True, validate=validate.Length(min=1, max=200))
    users = _user_ids


class ChatRoomCreatedSchema(Schema):
    roomId = fields.String(required=True)


class ChatAddUsersSchema(Schema):
    users = BoundedList(
        fields.String(validate=validate.Length(min=1, max=64)),
        required=True,
        min_items=1,
        max_items=MAX_USERS_PER_REQUEST,
    )


class ChatRoomSchema(Schema):
    _id = fields.String(required=True)
    name = fields.String(required=True)
    participants = fields.List(
        fields.String(), required=True, metadata={"description": "user ids, earliest joiners first"}
    )
    creator = fields.String(required=True)
    createdAt = fields.String(required=True, metadata={"format": "date-time"})


class ChatLeftSchema(Schema):
    _id = fields.String(required=True, metadata={"description": "the room left"})
    left = fields.Boolean(required=True)


class ChatMessageCreateSchema(Schema):
    message = fields.String(required=True, validate=validate.Length(min=1))


class ChatMessageSchema(Schema):
    _id = fields.String(required=True)
    room = fields.String(required=True)
    sender = fields.String(required=True)
    message = fields.String(required=True)
    createdAt = fields.String(required=True, metadata={"format": "date-time"})


RoomListSchema = list_schema("ChatRoomList", "rooms", ChatRoomSchema)
MessageListSchema = list_schema("ChatMessageList", "messages", ChatMessageSchema)
