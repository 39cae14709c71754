"""Rooms and messages: every database operation of the Chat module, shared by REST and Socket.IO.

Access rule: a room exists, for a user, only if the user is one of its participants (else 404).
Each write is one transaction, committed here; callers announce it on the sockets after the commit.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from sqlalchemy import delete, exists, select

from trellis import audit, db, events
from trellis.errors import bad_request, forbidden, not_found
from trellis.http import paginate
from trellis.module_config import get as get_config
from trellis_authentication.service import existing_user_ids  # the module this one requires

from .models import Message, Participant, Room

MODULE = "chat"


def config() -> dict[str, Any]:
    return get_config(MODULE)


# --- shapes -----------------------------------------------------------------------------------------


def room_dict(room: Room, participants: list[str]) -> dict[str, Any]:
    return {
        "_id": room.id,
        "name": room.name,
        "participants": participants,
        "creator": room.creator_id,
        "createdAt": db.isoformat(room.created_at),
    }


def message_dict(message: Message) -> dict[str, Any]:
    return {
        "_id": message.id,
        "room": message.room_id,
        "sender": message.sender_id,
        "message": message.message,
        "createdAt": db.isoformat(message.created_at),
    }


def participants_of(room_ids: Iterable[str]) -> dict[str, list[str]]:
    """Participants of several rooms in one query, each list in joining order."""
    ids = list(room_ids)
    found: dict[str, list[str]] = defaultdict(list)
    if not ids:
        return found
    rows = db.session.execute(
        select(Participant.room_id, Participant.user_id)
        .where(Participant.room_id.in_(ids))
        .order_by(Participant.joined_at, Participant.user_id)
    )
    for room_id, user_id in rows:
        found[room_id].append(user_id)
    return found


def _rooms_with_participants(rooms: list[Room]) -> list[dict[str, Any]]:
    members = participants_of(room.id for room in rooms)
    return [room_dict(room, members[room.id]) for room in rooms]


# --- users --------------------------------------------------------------------------------------------


def _unique(ids: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(ids))


def check_users_exist(user_ids: list[str]) -> None:
    """400 naming the ids that are not Authentication users."""
    known = existing_user_ids(user_ids)
    unknown = [user_id for user_id in user_ids if user_id not in known]
    if unknown:
        raise bad_request("Unknown user ids", {"users": [f"No user with id {user_id!r}." for user_id in unknown]})


# --- rooms --------------------------------------------------------------------------------------------


def create_room(creator_id: str, name: str, users: list[str]) -> tuple[Room, list[str]]:
    """A room whose participants are the creator and ``users``; returns it with the participant ids."""
    invited = [user_id for user_id in _unique(users) if user_id != creator_id]
    check_users_exist(invited)
    now = db.utcnow()
    room = Room(id=db.new_id(), name=name, creator_id=creator_id, created_at=now)
    db.session.add(room)
    db.session.flush()  # the room row first: participants reference it
    participants = [creator_id, *invited]
    db.session.add_all(Participant(room_id=room.id, user_id=user_id, joined_at=now) for user_id in participants)
    db.session.commit()
    return room, participants


def is_participant(user_id: str, room_id: str) -> bool:
    return db.session.execute(
        select(exists().where(Participant.room_id == room_id, Participant.user_id == user_id))
    ).scalar_one()


def visible_room(user_id: str, room_id: str) -> Room:
    """The room if ``user_id`` takes part in it; otherwise 404, as if it did not exist."""
    room = db.session.execute(
        select(Room)
        .join(Participant, Participant.room_id == Room.id)
        .where(Room.id == room_id, Participant.user_id == user_id)
    ).scalar_one_or_none()
    if room is None:
        raise not_found("No chat room with this id")
    return room


def get_room(room_id: str) -> Room:
    room = db.session.get(Room, room_id)
    if room is None:
        raise not_found("No chat room with this id")
    return room


def room_view(room: Room) -> dict[str, Any]:
    return room_dict(room, participants_of([room.id])[room.id])


def rooms_of(user_id: str, skip: int, limit: int) -> tuple[list[dict[str, Any]], int]:
    query = select(Room).join(Participant, Participant.room_id == Room.id).where(Participant.user_id == user_id)
    rooms, total = paginate(query, skip, limit, order_by=(Room.created_at.desc(), Room.id))
    return _rooms_with_participants(rooms), total


def all_rooms(skip: int, limit: int) -> tuple[list[dict[str, Any]], int]:
    rooms, total = paginate(select(Room), skip, limit, order_by=(Room.created_at.desc(), Room.id))
    return _rooms_with_participants(rooms), total


def room_ids_of(user_id: str) -> list[str]:
    return list(db.session.execute(select(Participant.room_id).where(Participant.user_id == user_id)).scalars())


def add_users(user_id: str, room_id: str, users: list[str]) -> tuple[dict[str, Any], list[str]]:
    """Add users to a room the caller takes part in; returns the room and the ids that were new."""
    room = visible_room(user_id, room_id)
    current = set(participants_of([room_id])[room_id])
    added = [candidate for candidate in _unique(users) if candidate not in current]
    check_users_exist(added)
    now = db.utcnow()
    db.session.add_all(Participant(room_id=room_id, user_id=candidate, joined_at=now) for candidate in added)
    db.session.commit()
    return room_view(room), added


def leave(user_id: str, room_id: str) -> None:
    """The caller stops taking part. The room and its history stay (administrators still see them)."""
    visible_room(user_id, room_id)
    db.session.execute(delete(Participant).where(Participant.room_id == room_id, Participant.user_id == user_id))
    db.session.commit()


def delete_room(room_id: str) -> None:
    get_room(room_id)
    # Participants and messages go with it (ON DELETE CASCADE on both databases).
    db.session.execute(delete(Room).where(Room.id == room_id))
    audit.record("chat", "room.delete", room_id)
    db.session.commit()


def forget_user(user_id: str) -> None:
    """A deleted user leaves every room. Runs in the deleting transaction, so no commit here.

    Messages stay: they are part of a conversation other participants still read.
    """
    db.session.execute(delete(Participant).where(Participant.user_id == user_id))


# --- messages -----------------------------------------------------------------------------------------


def check_text(text: Any) -> str:
    if not isinstance(text, str) or not text.strip():
        raise bad_request("The message must be a non-empty string", {"message": ["Must be a non-empty string."]})
    longest = config()["maxMessageLength"]
    if len(text) > longest:
        raise bad_request("The message is too long", {"message": [f"Longer than maximum length {longest}."]})
    return text


def send_message(user_id: str, room_id: Any, text: Any) -> dict[str, Any]:
    """Store a message from a participant; returns it as sent to clients."""
    if not isinstance(room_id, str) or not room_id:
        raise bad_request("roomId must be a non-empty string", {"roomId": ["Must be a non-empty string."]})
    text = check_text(text)
    if not is_participant(user_id, room_id):
        raise not_found("No chat room with this id")
    message = Message(id=db.new_id(), room_id=room_id, sender_id=user_id, message=text, created_at=db.utcnow())
    db.session.add(message)
    sent = message_dict(message)
    events.record("chat.message.create", sent)  # in the message's transaction (webhooks)
    db.session.commit()
    return sent


def messages_of(room_id: str, skip: int, limit: int) -> tuple[list[dict[str, Any]], int]:
    """Newest first; the index on (room_id, created_at, id) serves the order."""
    query = select(Message).where(Message.room_id == room_id)
    messages, total = paginate(query, skip, limit, order_by=(Message.created_at.desc(), Message.id.desc()))
    return [message_dict(m) for m in messages], total


def delete_message(message_id: str, user_id: str | None) -> Message:
    """``user_id`` None means an administrator. A user must be the sender (403), in the room (else 404)."""
    message = db.session.get(Message, message_id)
    if message is None:
        raise not_found("No chat message with this id")
    if user_id is not None:
        if not is_participant(user_id, message.room_id):
            raise not_found("No chat message with this id")
        if message.sender_id != user_id:
            raise forbidden("Only the sender of a message may delete it")
        if not config()["allowMessageDelete"]:
            raise forbidden("Deleting messages is disabled in the chat configuration")
    db.session.execute(delete(Message).where(Message.id == message_id))
    audit.record("chat", "message.delete", message_id, {"room": message.room_id})  # only an admin's delete
    db.session.commit()
    return message
