"""A stored submission is recorded as the event forms.submission.create in its transaction."""

from __future__ import annotations

import json

from sqlalchemy import select

from trellis import db as trellis_db
from trellis.events import recorded


def test_submission_event_carries_the_submission_as_the_admin_routes_show_it(
    client, admin_headers, contact, valid_submission
):
    submitted = client.post(f"/forms/submit/{contact['_id']}", json=valid_submission).get_json()
    assert client.post(f"/forms/submit/{contact['_id']}", json={"name": "no email"}).status_code == 400
    assert (
        client.post(f"/forms/submit/{contact['_id']}", json={**valid_submission, "_gotcha": "bot"}).status_code == 201
    )
    events = recorded()
    rows = trellis_db.session.execute(
        select(events.c.topic, events.c.payload).where(events.c.family == "forms.submission")
    ).all()
    shown = client.get(f"/admin/forms/submissions/{submitted['submissionId']}", headers=admin_headers).get_json()
    assert [(topic, json.loads(payload)) for topic, payload in rows] == [("forms.submission.create", shown)]
