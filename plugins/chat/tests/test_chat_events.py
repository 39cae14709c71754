"""A sent message is recorded as the event chat.message.create in its transaction."""

from __future__ import annotations

import json

from sqlalchemy import select

from trellis import db as trellis_db
from trellis.events import recorded


def test_message_event_carries_the_message_as_sent(chat, make_user):
    owner = make_user()
    room = chat.create_room(owner, [])
    sent = chat.send(owner, room, "hello")
    events = recorded()
    rows = trellis_db.session.execute(select(events.c.topic, events.c.payload).where(events.c.family == "chat.message"))
    assert [(topic, json.loads(payload)) for topic, payload in rows] == [("chat.message.create", sent)]
