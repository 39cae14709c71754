"""Files' events: storage.file.create on upload, storage.file.delete for every deleted record (folders too)."""

from __future__ import annotations

import json

from sqlalchemy import select

from trellis import db as trellis_db
from trellis.events import recorded


def file_events(owner: str) -> list[tuple[str, dict]]:
    """``owner``'s file events (a live-server test before this one leaves its newest event in the log)."""
    events = recorded()
    rows = trellis_db.session.execute(
        select(events.c.topic, events.c.payload).where(events.c.family == "storage.file").order_by(events.c.id)
    )
    events = [(topic, json.loads(payload)) for topic, payload in rows]
    return [(topic, payload) for topic, payload in events if payload["owner"] == owner]


def test_upload_and_deletes_are_recorded_with_the_file(client, upload, make_user):
    user = make_user()
    first = upload(user.headers).get_json()
    folder = client.post("/storage/folder", json={"name": "docs"}, headers=user.headers).get_json()
    second = upload(user.headers, filename="b.txt", folder=folder["_id"]).get_json()
    shown = client.get(f"/storage/file/{first['id']}", headers=user.headers).get_json()
    assert client.delete(f"/storage/file/{first['id']}", headers=user.headers).status_code == 200
    response = client.delete(f"/storage/folder/{folder['_id']}?recursive=true", headers=user.headers)
    assert response.status_code == 200
    events = file_events(user.id)
    assert [(topic, payload["_id"]) for topic, payload in events] == [
        ("storage.file.create", first["id"]),
        ("storage.file.create", second["id"]),
        ("storage.file.delete", first["id"]),
        ("storage.file.delete", second["id"]),
    ]
    assert events[0][1] == shown and events[2][1] == shown
    assert events[1][1]["folder"] == folder["_id"] and events[1][1]["displayName"] == "b.txt"
